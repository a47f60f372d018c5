#!/bin/bash
# per-thread CPU over a window: thr.sh <label> ; starts pair, samples 1.0-3.0s
B=/work/main/build
snap() { for t in /proc/$1/task/*; do n=$(cat $t/comm); s=($(sed 's/.*) //' $t/stat)); echo "$n ${s[11]} ${s[12]}"; done 2>/dev/null | awk '{u[$1]+=$2; k[$1]+=$3} END{for(n in u) print n, u[n], k[n]}'; }
win() { # pid label
  sleep 1.0; snap $1 > /tmp/a.$2; sleep 2.0; snap $1 > /tmp/b.$2
  join <(sort /tmp/a.$2) <(sort /tmp/b.$2) | awk -v L=$2 '{printf "%s %-16s user %.2f sys %.2f\n", L, $1, ($4-$2)/100/2, ($5-$3)/100/2}'
}
case $1 in
raw)
  $B/tpx-netbench server --port 29100 --size 64M --inflight 1 --iters 400 >/tmp/rs.log 2>&1 & sp=$!
  sleep 0.3
  $B/tpx-netbench client 127.0.0.1 --port 29100 --size 64M --inflight 1 --iters 400 >/tmp/rc.log 2>&1 & cp=$!
  win $sp srv & win $cp cli & wait %3 %4 2>/dev/null; sleep 3.5
  wait $cp; wait $sp; grep RESULT /tmp/rc.log /tmp/rs.log ;;
eng)
  $B/tpx-bench server --host 127.0.0.1 --port 29110 --mem host >/tmp/es.log 2>&1 & sp=$!
  sleep 0.5
  $B/tpx-bench client 127.0.0.1 --port 29110 --mem host --size 64M --inflight ${INF:-1} --iters 300 --progress off >/tmp/ec.log 2>&1 & cp=$!
  win $sp srv & win $cp cli & sleep 3.5
  wait $cp; wait $sp; grep -h "PERF\|CPU" /tmp/ec.log /tmp/es.log ;;
esac
