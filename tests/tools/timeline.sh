#!/bin/sh
# TPX_TIMELINE (docs/CONFIG.md): a loopback run records every chunk of every
# write on both sides (posted, done in the transport, landed), each transfer's
# post and end, and the socket traffic that carried its bytes; the file is
# written at exit and bench/timeline.py reads it. Without the variable no
# file appears; an unwritable prefix costs a warning, not the run.
# usage: timeline.sh TPX_BENCH TIMELINE_PY
set -u
bench=$1 tl=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

TPX_TIMELINE="$dir/tl" "$bench" loopback --size 2M --chunk 512K --iters 4 --warmup 1 --check --progress off \
  >"$dir/out.txt" 2>&1 || fail "tpx-bench failed: $(tail -n 3 "$dir/out.txt")"
set -- "$dir"/tl.*
[ $# -eq 1 ] && [ -s "$1" ] || fail "expected one timeline file, got: $*"
python3 - "$1" <<'PY' || fail "the events do not account for the transfers"
import collections, sys
ops = collections.defaultdict(collections.Counter)
rx = tx = 0
for line in open(sys.argv[1]):
    if line.startswith("#"):
        continue
    t, kind, tid, a, b, c, d = line.split()
    if kind == "sock_rx":
        rx += int(c)
    elif kind == "sock_tx":
        tx += int(c)
    elif kind != "sock_kick":
        ops[int(b)][kind] += 1
writes = [o for o, k in ops.items() if k["op_post"] == 1]
assert len(writes) == 5, f"{len(writes)} writes posted, expected 5 (1 warm-up + 4)"
for o in writes:
    k = ops[o]
    for kind in ("send_post", "send_done", "recv_post", "recv_done", "landed"):
        assert k[kind] == 4, f"write {o}: {k[kind]} {kind} events, expected 4 chunks"
    assert k["target"] == 1 and k["op_done"] == 2, f"write {o}: {dict(k)}"
assert rx >= 5 * (2 << 20) and tx >= 5 * (2 << 20), f"sockets moved {tx} / {rx} bytes"
PY
python3 "$tl" "$1" >"$dir/report.txt" 2>&1 || fail "timeline.py failed: $(tail -n 3 "$dir/report.txt")"
[ "$(grep -c '^ *[0-9]' "$dir/report.txt")" -eq 5 ] || fail "timeline.py: expected 5 writes: $(cat "$dir/report.txt")"
# --sockets: the sockets of one write carry its 2 MiB each way; --wake: a line per file
python3 "$tl" "$1" --sockets --wake >"$dir/socks.txt" 2>&1 || fail "timeline.py --sockets --wake failed: $(tail -n 3 "$dir/socks.txt")"
python3 - "$dir/socks.txt" <<'PY' || fail "timeline.py --sockets: $(cat "$dir/socks.txt")"
import sys
mib = {"send": 0.0, "recv": 0.0}
busy = {"send": 0.0, "recv": 0.0}
wake = 0
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 8 and f[0] in mib:
        mib[f[0]] += float(f[3])
        first, last, b = float(f[4]), float(f[5]), float(f[7])
        # time inside the calls: never longer than the socket's span (three values rounded to 0.01 ms)
        assert 0 <= b <= last - first + 0.02, f"busy {b} ms outside {first}-{last}: {line}"
        busy[f[0]] += b
    wake += "kicks" in line or "no kicks" in line
for side, v in mib.items():
    assert 1.99 <= v <= 2.02, f"{side}: {v} MiB on the sockets of a 2 MiB write"
    assert busy[side] > 0, f"{side}: no time inside the calls (each call is timed on both sides)"
assert wake == 1, f"{wake} --wake lines for one file"
PY

rm -f "$dir"/tl.*
"$bench" loopback --size 64K --iters 2 --progress off >"$dir/out.txt" 2>&1 || fail "tpx-bench without a timeline failed"
[ -z "$(ls "$dir" | grep '^tl\.')" ] || fail "a timeline file appeared without TPX_TIMELINE"
TPX_LOG=warn TPX_TIMELINE="$dir/no/such/dir/tl" "$bench" loopback --size 64K --iters 2 --progress off >"$dir/out.txt" 2>&1 ||
  fail "an unwritable TPX_TIMELINE failed the run"
grep -q "TPX_TIMELINE: cannot write" "$dir/out.txt" || fail "no warning for an unwritable TPX_TIMELINE"
echo "PASS"
