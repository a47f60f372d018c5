# Two background processes (a server, $spid, and a client, $cpid) and a log
# directory, sourced by the tool tests (bench_peers.sh, bench_gpus.sh): the
# directory, the cleanup, failing with the logs' tails, and bounded waits
# (every loop ends by itself).
dir=$(mktemp -d)
spid="" cpid=""
cleanup() {
  [ -n "$cpid" ] && kill -9 "$cpid" 2>/dev/null
  [ -n "$spid" ] && kill -9 "$spid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
die() {
  echo "FAIL: $*"
  for f in "$dir"/*.log; do echo "--- $f"; tail -n 8 "$f"; done
  exit 1
}

# wait_for PATTERN FILE TENTHS: until FILE has a line matching PATTERN
wait_for() {
  i=0
  while ! grep -q "$1" "$2" 2>/dev/null; do
    i=$((i + 1))
    [ $i -gt "$3" ] && return 1
    sleep 0.1
  done
}

# wait_exit PID TENTHS: the process's exit status, or 124 if it is still running
wait_exit() {
  i=0
  while kill -0 "$1" 2>/dev/null; do
    i=$((i + 1))
    [ $i -gt "$2" ] && return 124
    sleep 0.1
  done
  wait "$1"
}

# kill_client N: the client ($cpid, log $dir/cN.log) is SIGKILLed once its send
# run has started; the server ($spid, log $dir/sN.log) must end at once (10 s,
# well within the deadline TPX_TIMEOUT_MS, 30 s by default), exit status 1,
# saying why.
kill_client() {
  wait_for "^# tpx-bench send" "$dir/c$1.log" 100 || die "client $1 did not start its run"
  sleep 0.5
  kill -9 "$cpid"
  wait "$cpid" 2>/dev/null
  cpid=""
  wait_exit "$spid" 100
  rc=$?
  spid=""
  [ $rc -eq 124 ] && die "server $1 still running 10 s after its client died"
  [ $rc -eq 1 ] || die "server $1 exit status $rc after its client died (wanted 1)"
  grep -q "closed\|peer failed\|remote error" "$dir/s$1.log" || die "server $1 did not say why it ended"
}
