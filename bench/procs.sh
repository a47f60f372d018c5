# Background processes of a bench/ script, sourced (bash): the script sets
# `bench_name` (its name, for messages) and appends the pids it starts to `pids`.
#   stop_all               kill and reap every process in pids
#   bad WHAT LOG...        one measurement failed: say so with the logs'
#                          tails, stop its processes; returns 1 (the caller
#                          retries or gives up)
#   wait_line PATTERN FILE PID
#                          until FILE has the line (bounded: 30 s, and
#                          only while PID lives)
pids=""
stop_all() {
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  for p in $pids; do wait "$p" 2>/dev/null || true; done
  pids=""
}
bad() {
  echo "$bench_name: $1" >&2
  shift
  for f in "$@"; do [ -f "$f" ] && tail -n 8 "$f" >&2; done
  stop_all
  return 1
}
wait_line() {
  local i=0
  until grep -q "$1" "$2" 2>/dev/null; do
    i=$((i + 1))
    { kill -0 "$3" 2>/dev/null && [ $i -le 300 ]; } || { bad "no '$1' in $2" "$2"; return 1; }
    sleep 0.1
  done
}
