#!/bin/sh
# Runs the README's test command N times, each time in a fresh clone of this
# checkout's HEAD (committed work only), optionally with the CPUs kept busy,
# and prints each run's verdict and wall time (docs/RELIABILITY.md,
# "Repeated runs"). Usage:
#
#   scripts/ci-repeat.sh N [--load] [--cmd 'COMMAND'] [--timeout SECONDS] [--dir DIR] [--keep]
#
#   N            runs (1..100)
#   --load       during each run, stress-ng keeps two CPU workers busy
#                (scripts/deps.sh --test installs it)
#   --cmd        what each run executes in its clone instead of the README's
#                `./scripts/deps.sh --test && make check` (a cheaper subset:
#                --cmd 'make build && ctest --test-dir build -R test_sock_retry')
#   --timeout    bound of one run (default 3600 s); a run past it is a failure
#   --dir        where the clones go (default: beside this checkout)
#   --keep       keep each run's clone (default: removed after the run)
#
# Each clone is made beside this checkout unless --dir says otherwise, so
# ../shared/third_party (NIXL's release tarballs) resolves as from the
# checkout; TPX_THIRD_PARTY (set, or that directory when it exists) is passed
# on, so a clone elsewhere finds them too. Logs stay in a directory named
# at the start. Each run's line also gives the machine's mean 1-minute load
# average over the run (sampled every 10 s), since a run beside other work is
# loaded whether or not --load asked for it, and make check's summary when
# the run failed or a test took more than a third of its limit. Exit status:
# 0 when every run passed.
set -eu

usage() {
  sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

[ $# -ge 1 ] || usage
runs=$1
shift
case $runs in '' | *[!0-9]*) usage ;; esac
if [ "$runs" -lt 1 ] || [ "$runs" -gt 100 ]; then usage; fi
load=0
keep=0
dir=
limit=3600
cmd='./scripts/deps.sh --test && make check'
while [ $# -gt 0 ]; do
  case $1 in
  --load) load=1 ;;
  --keep) keep=1 ;;
  --dir)
    [ $# -ge 2 ] || usage
    dir=$2
    shift
    ;;
  --cmd)
    [ $# -ge 2 ] || usage
    cmd=$2
    shift
    ;;
  --timeout)
    [ $# -ge 2 ] || usage
    limit=$2
    shift
    case $limit in '' | *[!0-9]*) usage ;; esac
    ;;
  *) usage ;;
  esac
  shift
done

repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
head=$(git -C "$repo" rev-parse HEAD)
[ -n "$dir" ] || dir=$repo/..
[ -d "$dir" ] || { echo "ci-repeat: --dir $dir is not a directory" >&2; exit 2; }
if [ -z "${TPX_THIRD_PARTY:-}" ] && [ -d "$repo/../shared/third_party" ]; then
  TPX_THIRD_PARTY=$(cd "$repo/../shared/third_party" && pwd)
  export TPX_THIRD_PARTY
fi
if [ "$load" = 1 ] && ! command -v stress-ng >/dev/null 2>&1; then
  echo "ci-repeat: --load needs stress-ng (scripts/deps.sh --test installs it)" >&2
  exit 2
fi
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
  echo "ci-repeat: note: uncommitted changes are not part of the runs (each clones HEAD $head)" >&2
fi
logs=$(mktemp -d "${TMPDIR:-/tmp}/ci-repeat.XXXXXX")
stress=""
sampler=""
clone=""

cleanup() {
  if [ -n "$sampler" ]; then
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    sampler=""
  fi
  if [ -n "$stress" ]; then
    kill "$stress" 2>/dev/null || true
    wait "$stress" 2>/dev/null || true
    stress=""
  fi
  if [ -n "$clone" ] && [ "$keep" = 0 ]; then
    rm -rf "$clone"
  fi
  clone=""
}
trap 'cleanup; exit 130' INT TERM
trap cleanup EXIT

echo "ci-repeat: $runs run(s) of: $cmd"
echo "ci-repeat: HEAD $head, $(nproc) CPUs, $(date -u '+%Y-%m-%d %H:%M UTC'), load: $([ "$load" = 1 ] && echo 'stress-ng --cpu 2' || echo none)"
echo "ci-repeat: logs in $logs"
passed=0
i=1
while [ "$i" -le "$runs" ]; do
  clone=$(mktemp -d "$dir/ci-repeat-run.XXXXXX")
  log=$logs/run-$i.log
  git clone -q --no-hardlinks "$repo" "$clone" >"$log" 2>&1
  git -C "$clone" checkout -q --detach "$head" >>"$log" 2>&1
  if [ "$load" = 1 ]; then
    stress-ng --cpu 2 --quiet >/dev/null 2>&1 &
    stress=$!
  fi
  samples=$logs/run-$i.load
  : >"$samples"
  (n=0; while [ $n -lt $((limit / 10 + 2)) ]; do cut -d' ' -f1 /proc/loadavg >>"$samples"; sleep 10; n=$((n + 1)); done) &
  sampler=$!
  start=$(date +%s)
  rc=0
  (cd "$clone" && timeout "$limit" sh -c "$cmd") >>"$log" 2>&1 || rc=$?
  wall=$(($(date +%s) - start))
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  sampler=""
  meanload=$(awk '{s += $1; n++} END {if (n) printf "%.1f", s / n; else print "?"}' "$samples")
  if [ -n "$stress" ]; then
    kill "$stress" 2>/dev/null || true
    wait "$stress" 2>/dev/null || true
    stress=""
  fi
  if [ "$rc" = 0 ]; then
    verdict=PASS
    passed=$((passed + 1))
  elif [ "$rc" = 124 ]; then
    verdict="FAIL (over ${limit} s)"
  else
    verdict="FAIL (exit $rc)"
  fi
  printf 'run %d/%d: %s, wall %dm%02ds, stress-ng %s, mean load average %s, log %s\n' "$i" "$runs" "$verdict" \
    $((wall / 60)) $((wall % 60)) "$([ "$load" = 1 ] && echo yes || echo no)" "$meanload" "$log"
  if [ "$rc" != 0 ]; then
    # make check's summary (scripts/check-summary.sh) when it got there
    if grep -q '^===== make check: summary =====' "$log"; then
      sed -n '/^===== make check: summary =====/,$p' "$log" | sed '1d; s/^/    /'
    else
      grep -E 'tests failed|\(Failed\)|\*\*\*Failed|Timeout|FAILED' "$log" | tail -n 5 | sed 's/^/    /' || true
    fi
  elif grep -q 'above a third of their ctest TIMEOUT' "$log"; then
    # green, but these are the next to miss their limit on a loaded machine
    sed -n '/^===== make check: summary =====/,$p' "$log" | sed '1d; s/^/    /'
  fi
  [ "$keep" = 1 ] && echo "    clone kept: $clone"
  cleanup
  i=$((i + 1))
done
echo "ci-repeat: $passed of $runs passed"
[ "$passed" = "$runs" ]
