#!/bin/sh
# `make check` runs every phase even when one fails, and its summary lists
# every failure of every phase with a non-zero exit (Makefile,
# scripts/check-summary.sh). Usage: check_summary.sh SOURCE_DIR
set -u
src=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tpx-checksum.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
fail() { echo "check_summary: $*" >&2; cat "$tmp/out" >&2; exit 1; }

# Two phases that both fail (no such make target): the second still runs.
make -C "$src" --no-print-directory check CHECK_PHASES="tpx-no-phase-a tpx-no-phase-b" \
  BUILD="$tmp/b" ASAN_BUILD="$tmp/a" FUZZ_BUILD="$tmp/f" >"$tmp/out" 2>&1
rc=$?
[ "$rc" -ne 0 ] || fail "exit status 0 with two failed phases"
grep -q "tpx-no-phase-b" "$tmp/out" || fail "the second phase did not run"
grep -q "===== make check: summary =====" "$tmp/out" || fail "no summary"

# The summary itself: ctest's failures of each failed phase, passed phases named.
mkdir -p "$tmp/a/Testing/Temporary"
printf '12:test_engine_close_unpack\n40:conformance_two_process\n' >"$tmp/a/Testing/Temporary/LastTestsFailed.log"
"$src/scripts/check-summary.sh" " test-asan fuzz" test="$tmp/b" test-asan="$tmp/a" fuzz="$tmp/f" >"$tmp/out" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "summary exit status $rc, not 1"
grep -q "^test: passed" "$tmp/out" || fail "the passed phase is not named"
grep -q "^  test_engine_close_unpack" "$tmp/out" || fail "an ASan failure is missing"
grep -q "^  conformance_two_process" "$tmp/out" || fail "an ASan failure is missing"
grep -q "^fuzz: FAILED before or outside its tests" "$tmp/out" || fail "the failed build phase is missing"
grep -q "^failures: 3" "$tmp/out" || fail "wrong count"
"$src/scripts/check-summary.sh" "" test="$tmp/b" >"$tmp/out" 2>&1 || fail "all passed, but non-zero"

# A test past a third of its limit is named (passed or not), one within it is not.
mkdir -p "$tmp/s/Testing/Temporary"
printf 'set_tests_properties([=[slow_one]=] PROPERTIES  LABELS "x" TIMEOUT "300" _BACKTRACE_TRIPLES "")\n' >"$tmp/s/CTestTestfile.cmake"
printf 'set_tests_properties([=[quick_one]=] PROPERTIES  TIMEOUT "300")\n' >>"$tmp/s/CTestTestfile.cmake"
printf '1/2 Testing: slow_one\nTest time =  120.50 sec\n2/2 Testing: quick_one\nTest time =   2.00 sec\n' \
  >"$tmp/s/Testing/Temporary/LastTest.log"
"$src/scripts/check-summary.sh" "" test="$tmp/s" >"$tmp/out" 2>&1 || fail "slow but passed: non-zero"
grep -q "slow_one: 120.5 s of its 300 s limit (40%)" "$tmp/out" || fail "the slow test is not named"
grep -q "quick_one" "$tmp/out" && fail "a quick test named as slow"
echo "check_summary: ok"
