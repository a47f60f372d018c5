#!/usr/bin/env bash
# What two processes on one GPU get from staging copies: pinned
# host <-> GPU copies in 512 KiB pieces on 4 streams, by SM kernel and by
# copy engine (bench/copy_share.cu), each way alone, then one process copying
# host-to-device while another copies device-to-host, as the receiving and
# the sending tpx-bench do when both run on one GPU.
#   bench/copy_share.sh            (needs nvcc and a GPU; about 30 s)
# Environment: CHUNK (524288), BLOCKS (8: the engine's copy of one 512 KiB
# piece), NSTREAMS (4), MIB (256 per pass), REPS (300 passes when sharing).
set -eu -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chunk=${CHUNK:-524288} blocks=${BLOCKS:-8} ns=${NSTREAMS:-4} mib=${MIB:-256} reps=${REPS:-300}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
"$nvcc" -O2 -o "$tmp/copy_share" "$here/copy_share.cu"
cs() {
  local way=$1
  shift
  "$tmp/copy_share" "$way" "$chunk" "$blocks" "$ns" "$mib" "$@"
}

echo "# copy_share $(date -u +%Y-%m-%dT%H:%MZ), $(nvidia-smi -L | head -1)"
echo "# each way alone"
for way in h2d d2h; do cs $way; done
for way in sm ce; do
  echo "# $way: h2d and d2h at once, two processes"
  cs h2d "$reps" "$way" >"$tmp/a" &
  a=$!
  cs d2h "$reps" "$way" >"$tmp/b" &
  b=$!
  wait "$a"
  wait "$b"
  cat "$tmp/a" "$tmp/b"
done
