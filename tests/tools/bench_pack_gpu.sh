#!/bin/sh
# Packed chunks of small GPU entries go only to a peer that takes them into
# its GPU memory (HELLO_F_PACK_GPU, docs/API.md), over the CUDA test doubles
# (no GPU needed): tpx-bench writes 64 x 32 KiB blocks of "GPU" memory
#  1. to a staging server: packed (a handful of chunks), every byte checked;
#  2. to a server in unpack mode (TPX_SOCK_UNPACK=1, which cannot scatter a
#     packed chunk on its GPU and so does not offer the flag): one chunk per
#     block, every byte checked. A client that packed anyway would fail
#     there (the server refuses packed chunks into its GPU memory).
# usage: bench_pack_gpu.sh TPX_BENCH FAKE_CUDA_DIR
set -u
bench=$1 fake=$2
# shellcheck source=tests/tools/proc_wait.sh
. "$(dirname "$0")/proc_wait.sh"
export LD_LIBRARY_PATH=$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FAKE_CUDA_DEVICES=1 TPX_UNPACK=d2d TPX_SOCK_STRICT=1 \
  TPX_SOCKET_IFNAME=lo

# one NAME UNPACK: a server (TPX_SOCK_UNPACK=UNPACK) and a checked client
# write; sets n to the chunk count of the client's first write.
one() {
  name=$1
  TPX_SOCK_UNPACK=$2 "$bench" server --host 127.0.0.1 --port 0 --mem cuda >"$dir/$name-server.log" 2>&1 &
  spid=$!
  wait_for "listening on port" "$dir/$name-server.log" 100 || die "$name: server did not start"
  port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$dir/$name-server.log" | head -n 1)
  TPX_LOG=trace timeout 60 "$bench" client 127.0.0.1 --port "$port" --mem cuda --block-size 32K --batch 64 \
    --iters 2 --warmup 0 --op write --check --progress off >"$dir/$name-client.log" 2>&1 ||
    die "$name: client failed"
  wait_exit $spid 100 || die "$name: server exit status $? (wanted 0)"
  spid=""
  grep -q '^\[CHECK\] server: ok' "$dir/$name-server.log" || die "$name: server did not verify the bytes"
  n=$(sed -n 's/.*write [0-9]* posted (2097152 bytes, \([0-9]*\) chunks).*/\1/p' "$dir/$name-client.log" | head -n 1)
}

one staging 0
[ -n "$n" ] && [ "$n" -lt 64 ] || die "to a staging server: ${n:-no} chunks (wanted packed, fewer than 64)"
one unpack 1
[ "$n" = 64 ] || die "to an unpack-mode server: ${n:-no} chunks (wanted 64, one per block)"
echo "PASS"
