"""NIXL as the client, through its Python API: two agents in two processes
with nixl_agent_config(backends=["TPX"]), metadata exchanged through NIXL's
listen port, transfers shaped like vLLM's NixlConnector (prep_xfer_dlist once,
make_prepped_xfer with block-index lists). Every byte is checked.

Run by ctest (tests/nixl/CMakeLists.txt) with NIXL_PLUGIN_DIR, PYTHONPATH
and LD_LIBRARY_PATH pointing at the plugin and the NIXL built by
scripts/build-testdeps.sh; TPX_SOCKET_IFNAME=lo keeps every byte on
127.0.0.1. TPX_NIXL_TEST_MEM=VRAM runs the same flow on CUDA tensors (GPU
machine, torch and a --cuda NIXL build needed).
"""

import os
import random
import signal
import sys
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from nixl_import import _bindings, nixl_agent, nixl_agent_config  # noqa: E402
from nixl_peer import BLK, MEM, NBLK, STRIDE, Region, free_port, pattern  # noqa: E402
from peer_process import PeerProcess  # noqa: E402

WAIT_S = 60.0  # bound of every loop below (a hang fails the test, never blocks ctest)


class Target(PeerProcess):
    """The other agent (tests/python/nixl/nixl_peer.py) in its own process."""

    def __init__(self, region_bytes: int = 0):
        super().__init__([sys.executable, os.path.join(HERE, "nixl_peer.py"), "target", str(region_bytes)])
        words = self.line().split()
        assert words[0] == "READY", words
        self.port, self.addr, self.nbytes = int(words[1]), int(words[2]), int(words[3])


def until(cond, what: str, limit: float = WAIT_S):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.001)
    pytest.fail(f"{what}: not within {limit} s")


@pytest.fixture
def pair():
    """(initiator agent, its block region, prepped local side, prepped remote side, target)."""
    t = Target()
    port = free_port()
    a = nixl_agent("init", nixl_agent_config(enable_listen_thread=True, listen_port=port,
                                             backends=["TPX"]))
    region = Region(NBLK * STRIDE)
    reg = region.register(a)
    a.fetch_remote_metadata("target", "127.0.0.1", t.port)
    a.send_local_metadata("127.0.0.1", t.port)
    until(lambda: a.check_remote_metadata("target"), "target's metadata")
    # vLLM's NixlConnector: one descriptor per block, prepared once per side.
    local = a.prep_xfer_dlist("NIXL_INIT_AGENT",
                              [(region.addr + i * STRIDE, BLK, 0) for i in range(NBLK)], MEM)
    remote = a.prep_xfer_dlist("target", [(t.addr + i * STRIDE, BLK, 0) for i in range(NBLK)], MEM)
    yield a, region, local, remote, t
    a.release_dlist_handle(local)
    a.release_dlist_handle(remote)
    t.close()
    a.remove_remote_agent("target")
    a.deregister_memory(reg)


def run(a, h) -> str:
    st = a.transfer(h)
    assert st in ("PROC", "DONE"), st
    return until(lambda: (lambda s: s if s != "PROC" else None)(a.check_xfer_state(h)), "transfer")


def test_write_1000_blocks_with_notification(pair):
    a, region, local, remote, t = pair
    rng = random.Random(11)
    src = rng.sample(range(NBLK), NBLK)  # block-index lists as a scheduler hands them out
    dst = rng.sample(range(NBLK), NBLK)
    for k, i in enumerate(src):
        region[i * STRIDE:i * STRIDE + BLK] = pattern(5, k)
    h = a.make_prepped_xfer("WRITE", local, src, remote, dst, b"w-done")
    assert run(a, h) == "DONE"
    # The target checks every byte as soon as the notification arrives.
    assert t.ask("expect w-done 5 " + ",".join(map(str, dst))) == "OK w-done"
    # Reposting the same handle with a new notification works as well.
    for k, i in enumerate(src):
        region[i * STRIDE:i * STRIDE + BLK] = pattern(6, k)
    assert a.transfer(h, b"w-again") in ("PROC", "DONE")
    until(lambda: a.check_xfer_state(h) == "DONE", "repost")
    assert t.ask("expect w-again 6 " + ",".join(map(str, dst))) == "OK w-again"
    a.release_xfer_handle(h)


def test_read_1000_blocks_with_notification(pair):
    a, region, local, remote, t = pair
    rng = random.Random(12)
    src = rng.sample(range(NBLK), NBLK)  # remote blocks, in this order ...
    dst = rng.sample(range(NBLK), NBLK)  # ... into these local ones
    h = a.make_prepped_xfer("READ", local, dst, remote, src, b"r-done")
    assert run(a, h) == "DONE"
    for k in range(NBLK):
        got = region[dst[k] * STRIDE:dst[k] * STRIDE + BLK]
        assert np.array_equal(got, pattern(1, src[k])), f"block {k}"
    # Gaps between blocks stay untouched.
    for i in range(NBLK):
        assert not region[i * STRIDE + BLK:(i + 1) * STRIDE].any()
    assert t.ask("notif r-done") == "OK r-done"
    a.release_xfer_handle(h)


def test_notifications_both_ways(pair):
    a, _, _, _, t = pair
    a.send_notif("target", b"hello")
    assert t.ask("notif hello") == "OK hello"
    assert t.ask("send pong") == "SENT"
    got = []
    until(lambda: got.extend(a.get_new_notifs().get("target", [])) or b"pong" in got, "pong")


def test_bad_input_is_an_error_not_a_crash(pair):
    a, region, local, remote, t = pair
    # A descriptor outside the target's registration: NIXL refuses it at prep time.
    with pytest.raises(Exception):
        bad = a.prep_xfer_dlist("target", [(t.addr + t.nbytes, BLK, 0)], MEM)
        a.make_prepped_xfer("WRITE", local, [0], bad, [0])
    # Unknown agent.
    with pytest.raises(Exception):
        a.prep_xfer_dlist("nobody", [(t.addr, BLK, 0)], MEM)
    # Garbage metadata.
    with pytest.raises(Exception):
        a.add_remote_agent(b"\x00garbage" * 10)
    # The agent still works.
    h = a.make_prepped_xfer("READ", local, [0], remote, [3], b"")
    assert run(a, h) == "DONE"
    assert np.array_equal(region[:BLK], pattern(1, 3))
    a.release_xfer_handle(h)


def test_peer_killed_mid_transfer(monkeypatch):
    # A deadline far beyond the bound below: the error must come from the death.
    monkeypatch.setenv("TPX_TIMEOUT_MS", "60000")
    _killed_or_stalled(kill=True, error=_bindings.nixlRemoteDisconnectError)


def test_stalled_transfer_fails_within_deadline(monkeypatch):
    monkeypatch.setenv("TPX_TIMEOUT_MS", "3000")
    _killed_or_stalled(kill=False, error=_bindings.nixlBackendError)


def _state(a, h) -> str:
    """check_xfer_state, with the NIXL status of a failure ("ERR" raises)."""
    try:
        return a.check_xfer_state(h)
    except Exception as e:  # the bindings raise one class per NIXL status
        return e


def _killed_or_stalled(kill: bool, error):
    t = Target(region_bytes=256 << 20)  # far more than the sockets buffer
    port = free_port()
    a = nixl_agent("init", nixl_agent_config(enable_listen_thread=True, listen_port=port,
                                             backends=["TPX"]))
    region = Region(t.nbytes)
    reg = region.register(a)
    a.fetch_remote_metadata("target", "127.0.0.1", t.port)
    until(lambda: a.check_remote_metadata("target"), "target's metadata")
    local = a.prep_xfer_dlist("NIXL_INIT_AGENT", [(region.addr, region.nbytes, 0)], MEM)
    remote = a.prep_xfer_dlist("target", [(t.addr, region.nbytes, 0)], MEM)
    try:
        os.kill(t.p.pid, signal.SIGSTOP)
        h = a.make_prepped_xfer("WRITE", local, [0], remote, [0], b"never")
        assert a.transfer(h) == "PROC"
        time.sleep(0.3)
        assert a.check_xfer_state(h) == "PROC"
        t0 = time.monotonic()
        if kill:
            t.p.kill()
            t.p.wait(timeout=30)
            limit = 15.0  # far below TPX_TIMEOUT_MS: the peer's death, not a deadline
        else:
            limit = 3.0 + 15.0
        st = until(lambda: (lambda s: s if s != "PROC" else None)(_state(a, h)), "ERR", limit)
        assert time.monotonic() - t0 < limit
        assert isinstance(st, error), st
        a.release_xfer_handle(h)
    finally:
        if t.p.poll() is None:
            os.kill(t.p.pid, signal.SIGCONT)
            t.p.kill()
            t.p.wait(timeout=30)
    a.release_dlist_handle(local)
    a.release_dlist_handle(remote)
    a.remove_remote_agent("target")
    a.deregister_memory(reg)
