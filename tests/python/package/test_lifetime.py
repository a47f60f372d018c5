"""Object lifetimes: nothing crashes or leaks when objects are dropped in any
order, with transfers in flight, or at interpreter exit."""
import gc
import os
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest

import tpx
from helpers import TIMEOUT


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _pair():
    a = tpx.Endpoint(port=None, listen_host="127.0.0.1", name="a")
    b = tpx.Endpoint(port=None, listen_host="127.0.0.1", name="b")
    ab = a.connect("127.0.0.1", b.port)
    ba = b.accept(TIMEOUT)
    return a, b, ab, ba


def test_registration_keeps_object_alive():
    with tpx.Endpoint(port=None, listen_host="127.0.0.1") as ep:
        arr = np.arange(4096, dtype=np.uint8)
        ref = weakref.ref(arr)
        m = ep.register(arr)
        del arr
        gc.collect()
        assert ref() is not None and m.obj is ref()
        m.deregister()
        del m
        gc.collect()
        assert ref() is None


def test_endpoint_dropped_with_transfers_in_flight():
    fds = _fds()
    a, b, ab, ba = _pair()
    ma = a.register(np.zeros(1 << 20, np.uint8))
    mb = b.register(np.zeros(1 << 20, np.uint8))
    recvs = [ab.recv(ma, tag=i, offset=i * 1024, size=1024) for i in range(100)]  # never matched
    writes = [ab.write(ma, mb.descriptor) for _ in range(4)]
    a.close()  # cancels everything on a
    for r in recvs:
        with pytest.raises(tpx.Closed):
            r.wait(0)
    with pytest.raises(tpx.Closed):
        ab.write(ma, mb.descriptor)
    with pytest.raises(tpx.Closed):
        _ = ma.descriptor
    del a, ab, ma, recvs, writes
    gc.collect()
    b.close()
    del b, ba, mb
    gc.collect()
    assert _fds() == fds


def test_drop_everything_without_closing():
    fds = _fds()
    for _ in range(3):
        a, b, ab, ba = _pair()
        ma = a.register(np.zeros(4096, np.uint8))
        mb = b.register(np.zeros(4096, np.uint8))
        ab.recv(ma, tag=1)  # in flight, the handle dropped at once
        t = ab.write(ma, mb.descriptor)
        del a, b, ab, ba, ma, mb, t  # any order: the handles keep what they need
        gc.collect()
    assert _fds() == fds


def test_memory_dropped_while_in_use_is_parked():
    a, b, ab, ba = _pair()
    arr = np.zeros(4096, np.uint8)
    ref = weakref.ref(arr)
    m = a.register(arr)
    r = ab.recv(m, tag=9)
    del r  # freed in flight: the library finishes it in the background, holding the registration
    del arr, m
    gc.collect()
    assert ref() is not None  # kept: the recv may still write into it
    assert len(a._parked) == 1
    ab.close()  # cancels the recv
    for _ in range(1000):  # any endpoint call retries parked deregistrations
        a.register(bytearray(8))
        if not a._parked:
            break
    assert a._parked == []
    gc.collect()
    assert ref() is None
    a.close()
    b.close()


def test_peers_belong_to_the_endpoint():
    a, b, ab, ba = _pair()
    mb = b.register(np.zeros(4096, np.uint8))
    ab_ptr = ab._h
    del ab, ba  # a receiver may drop what accept() gave it
    gc.collect()
    ab = a.peers[0]
    assert ab._h == ab_ptr and ab.ok
    ma = a.register(np.arange(4096, dtype=np.uint8) % 251)
    ab.write(ma, mb.descriptor, notif=b"still here").wait(TIMEOUT)
    n = b.wait_notif(TIMEOUT)
    assert n.msg == b"still here" and n.peer in b.peers and n.peer.name == "a"
    ab.close()
    assert a.peers == [] and ab.status == -15
    a.close()
    b.close()


@pytest.mark.parametrize("how", ["exit", "exception", "sys.exit"])
def test_interpreter_exit_with_transfers_in_flight(how):
    script = textwrap.dedent(f"""
        import numpy as np, sys, tpx
        a = tpx.Endpoint(port=None, listen_host="127.0.0.1", name="a")
        b = tpx.Endpoint(port=None, listen_host="127.0.0.1", name="b")
        ab = a.connect("127.0.0.1", b.port); ba = b.accept(10)
        ma = a.register(np.zeros(1 << 22, np.uint8)); mb = b.register(np.zeros(1 << 22, np.uint8))
        keep = [ab.recv(ma, tag=i, offset=i, size=1) for i in range(10)]
        keep += [ab.write(ma, mb.descriptor) for _ in range(8)]
        ba.notify(b"bye")
        print("posted", flush=True)
        if "{how}" == "exception": raise RuntimeError("boom")
        if "{how}" == "sys.exit": sys.exit(3)
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ))
    assert "posted" in p.stdout
    assert p.returncode == {"exit": 0, "exception": 1, "sys.exit": 3}[how], p.stderr
    assert "Segmentation" not in p.stderr and "Exception ignored" not in p.stderr, p.stderr
