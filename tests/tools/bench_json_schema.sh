#!/bin/sh
# tpx-bench --json against the schema (docs/BENCHMARKS.md): a real document
# passes check_bench_json.py, to a file and on stdout (--json -: the table then
# goes to stderr); doctored copies (a field missing, a wrong type, percentiles
# out of order, a failed iteration in a --clean check) are refused.
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

# doctor KEY-PATH EXPRESSION NAME: a copy with one change must be refused
doctor() {
  python3 - "$dir/out.json" "$dir/bad.json" "$1" <<'PY' || fail "cannot doctor the document"
import json, sys
d = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"))
PY
  if python3 "$check" "$dir/bad.json" --clean >/dev/null 2>&1; then fail "doctored document accepted: $2"; fi
}
doctor 'del d["schema"]' "no schema"
doctor 'd["runs"][0]["bytes"] = "4096"' "bytes as a string"
doctor 'd["runs"][0]["latency_us"]["p99"] = -1' "p99 below p50"
doctor 'd["runs"][1]["errors"] = 1; d["runs"][1]["ok"] -= 1' "a failed iteration"
doctor 'd["config"]["check"] = 1' "check not a boolean"
doctor 'd["runs"][2]["gbps_total"] = d["runs"][2]["gbps_per_gpu"] * 3' "total != per GPU x gpus"
echo "bench_json_schema: documents valid, doctored copies refused"
