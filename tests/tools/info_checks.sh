#!/bin/sh
# tpx-info's verdict and what it tells of the build (issue 44): a rejected
# setting fails its checks (exit status 1, the variable and the range in the
# user's units named); the build's features and wire protocol are shown, and
# each device's address; every tool's --version names the wire protocol.
# Usage: info_checks.sh TPX_INFO [OTHER_TOOL...]
set -u
info=$1
shift
out=$(mktemp "${TMPDIR:-/tmp}/tpx-info.XXXXXX") || exit 2
trap 'rm -f "$out"' EXIT
fail() { echo "info_checks: FAIL: $*" >&2; cat "$out" >&2; exit 1; }
unset TPX_LOG
export TPX_SOCKET_IFNAME=lo

"$info" >"$out" 2>&1 || fail "exit status $? with a clean environment"
grep -q "ok             no warnings" "$out" || fail "no 'ok' line"
grep -Eq "^features       CUDA (yes|no).*; etcd rendezvous (yes|no).*; NIXL backend (built|not built)" "$out" ||
  fail "no features line"
grep -Eq "^version        tcpx-p2p .*wire protocol [0-9]+" "$out" || fail "no wire protocol"
grep -Eq "^    address        127\.0\.0\.1" "$out" || fail "no address for lo"

TPX_NUM_CHANNELS=abc "$info" >"$out" 2>&1 && fail "exit status 0 with TPX_NUM_CHANNELS=abc"
grep -q "^ERROR .*TPX_NUM_CHANNELS=abc is not a number; it takes 1..64" "$out" || fail "the rejection is not named"
grep -q "ok             no warnings" "$out" && fail "'no warnings' beside a rejected setting"
grep -q "^TPX_NUM_CHANNELS .*the environment's value was refused" "$out" || fail "the default shown without a word"
TPX_CHUNK_BYTES=8M "$info" >"$out" 2>&1 && fail "exit status 0 with TPX_CHUNK_BYTES=8M"
grep -q "TPX_CHUNK_BYTES=8M is out of range: it takes 4K..4M" "$out" || fail "range not in the user's units"
TPX_CONNECT_TIMEOUT_MS=5s "$info" >"$out" 2>&1 && fail "exit status 0 with TPX_CONNECT_TIMEOUT_MS=5s"
grep -q "TPX_CONNECT_TIMEOUT_MS=5s is not a number; it takes 1..86400000 ms" "$out" || fail "no unit"

for t in "$info" "$@"; do
  "$t" --version >"$out" 2>&1 || fail "$t --version: exit status $?"
  grep -Eq "wire protocol [0-9]+" "$out" || fail "$t --version names no wire protocol"
done
echo "info_checks: ok"
