#!/bin/sh
# Two-node launcher for tpx-bench (docs/LAUNCH.md): starts the server side on
# one node and the client side on the other, one process pair per GPU, with
# the environment of scripts/launch-env.sh; collects every process's log and
# prints one table (per GPU and total). Two modes: one process pair per GPU,
# or one process per node driving every listed GPU (tpx-bench --gpus).
#
#   scripts/launch.sh [options] SERVER CLIENT [-- tpx-bench options]
#
# SERVER, CLIENT: where each side runs:
#   [user@]host   over ssh (BatchMode: keys, no prompts); tpx-bench must be at --bench there
#   local         this machine
#   netns:NAME    this machine, inside network namespace NAME (tests)
# Options:
#   --connect ADDR     address the clients dial (default: SERVER's host part)
#   --etcd URLS        find the servers through etcd instead (default: $TPX_ETCD_ENDPOINTS;
#                      per-gpu mode): server of GPU i publishes as gpuI, its client looks it up
#   --job NAME         the run's namespace in etcd (default launch-<time>-<pid>)
#   --gpus LIST        GPUs, e.g. 0-7 or 0,2 (default 0): one server/client pair each
#   --mode per-gpu     one process per GPU and side (default): tpx-bench --gpu i
#   --mode orchestrator  one process per side driving every listed GPU:
#                      tpx-bench --gpus LIST, pair i on port --port-base + i
#   --profile P        builtin (default) or tcpx: the environment (scripts/launch-env.sh)
#   --mem host|cuda    memory of both sides (default host)
#   --bench PATH       tpx-bench on the nodes (default: this checkout's build/tpx-bench)
#   --port-base N      per-gpu: server of GPU i listens on N + i; orchestrator:
#                      the server's pair i on N + i (default 20000; with --etcd the
#                      first free port from TPX_PORT_BASE + i unless given)
#   --logdir DIR       where the logs go (default /tmp/tpx-launch-<time>)
#   --timeout S        each process's limit in seconds (default 300)
#   --print            print the commands to paste on each node; run nothing
# Exit status: 0 when every pair finished and its data check (the client runs
# tpx-bench with --check: every byte verified, outside the timed part) passed.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/launch-env.sh
. "$here/launch-env.sh"

die() {
  echo "launch: $*" >&2
  exit 2
}

server='' client='' connect='' etcd=${TPX_ETCD_ENDPOINTS:-} job='' gpus=0 mode=per-gpu profile=builtin mem=host
bench="$here/../build/tpx-bench" port_base=20000 port_set=0 logdir='' timeout_s=300 print=0
while [ $# -gt 0 ]; do
  case "$1" in
  --connect) connect=$2; shift 2 ;;
  --gpus) gpus=$2; shift 2 ;;
  --mode) mode=$2; shift 2 ;;
  --profile) profile=$2; shift 2 ;;
  --mem) mem=$2; shift 2 ;;
  --bench) bench=$2; shift 2 ;;
  --port-base) port_base=$2; port_set=1; shift 2 ;;
  --etcd) etcd=$2; shift 2 ;;
  --job) job=$2; shift 2 ;;
  --logdir) logdir=$2; shift 2 ;;
  --timeout) timeout_s=$2; shift 2 ;;
  --print) print=1; shift ;;
  --) shift; break ;;
  -*) die "unknown option '$1'" ;;
  *)
    if [ -z "$server" ]; then server=$1
    elif [ -z "$client" ]; then client=$1
    else die "unexpected argument '$1'"
    fi
    shift ;;
  esac
done
{ [ -n "$server" ] && [ -n "$client" ]; } || die "usage: launch.sh [options] SERVER CLIENT [-- tpx-bench options]"
case "$mode" in
per-gpu | orchestrator) ;;
*) die "--mode '$mode': per-gpu or orchestrator" ;;
esac
case "$mem" in host | cuda) ;; *) die "--mem '$mem': host or cuda" ;; esac
case "$port_base$timeout_s" in *[!0-9]*) die "--port-base and --timeout take numbers" ;; esac
launch_env "$profile" server >/dev/null || exit 2
[ -n "$logdir" ] || logdir=/tmp/tpx-launch-$(date -u +%Y%m%d-%H%M%S)-$$
if [ -n "$etcd" ]; then # launch-env.sh passes them to both sides
  [ "$mode" = per-gpu ] || die "--etcd: per-gpu mode only (one name per process)"
  export LAUNCH_ETCD="$etcd" LAUNCH_JOB="${job:-launch-$(date -u +%Y%m%d-%H%M%S)-$$}"
elif [ -z "$connect" ]; then
  case "$server" in
  local | netns:*) die "--connect ADDR is needed when SERVER is '$server'" ;;
  *) connect=${server#*@} ;;
  esac
fi

# "0-3,6" -> "0 1 2 3 6"
expand() {
  out=''
  for item in $(echo "$1" | tr ',' ' '); do
    case "$item" in
    *[!0-9-]* | -* | *-) die "--gpus: '$item' is not a GPU index or range" ;;
    *-*)
      lo=${item%-*} hi=${item#*-}
      [ "$lo" -le "$hi" ] || die "--gpus: range '$item' runs backwards"
      while [ "$lo" -le "$hi" ]; do out="$out $lo"; lo=$((lo + 1)); done ;;
    *) out="$out $item" ;;
    esac
  done
  [ -n "$out" ] || die "--gpus names no GPU"
  echo "${out# }"
}
gpu_list=$(expand "$gpus")
# What runs on each side: a process per GPU, or one ("all") for every GPU.
units=$gpu_list
[ "$mode" = orchestrator ] && units=all

q() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

# The shell command one side runs: its environment, a time limit, tpx-bench.
side_cmd() { # SIDE UNIT (a GPU, or "all": every GPU in one process)
  cmd="cd /tmp && exec env"
  lines=$(launch_env "$profile" "$1")
  old_ifs=$IFS
  IFS='
'
  set -f # values may hold '*', ';', '^': one line is one KEY=VALUE
  for kv in $lines; do
    cmd="$cmd ${kv%%=*}=$(q "${kv#*=}")"
  done
  set +f
  IFS=$old_ifs
  if [ "$2" = all ]; then
    port=$port_base sel="--gpus $(echo "$gpu_list" | tr ' ' ',')"
  else
    port=$((port_base + $2)) sel="--gpu $2"
  fi
  # through etcd nobody needs to know the port: the next free one from TPX_PORT_BASE + i
  [ -z "$etcd" ] || [ "$port_set" = 1 ] || port=0
  if [ "$1" = server ]; then
    cmd="$cmd timeout $timeout_s $(q "$bench") server --port $port $sel --mem $mem"
    [ -z "$etcd" ] || cmd="$cmd --name gpu$2"
  elif [ -n "$etcd" ]; then
    cmd="$cmd timeout $timeout_s $(q "$bench") client --peer gpu$2 $sel --mem $mem --check$bench_args"
  else
    cmd="$cmd timeout $timeout_s $(q "$bench") client $(q "$connect") --port $port $sel --mem $mem --check"
    cmd="$cmd$bench_args"
  fi
  echo "$cmd"
}

bench_args=
for a in "$@"; do bench_args="$bench_args $(q "$a")"; done

# Run a command string on a side: ssh, local, or inside a network namespace.
on() { # WHERE CMD
  case "$1" in
  local) sh -c "$2" ;;
  netns:*) ip netns exec "${1#netns:}" sh -c "$2" ;;
  *) ssh -o BatchMode=yes "$1" "$2" ;;
  esac
}

if [ "$print" = 1 ]; then
  for side in server client; do
    where=$server
    [ "$side" = client ] && where=$client
    echo "# on $where ($side side; start the servers first):"
    for g in $units; do echo "$(side_cmd "$side" "$g") > $side-gpu$g.log 2>&1 &"; done
    echo "wait"
  done
  exit 0
fi

mkdir -p "$logdir"
spids='' cpids='' pid='' rc=''
# shellcheck disable=SC2317 # run by the trap
cleanup() {
  for p in $spids $cpids; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM
for g in $units; do
  on "$server" "$(side_cmd server "$g")" >"$logdir/server-gpu$g.log" 2>&1 &
  spids="$spids $!"
  eval "spid_$g=$!"
done
# Every server listening before any client dials (bounded: 60 s).
for g in $units; do
  n=0
  eval "pid=\$spid_$g"
  until grep -q '^\[SERVER\] listening' "$logdir/server-gpu$g.log" 2>/dev/null; do
    n=$((n + 1))
    if [ "$n" -gt 300 ] || ! kill -0 "$pid" 2>/dev/null; then
      cat "$logdir/server-gpu$g.log" >&2
      die "server of GPU(s) $g not listening (exited, or 60 s passed); log $logdir/server-gpu$g.log"
    fi
    sleep 0.2
  done
done
for g in $units; do
  on "$client" "$(side_cmd client "$g")" >"$logdir/client-gpu$g.log" 2>&1 &
  cpids="$cpids $!"
  eval "cpid_$g=$!"
done
for g in $units; do # exit codes "client/server"
  rc_c=0 rc_s=0
  eval "wait \$cpid_$g" || rc_c=$?
  eval "wait \$spid_$g" || rc_s=$?
  eval "rc_$g=$rc_c/$rc_s"
done
spids='' cpids=''

# One table: per GPU the client's figure, the data check, and the total.
# bw_of LOG [PAIR]: the last figure of that process (per-gpu) or of pair PAIR
# of the one process (orchestrator); check_of the same for the data check.
bw_of() {
  if [ $# -eq 1 ]; then sed -n 's/^\[PERF\] .*BW: \([0-9.]*\) GB\/s.*/\1/p' "$1" | tail -n 1
  else sed -n "s/^\[PERF\] pair $2 (GPU [0-9]*): \([0-9.]*\) GB\/s.*/\1/p" "$1" | tail -n 1
  fi
}
check_of() { # CLIENT_LOG SERVER_LOG [PAIR]: "[CHECK] server[ pair I]: ..." or the client's (read)
  who='server'
  [ $# -eq 3 ] && who="server pair $3"
  if grep -q "^\[CHECK\] \($who\|client\): \(MISMATCH\|cannot\)" "$1" "$2"; then echo FAILED
  elif grep -q "^\[CHECK\] \($who\|client\): ok" "$1" "$2"; then echo ok
  else echo missing
  fi
}
status=0
printf '%-5s %12s %10s %8s\n' GPU "GB/s" check "exit c/s"
total=0 i=0
for g in $gpu_list; do
  if [ "$mode" = orchestrator ]; then
    c="$logdir/client-gpuall.log" s="$logdir/server-gpuall.log"
    bw=$(bw_of "$c" "$i") chk=$(check_of "$c" "$s" "$i")
    rc=$rc_all
  else
    c="$logdir/client-gpu$g.log" s="$logdir/server-gpu$g.log"
    bw=$(bw_of "$c") chk=$(check_of "$c" "$s")
    eval "rc=\$rc_$g"
  fi
  i=$((i + 1))
  [ -n "$bw" ] || bw=-
  [ "$chk" = ok ] && [ "$bw" != - ] && [ "$rc" = 0/0 ] || status=1
  [ "$bw" != - ] && total=$(awk -v a="$total" -v b="$bw" 'BEGIN { printf "%.2f", a + b }')
  printf '%-5s %12s %10s %8s\n' "$g" "$bw" "$chk" "$rc"
done
printf '%-5s %12s\n' total "$total"
echo "mode: $mode; logs: $logdir"
exit $status
