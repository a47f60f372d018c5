#!/bin/sh
# What the tools say about the configuration (docs/CONFIG.md):
#  - a refused setting is reported once per process, though tpx-bench reads
#    the environment once for the process and again for each endpoint and
#    transport it makes; a failed transport open still names its reason;
#  - tpx-info lists the values that differ from the defaults first.
# usage: config_report.sh TPX_BENCH TPX_INFO
set -u
bench=$1 info=$2
fails=0
err=$(mktemp)
out=$(mktemp)
trap 'rm -f "$err" "$out"' EXIT
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

# A loopback run with one bad and one good setting: the run works, the bad
# one is named once.
TPX_LOG=warn TPX_NUM_CHANNELS=abc timeout 60 "$bench" loopback --size 64K --iters 2 --progress off \
  >"$out" 2>"$err"
rc=$?
n=$(grep -c 'TPX_NUM_CHANNELS=abc' "$err")
[ $rc -eq 0 ] || fail "tpx-bench loopback with TPX_NUM_CHANNELS=abc exited $rc: $(tail -n 2 "$err")"
[ "$n" -eq 1 ] || fail "TPX_NUM_CHANNELS=abc reported $n times (want once): $(cat "$err")"

# A transport that cannot open: the reason reaches the user once.
TPX_LOG=warn TPX_NET_PLUGIN=/nonexistent/libnccl-net-none.so timeout 30 "$bench" loopback --size 64K \
  --iters 1 --progress off >"$out" 2>"$err"
rc=$?
[ $rc -ne 0 ] || fail "tpx-bench with a missing plugin exited 0"
grep -q 'libnccl-net-none' "$err" || fail "tpx-bench with a missing plugin does not name it: $(cat "$err")"

# tpx-info: the set values first, each part in tier order.
TPX_WINDOW=8 TPX_MAX_PEERS=99 timeout 30 "$info" >"$out" 2>"$err"
cfg=$(sed -n '/^== configuration/,$p' "$out")
first=$(printf '%s\n' "$cfg" | sed -n '2p')
[ "$first" = "# set (not the default)" ] || fail "tpx-info's configuration starts with '$first'"
line_of() { printf '%s\n' "$cfg" | grep -n "^$1 " | head -n 1 | cut -d: -f1; }
w=$(line_of TPX_WINDOW) m=$(line_of TPX_MAX_PEERS) l=$(line_of TPX_ETCD_JOB) d=$(printf '%s\n' "$cfg" | grep -n '^# defaults' | cut -d: -f1)
if [ -z "$w" ] || [ -z "$m" ] || [ -z "$l" ] || [ -z "$d" ]; then
  fail "tpx-info's configuration lacks TPX_WINDOW, TPX_MAX_PEERS, TPX_ETCD_JOB or '# defaults': $cfg"
elif ! { [ "$w" -lt "$m" ] && [ "$m" -lt "$d" ] && [ "$d" -lt "$l" ]; }; then
  fail "tpx-info's order: TPX_WINDOW $w, TPX_MAX_PEERS $m, '# defaults' $d, TPX_ETCD_JOB $l"
fi
printf '%s\n' "$cfg" | grep -q '^TPX_WINDOW  *8$' || fail "tpx-info does not show TPX_WINDOW 8"

[ $fails -eq 0 ] && echo "config_report: all checks passed"
exit $((fails > 0))
