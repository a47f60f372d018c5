#!/bin/sh
# The end of `make check`: one list of every failure across its phases.
# Usage: check-summary.sh "FAILED_PHASES" PHASE=BUILD_DIR...
# FAILED_PHASES: the phases whose make exited non-zero (space-separated).
# For each, the tests ctest recorded as failed in BUILD_DIR
# (Testing/Temporary/LastTestsFailed.log), or, with no such list, that the
# phase stopped before or outside its tests (configure or build: its output
# above says why); and, for every phase, the tests whose last run took more
# than a third of their limit (scripts/ctest-slow.py). Exit status: 0 when
# no phase failed, 1 otherwise.
set -u
failed=$1
shift
echo
echo "===== make check: summary ====="
# Tests past a third of their limit: a loaded machine pushes these over first.
for m in "$@"; do
  slow=$(python3 "$(dirname "$0")/ctest-slow.py" "${m#*=}" 2>/dev/null || true)
  [ -z "$slow" ] || printf '%s: above a third of their ctest TIMEOUT:\n%s\n' "${m%%=*}" "$slow"
done
if [ -z "$failed" ]; then
  echo "every phase passed:$(for m in "$@"; do printf ' %s' "${m%%=*}"; done)"
  exit 0
fi
n=0
for m in "$@"; do
  phase=${m%%=*}
  dir=${m#*=}
  case " $failed " in
  *" $phase "*) ;;
  *)
    echo "$phase: passed"
    continue
    ;;
  esac
  list=$dir/Testing/Temporary/LastTestsFailed.log
  if [ -s "$list" ]; then
    # lines are "NUMBER:NAME"
    cnt=$(wc -l <"$list")
    echo "$phase: FAILED, $cnt test(s) (log: $dir/Testing/Temporary/LastTest.log):"
    sed 's/^[0-9]*:/  /' "$list"
    n=$((n + cnt))
  else
    echo "$phase: FAILED before or outside its tests (configure or build; see its output above)"
    n=$((n + 1))
  fi
done
echo "failures: $n; rerun one with: ctest --test-dir DIR -R '^NAME\$' --output-on-failure"
exit 1
