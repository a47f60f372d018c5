#!/bin/sh
# tpx-bench server and client as two processes on 127.0.0.1:
#  1. a client SIGKILLed in the middle of a run ends its server's session at
#     once (well within the deadline), with the error, exit status 1;
#  2. a --forever server serves two clients in turn (each --check clean) and
#     exits 0 on SIGTERM.
# usage: bench_peers.sh TPX_BENCH
set -u
bench=$1
# shellcheck source=tests/tools/proc_wait.sh
. "$(dirname "$0")/proc_wait.sh"

# Servers start at TPX_PORT_BASE and take the next free port (TPX_PORT_SPAN);
# the port they got is in their first line.
export TPX_PORT_BASE=$((30000 + $$ % 20000))
port_of() { sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$1"; }

# 1. peer death; the deadline is TPX_TIMEOUT_MS (default 30 s): the server must
#    notice long before it
"$bench" server --host 127.0.0.1 >"$dir/s1.log" 2>&1 &
spid=$!
wait_for "listening on port" "$dir/s1.log" 100 || die "server 1 did not start"
port=$(port_of "$dir/s1.log")
"$bench" client 127.0.0.1 --port $port --size 1M --iters 100000000 --op send --progress off >"$dir/c1.log" 2>&1 &
cpid=$!
kill_client 1

# 2. --forever: two clients in turn, then SIGTERM
"$bench" server --forever --host 127.0.0.1 >"$dir/s2.log" 2>&1 &
spid=$!
wait_for "listening on port" "$dir/s2.log" 100 || die "server 2 did not start"
port=$(port_of "$dir/s2.log")
timeout 60 "$bench" client 127.0.0.1 --port $port -b 4K -e 1M -f 16 --op write,read,send --iters 2 --warmup 1 --check \
  >"$dir/c2a.log" 2>&1 || die "first client of the --forever server failed"
timeout 60 "$bench" client 127.0.0.1 --port $port --block-size 16K --batch 64 --op write,read --iters 2 --check \
  >"$dir/c2b.log" 2>&1 || die "second client of the --forever server failed"
# The server says "client done" once it has seen the client go: a moment after
# the client exited (longer on a loaded machine or under TSan), up to 10 s.
i=0
while [ "$(grep -c 'client done' "$dir/s2.log")" -lt 2 ] && [ $i -lt 100 ]; do
  i=$((i + 1))
  sleep 0.1
done
[ "$(grep -c 'client done' "$dir/s2.log")" -eq 2 ] || die "the --forever server did not serve both clients"
kill -TERM $spid
wait_exit $spid 100
rc=$?
[ $rc -eq 0 ] || die "--forever server exit status $rc on SIGTERM (wanted 0)"
spid=""
echo "bench_peers: a dead client ends its session at once; --forever serves clients in turn and stops on SIGTERM"
