#!/bin/sh
# Runs tpx-conformance as two processes on this host: a server and a client
# that meet over the TCP side channel on 127.0.0.1 (port chosen by the
# server). Usage: two_process.sh path/to/tpx-conformance [suite options...]
# Exit status: 0 only when both roles pass.
set -u
bin="$1"
shift
dir=$(mktemp -d "${TMPDIR:-/tmp}/tpx-cf.XXXXXX") || exit 2
trap 'rm -rf "$dir"' EXIT

"$bin" --role server --peer 127.0.0.1:0 --port-file "$dir/port" "$@" >"$dir/server.log" 2>&1 &
spid=$!

# Wait (bounded) for the server to publish its side-channel port.
i=0
while [ ! -s "$dir/port" ] && [ $i -lt 300 ]; do
  if ! kill -0 "$spid" 2>/dev/null; then break; fi
  sleep 0.1
  i=$((i + 1))
done
if [ ! -s "$dir/port" ]; then
  echo "two_process: the server did not publish its port" >&2
  kill "$spid" 2>/dev/null
  wait "$spid" 2>/dev/null
  cat "$dir/server.log"
  exit 2
fi
port=$(cat "$dir/port")

"$bin" --role client --peer "127.0.0.1:$port" "$@" >"$dir/client.log" 2>&1
crc=$?
# The server ends by itself (every wait in it is bounded).
wait "$spid"
src=$?

echo "===== server (rc $src) ====="
cat "$dir/server.log"
echo "===== client (rc $crc) ====="
cat "$dir/client.log"
[ "$src" -eq 0 ] && [ "$crc" -eq 0 ]
