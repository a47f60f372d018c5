#!/bin/sh
# Runs a test in a network namespace of its own (loopback up) when this user
# may make one (root), else as it is. For the tests that open thousands of
# loopback connections (test_engine_close, test_engine_cycles): each leaves
# ports in TIME_WAIT for a minute, and every bind and connect beside them
# costs kernel time that grows with their number; in its own namespace a
# test meets only its own, and leaves none to the tests beside it.
# Usage: own_netns.sh PROGRAM [ARGS...]
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1 && command -v ip >/dev/null 2>&1 &&
  unshare -n true 2>/dev/null; then
  exec unshare -n sh -c 'ip link set lo up && exec "$@"' own_netns "$@"
fi
exec "$@"
