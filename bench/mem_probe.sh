#!/usr/bin/env bash
# Is host memory what limits GPU memory over loopback on one host? (issue 18)
# Measures, in one run: host copy bandwidth by threads (bench/membw.c),
# pinned D2H / H2D copies alone (bench/gpu_copy.py, PyTorch), 8 iperf3 pairs
# alone, and each of them while another runs: D2H during 16 copying threads,
# 8 copying threads during iperf3, iperf3 during D2H and during H2D.
#   bench/mem_probe.sh            (needs cc, python3 with torch and a GPU, iperf3)
set -eu -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -pthread "$here/membw.c" -o "$tmp/membw"
py=${PYTHON:-python3}

iperf8() { # 8 iperf3 pairs on loopback for $1 s: the total GB/s
  local i ps=""
  for i in 0 1 2 3 4 5 6 7; do iperf3 -s -1 -p $((5301 + i)) >/dev/null 2>&1 & ps="$ps $!"; done
  sleep 0.5
  for i in 0 1 2 3 4 5 6 7; do iperf3 -c 127.0.0.1 -p $((5301 + i)) -t "$1" -J >"$tmp/c$i.json" & done
  wait
  "$py" -c "import json,glob; print('iperf3 x8: %.1f GB/s' % (sum(json.load(open(f))['end']['sum_received']['bits_per_second'] for f in glob.glob('$tmp/c*.json')) / 8e9))"
}

echo "# mem_probe $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs"
for th in 1 4 8 16; do "$tmp/membw" $th 64 2; done
"$py" "$here/gpu_copy.py" d2h 2
"$py" "$here/gpu_copy.py" h2d 2
iperf8 3
echo "# D2H while 16 threads copy"
"$tmp/membw" 16 64 5 & sleep 1; "$py" "$here/gpu_copy.py" d2h 2; wait
echo "# 8 threads copy while iperf3 x8 runs"
iperf8 4 & sleep 1; "$tmp/membw" 8 64 2; wait
echo "# iperf3 x8 while D2H runs"
"$py" "$here/gpu_copy.py" d2h 6 & sleep 2; iperf8 3; wait
echo "# iperf3 x8 while H2D runs"
"$py" "$here/gpu_copy.py" h2d 6 & sleep 2; iperf8 3; wait
iperf8 3
