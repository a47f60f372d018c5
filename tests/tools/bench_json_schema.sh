#!/bin/sh
# tpx-bench --json against the schema (docs/API.md): a real document
# passes check_bench_json.py, to a file and on stdout (--json -: the table then
# goes to stderr); doctored copies (a field missing, a wrong type, percentiles
# out of order, a failed iteration in a --clean check, a chunk size other than
# the configured or automatic one) are refused; the automatic chunk on one CPU
# and a fixed --chunk show in the runs, the automatic one also in the
# engine's own timeline of the chunks it sent.
# usage: bench_json_schema.sh TPX_BENCH CHECK_BENCH_JSON_PY
set -u
bench=$1 check=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$bench" loopback -b 4K -e 64K -f 4 --op write,send --iters 4 --check --progress off --json - >"$dir/out.json" \
  2>"$dir/table.txt" || fail "tpx-bench --json - failed: $(tail -n 3 "$dir/table.txt")"
grep -q '^# tpx-bench write' "$dir/table.txt" || fail "--json -: the table did not go to stderr"
python3 "$check" "$dir/out.json" --runs 6 --ops write,send --clean || fail "a real document was refused"

# doctor EXPRESSION NAME [CHECK ARGS]: a copy with one change must be refused
doctor() {
  python3 - "$dir/out.json" "$dir/bad.json" "$1" <<'PY' || fail "cannot doctor the document"
import json, sys
d = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"))
PY
  what=$2
  shift 2
  if python3 "$check" "$dir/bad.json" --clean "$@" >/dev/null 2>&1; then fail "doctored document accepted: $what"; fi
}
doctor 'del d["schema"]' "no schema"
doctor 'd["runs"][0]["bytes"] = "4096"' "bytes as a string"
doctor 'd["runs"][0]["latency_us"]["p99"] = -1' "p99 below p50"
doctor 'd["runs"][1]["errors"] = 1; d["runs"][1]["ok"] -= 1' "a failed iteration"
doctor 'd["config"]["check"] = 1' "check not a boolean"
doctor 'd["runs"][2]["gbps_total"] = d["runs"][2]["gbps_per_gpu"] * 3' "total != per GPU x gpus"
doctor 'd["runs"][0]["chunk_bytes"] = 0' "chunk of 0 bytes"
doctor 'd["config"]["chunk_bytes"] = 65536' "runs cut otherwise than the configured chunk"

# The automatic chunk (TPX_CHUNK_BYTES=auto) on one CPU: 512 KiB for 1 MiB
# over the 2 channels, 2 MiB for 8 MiB, writes, reads and sends alike; the
# target and receiver follow the initiator's size (every byte checked). A
# fixed --chunk cuts every run the same.
cpu=$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')
TPX_TIMELINE="$dir/tl" taskset -c "$cpu" "$bench" loopback -b 1M -e 8M -f 8 --op write,read,send --iters 3 --check \
  --progress off --json "$dir/one.json" >"$dir/one.txt" 2>&1 || fail "one-CPU run failed: $(tail -n 3 "$dir/one.txt")"
# The engine's own record of the chunks it sent (send_post: ch, op, chunk, bytes).
python3 - "$dir"/tl.* <<'PY' || fail "one CPU: the engine did not send 512 KiB and 2 MiB chunks"
import sys
sizes = {int(l.split()[6]) for f in sys.argv[1:] for l in open(f) if l.split()[1:2] == ["send_post"]}
assert {512 << 10, 2 << 20} <= sizes and max(sizes) == 2 << 20, sorted(sizes)
PY
python3 "$check" "$dir/one.json" --runs 6 --cpus 1 --clean || fail "one CPU: not the automatic chunks"
python3 - "$dir/one.json" <<'PY' || fail "one CPU: the runs do not have 512 KiB and 2 MiB chunks"
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
assert sorted({r["chunk_bytes"] for r in runs}) == [512 << 10, 2 << 20], runs
PY
cp "$dir/one.json" "$dir/out.json"
doctor 'd["runs"][5]["chunk_bytes"] = 524288' "512 KiB chunks where 2 MiB are automatic" --cpus 1
"$bench" loopback --size 1M --chunk 64K --iters 2 --check --progress off --json "$dir/fixed.json" >/dev/null 2>&1 ||
  fail "--chunk 64K run failed"
python3 "$check" "$dir/fixed.json" --runs 1 --clean || fail "--chunk 64K: refused"
python3 - "$dir/fixed.json" <<'PY' || fail "--chunk 64K: not 64 KiB in the document"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["config"]["chunk_bytes"] == 65536 and d["runs"][0]["chunk_bytes"] == 65536, d
PY
echo "bench_json_schema: documents valid, doctored copies refused"
