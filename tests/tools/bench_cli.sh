#!/bin/sh
# tpx-bench and tpx-netbench refuse every bad argument with exit status 2 and
# a message that names the argument and the value (the sweep and KV-pattern options first).
# usage: bench_cli.sh TPX_BENCH TPX_NETBENCH
set -u
bench=$1 netbench=$2
fails=0
err=$(mktemp)
trap 'rm -f "$err"' EXIT

# expect TOOL WORD ARGS...: exit 2 within 10 s, stderr names WORD
expect() {
  tool=$1 word=$2
  shift 2
  timeout 10 "$tool" "$@" >/dev/null 2>"$err"
  rc=$?
  if [ $rc -ne 2 ] || ! grep -qF -- "$word" "$err"; then
    echo "FAIL: $(basename "$tool") $* -> exit $rc, stderr: $(head -n 1 "$err") (wanted exit 2 naming '$word')"
    fails=$((fails + 1))
  fi
}

for mode in loopback "client 127.0.0.1"; do
  # shellcheck disable=SC2086
  set -- $mode
  expect "$bench" "-5" "$@" --size -5
  expect "$bench" "--size" "$@" --size 100G
  expect "$bench" "--iters" "$@" --iters
done
for mode in server "client 127.0.0.1"; do
  # shellcheck disable=SC2086
  set -- $mode
  expect "$bench" "abc" "$@" --port abc
  expect "$bench" "-5" "$@" --port -5
  expect "$bench" "70000" "$@" --port 70000
done
# --name / --peer (the etcd rendezvous): names checked, one way to name the server
expect "$bench" "a/b" client --peer a/b
expect "$bench" "--peer" client 127.0.0.1 --peer srv
expect "$bench" "--peer" client
expect "$bench" "bad name" server --name "bad name"
expect "$bench" "--peer" server --peer srv
expect "$bench" "--name" client 127.0.0.1 --name srv
for mode in loopback server "client 127.0.0.1"; do
  # shellcheck disable=SC2086
  set -- $mode
  expect "$bench" "TPX_CHUNK_BYTES" "$@" --chunk 1
  expect "$bench" "--nonsense" "$@" --nonsense
done
expect "$bench" "--size" server --size 4K
expect "$bench" "--port" loopback --port 20000
expect "$bench" "--op" loopback --op write,bogus
expect "$bench" "--batch" loopback --batch 4 --op send
expect "$bench" "--channels" loopback --channels 999
expect "$bench" "-f" loopback -f 1
expect "$bench" "mode" bogus
expect "$bench" "HOST" client
expect "$netbench" "-1" --size -1
expect "$netbench" "abc" --port abc
expect "$netbench" "70000" --port 70000
expect "$netbench" "-5" --port -5
expect "$netbench" "--iters" --iters 0
expect "$netbench" "--bogus" --bogus
expect "$netbench" "TPX_TIMEOUT_MS" --timeout-ms 0

# a number outside its range is called that; an interface that is not there
# is named with its variable and the interfaces that are
expect "$bench" "out of range [1, 100000000]" loopback --iters 100000001
expect "$bench" "out of range [1, 64]" loopback --channels 65
expect env "TPX_SOCKET_IFNAME 'nosuch0'" TPX_SOCKET_IFNAME=nosuch0 "$bench" loopback
expect env "up with an address: lo" TPX_SOCKET_IFNAME==nosuch0 TPX_NET_PLUGIN=builtin "$bench" loopback
"$bench" --version | grep -q '^wire version [0-9]' || { echo "FAIL: tpx-bench --version: no wire version"; fails=$((fails + 1)); }

# and a good command line still runs (help: exit 0)
"$bench" --help >/dev/null || { echo "FAIL: tpx-bench --help"; fails=$((fails + 1)); }
[ $fails -eq 0 ] && echo "bench_cli: all bad arguments named, exit 2"
exit $((fails > 0))
