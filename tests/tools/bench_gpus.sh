#!/bin/sh
# tpx-bench --gpus between two processes on 127.0.0.1 (host memory):
#  1. four endpoints against four, write/read/send with --check: every pair's
#     every byte verified, the JSON clean with four pairs;
#  2. pair counts that differ are refused by the server, naming both counts,
#     and both sides exit 1 (client 2 vs server 4; client 2 vs a --gpu server);
#  3. a SIGKILLed client ends every pair's session on the server at once.
# usage: bench_gpus.sh TPX_BENCH CHECK_BENCH_JSON_PY
set -u
bench=$1 check=$2
# shellcheck source=tests/tools/proc_wait.sh
. "$(dirname "$0")/proc_wait.sh"
# --gpus: pair i on exactly port P + i. P from this process's id, below the
# ephemeral range (32768-); a port taken meanwhile moves P on (5 tries).
base=$((23000 + ($$ % 1000) * 8))
server() { # LOG PORT ARGS...: a server listening on PORT (+ pairs), or die
  log=$1 port=$2
  shift 2
  for try in 1 2 3 4 5; do
    "$bench" server --host 127.0.0.1 --port "$port" "$@" >"$dir/$log" 2>&1 &
    spid=$!
    wait_for "listening on port\\|address in use" "$dir/$log" 100 || die "server ($log) did not start"
    grep -q "listening on port" "$dir/$log" && return 0
    wait "$spid" 2>/dev/null
    spid=""
    base=$((base + 8)) port=$((port + 8))
  done
  die "server ($log): ports in use five times"
}

# 1. four against four
server s1.log $base --gpus 0-3
timeout 120 "$bench" client 127.0.0.1 --port $base --gpus 0-3 --size 2M --op write,read,send --iters 3 --warmup 1 \
  --check --progress off --json "$dir/c1.json" >"$dir/c1.log" 2>&1 || die "four against four failed"
wait_exit $spid 100 || die "server 1 exit status $? (wanted 0)"
spid=""
python3 "$check" "$dir/c1.json" --runs 3 --ops write,read,send --clean --pairs 4 || die "JSON of four against four"
[ "$(grep -c '^\[CHECK\] server pair [0-3]: ok' "$dir/s1.log")" -eq 8 ] || die "server: not every pair's write and send verified"
grep -q '^\[CHECK\] client: ok.*every pair' "$dir/c1.log" || die "client: reads not verified"

# 2. mismatches, refused by name
refused() { # LOG: both sides exit 1, the client says what the server said
  wait_exit $cpid 300
  rc=$?
  cpid=""
  [ $rc -eq 1 ] || die "$1: client exit status $rc (wanted 1)"
  wait_exit $spid 100
  rc=$?
  spid=""
  [ $rc -eq 1 ] || die "$1: server exit status $rc (wanted 1)"
  grep -q "the client drives 2 endpoint pair(s), this server $2" "$dir/$1" || die "$1: the refusal does not name both counts"
}
server s2.log $((base + 4)) --gpus 0-3
"$bench" client 127.0.0.1 --port $((base + 4)) --gpus 0-1 --size 64K --iters 2 --progress off >"$dir/c2.log" 2>&1 &
cpid=$!
refused c2.log 4
server s3.log $((base + 4)) --gpu 0
"$bench" client 127.0.0.1 --port $((base + 4)) --gpus 0,0 --size 64K --iters 2 --progress off >"$dir/c3.log" 2>&1 &
cpid=$!
refused c3.log 1

# 3. a client killed in the middle of a run: every server pair ends well
#    within the deadline (TPX_TIMEOUT_MS, 30 s by default)
server s4.log $base --gpus 0-3
"$bench" client 127.0.0.1 --port $base --gpus 0-3 --size 1M --iters 100000000 --op send --progress off >"$dir/c4.log" 2>&1 &
cpid=$!
kill_client 4
echo "bench_gpus: four pairs against four verified; pair-count mismatches refused by name; a dead client ends every pair"
