#!/bin/sh
# One bounded libFuzzer run of a harness: run.sh FUZZER SEEDS WORK SECONDS MAX_LEN.
# New inputs go to WORK/corpus (the checked-in SEEDS stay as they are), a
# crash to WORK/crash-*; the exit status is libFuzzer's (0: no crash, no
# sanitizer report, no leak, no timeout). The last lines name the
# executions, for docs/FUZZING.md.
set -eu
fuzzer=$1 seeds=$2 work=$3 secs=$4 maxlen=$5
mkdir -p "$work/corpus"
log="$work/fuzz.log"
rc=0
# halt_on_error: the first sanitizer report fails the run (UBSan too).
ASAN_OPTIONS="${ASAN_OPTIONS:-}:halt_on_error=1:abort_on_error=1" \
UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
  "$fuzzer" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -max_len="$maxlen" \
  -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" "$seeds" >"$log" 2>&1 || rc=$?
tail -n 25 "$log"
echo "run.sh: $(basename "$fuzzer"): $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$log" | tail -n 1), exit $rc"
exit $rc
