"""The target side of tests/nixl/test_nixl_python.py: a NIXL agent with the
TPX backend in its own process, driven line by line over stdin/stdout.

It owns NBLK blocks of BLK bytes laid out with gaps (block i at i * STRIDE),
filled with a pattern seeded by its name, and answers:
(answers are prefixed "@@ ", the rest of stdout is NIXL's logging)
  ready              -> "READY <listen port> <region address> <region bytes>" (printed at start)
  expect <tag> <seed> <idx,...>   wait for notification <tag> from "init", then
                     check that block idx[k] holds pattern(seed, k): "OK <tag>" / "BAD ..."
  notif <text>       wait for notification <text>: "OK <text>"
  send <text>        send notification <text> to "init": "SENT"
  quit
Every wait is bounded (WAIT_S); nothing here talks to anything but 127.0.0.1.
"""

import socket
import sys
import time

import numpy as np

from nixl_import import nixl_agent, nixl_agent_config

NBLK = 1000
BLK = 4096
STRIDE = 3 * BLK  # non-contiguous: two block-sized gaps between blocks
WAIT_S = 60.0


def pattern(seed: int, k: int, n: int = BLK) -> np.ndarray:
    """Bytes a block written as the k-th of a transfer seeded `seed` holds."""
    return ((np.arange(n, dtype=np.uint32) * 31 + seed * 7919 + k * 131) & 0xFF).astype(np.uint8)


def say(line: str):
    """Protocol lines carry a prefix: NIXL's own logging shares stdout."""
    print("@@ " + line, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_notif(agent, want: bytes) -> bool:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        for _, msgs in agent.get_new_notifs().items():
            if want in msgs:
                return True
        time.sleep(0.001)
    return False


def main() -> int:
    name = sys.argv[1]
    port = free_port()
    agent = nixl_agent(
        name,
        nixl_agent_config(enable_listen_thread=True, listen_port=port, backends=["TPX"]),
    )
    # argv[2]: region size (0 = the blocks); the tests that stop or kill this
    # process ask for far more than the sockets buffer.
    nbytes = max(int(sys.argv[2]) if len(sys.argv) > 2 else 0, NBLK * STRIDE)
    region = np.zeros(nbytes, dtype=np.uint8)
    for i in range(NBLK):  # what a READ of block i (as the i-th) must return
        region[i * STRIDE:i * STRIDE + BLK] = pattern(1, i)
    reg = agent.register_memory([(region.ctypes.data, region.nbytes, 0, "")], "DRAM")
    say(f"READY {port} {region.ctypes.data} {region.nbytes}")
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "expect":
            tag, seed, idx = arg.split(" ")
            if not wait_notif(agent, tag.encode()):
                say(f"BAD no notification {tag}")
                continue
            bad = [k for k, i in enumerate(map(int, idx.split(",")))
                   if not np.array_equal(region[i * STRIDE:i * STRIDE + BLK], pattern(int(seed), k))]
            say(f"OK {tag}" if not bad else f"BAD {len(bad)} blocks differ, first {bad[0]}")
        elif cmd == "notif":
            say(f"OK {arg}" if wait_notif(agent, arg.encode()) else f"BAD no notification {arg}")
        elif cmd == "send":
            # init's metadata (send_local_metadata) arrives asynchronously.
            deadline = time.monotonic() + WAIT_S
            while not agent.check_remote_metadata("init") and time.monotonic() < deadline:
                time.sleep(0.001)
            agent.send_notif("init", arg.encode())
            say("SENT")
        elif cmd == "quit":
            break
    agent.deregister_memory(reg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
