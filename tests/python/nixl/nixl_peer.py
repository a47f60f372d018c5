"""The target side of tests/python/nixl/test_nixl_python.py: a NIXL agent with the
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

import os
import socket
import sys
import time

import numpy as np

from nixl_import import nixl_agent, nixl_agent_config

NBLK = 1000
BLK = 4096
STRIDE = 3 * BLK  # non-contiguous: two block-sized gaps between blocks
WAIT_S = 60.0
# DRAM (numpy) or VRAM (torch CUDA tensors on GPU 0: the GPU machine's run).
MEM = os.environ.get("TPX_NIXL_TEST_MEM", "DRAM")


class Region:
    """Registered memory of MEM type; slices read and write numpy arrays."""

    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        if MEM == "VRAM":
            import torch
            self.t = torch.zeros(nbytes, dtype=torch.uint8, device="cuda:0")
            self.addr = self.t.data_ptr()
        else:
            self.t = np.zeros(nbytes, dtype=np.uint8)
            self.addr = self.t.ctypes.data

    def __getitem__(self, s: slice) -> np.ndarray:
        return self.t[s].cpu().numpy() if MEM == "VRAM" else self.t[s]

    def __setitem__(self, s: slice, v: np.ndarray):
        if MEM == "VRAM":
            import torch
            self.t[s].copy_(torch.from_numpy(v))
        else:
            self.t[s] = v

    def register(self, agent):
        return agent.register_memory([(self.addr, self.nbytes, 0, "")], MEM)


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
    region = Region(nbytes)
    for i in range(NBLK):  # what a READ of block i (as the i-th) must return
        region[i * STRIDE:i * STRIDE + BLK] = pattern(1, i)
    reg = region.register(agent)
    say(f"READY {port} {region.addr} {region.nbytes}")
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
