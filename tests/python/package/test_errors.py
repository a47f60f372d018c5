"""Every error path: the right tpx.Error subclass, its C code and detail."""
import os
import time

import numpy as np
import pytest

import tpx
from helpers import TIMEOUT, alloc, regobj


def test_error_carries_code_and_detail():
    with pytest.raises(tpx.InvalidArgument) as e:
        tpx.Endpoint(port=None, num_channels=0)
    assert e.value.code == -4 and e.value.name == "invalid argument"
    assert "TPX_NUM_CHANNELS=0" in e.value.detail
    assert isinstance(e.value, (tpx.Error, ValueError))
    with pytest.raises(tpx.InvalidArgument, match="no_such_knob"):
        tpx.Endpoint(port=None, no_such_knob=1)


def test_chunk_bytes_auto_or_in_range():
    for v in ("auto", 0, "512K", 4 << 20):  # "auto" and 0: per transfer (docs/CONFIG.md)
        with tpx.Endpoint(port=None, chunk_bytes=v):
            pass
    for v in (100, "8M", "big"):
        with pytest.raises(tpx.InvalidArgument, match="TPX_CHUNK_BYTES"):
            tpx.Endpoint(port=None, chunk_bytes=v)


def test_unregistered_memory(pair):
    ep, peer, rem = pair
    desc = rem.call("alloc", "d", 4096, "rw")
    with pytest.raises(tpx.InvalidArgument, match="registered first"):
        peer.write(np.zeros(4096, np.uint8), desc)
    with tpx.Endpoint(port=None, listen_host="127.0.0.1") as other:
        foreign = other.register(np.zeros(4096, np.uint8))
        with pytest.raises(tpx.InvalidArgument, match="another endpoint"):
            peer.write(foreign, desc)


def test_out_of_range_remote_access(pair):
    ep, peer, rem = pair
    desc = rem.call("alloc", "d", 4096, "rw")
    ro = rem.call("alloc", "ro", 4096, "r")
    mem = ep.register(regobj(alloc(8192)))
    with pytest.raises(tpx.AccessDenied) as e:
        peer.write(mem, desc, remote_offset=1, size=4096)
    assert e.value.code == -17 and "outside" in e.value.detail
    with pytest.raises(tpx.AccessDenied):
        peer.write(mem, desc)  # 8 KiB into 4 KiB
    with pytest.raises(tpx.AccessDenied, match="non-writable"):
        peer.write(mem, ro, size=16)
    with pytest.raises(tpx.AccessDenied):
        peer.read(mem, desc, remote_offset=4000, size=200)
    with pytest.raises(tpx.InvalidArgument):
        peer.write(mem, desc, local_offset=8000, size=1000)  # local range
    peer.write(mem, desc, size=4096).wait(TIMEOUT)  # the peer is still fine


def test_closed_peer(pair):
    ep, peer, rem = pair
    desc = rem.call("alloc", "d", 4096, "rw")
    mem = ep.register(regobj(alloc(4096)))
    r = peer.recv(mem, tag=1)
    rem.call("close_peer")
    with pytest.raises(tpx.Error) as e:
        r.wait(TIMEOUT)
    assert isinstance(e.value, (tpx.Closed, tpx.RemoteError, tpx.Cancelled, tpx.SystemError_))
    deadline = time.monotonic() + TIMEOUT
    while peer.ok and time.monotonic() < deadline:
        time.sleep(0.01)
    assert peer.status < 0
    with pytest.raises(tpx.Error):
        peer.write(mem, desc)
    with pytest.raises(tpx.Error):
        peer.notify(b"x")
    peer.close()
    with pytest.raises(tpx.Closed, match="peer is closed"):
        peer.send(mem)


def test_local_close_cancels(pair):
    ep, peer, rem = pair
    mem = ep.register(regobj(alloc(4096)))
    r = peer.recv(mem, tag=2)
    peer.close()
    with pytest.raises(tpx.Cancelled):
        r.wait(TIMEOUT)


def test_bad_descriptor_bytes(pair):
    ep, peer, rem = pair
    good = rem.call("alloc", "d", 4096, "rw")
    for bad in (b"", b"garbage", good[:-1], good + b"x", bytes(len(good))):
        with pytest.raises((tpx.ProtocolError, tpx.VersionMismatch, tpx.InvalidArgument)) as e:
            tpx.RemoteMemory(bad)
        assert e.value.code in (-16, -13, -4)
    mem = ep.register(regobj(alloc(4096)))
    with pytest.raises(tpx.ProtocolError):
        peer.write(mem, b"\x00" * 40)
    # a descriptor of our own memory names another endpoint than the peer
    with pytest.raises(tpx.InvalidArgument, match="another endpoint"):
        peer.write(mem, mem.descriptor)


def test_timeouts(pair):
    ep, peer, rem = pair
    mem = ep.register(regobj(alloc(4096)))
    r = peer.recv(mem, tag=3)
    with pytest.raises(tpx.TimedOut) as e:
        r.wait(0.05)
    assert isinstance(e.value, TimeoutError) and "still in flight" in e.value.detail
    assert not r.done()
    with pytest.raises(tpx.TimedOut):
        tpx.wait_any([None, r], 0.05)
    with pytest.raises(tpx.TimedOut):
        tpx.wait_any([r], 0)
    with pytest.raises(tpx.TimedOut):
        ep.accept(0.05)
    with pytest.raises(tpx.TimedOut):
        ep.wait_notif(0.05)
    with pytest.raises(tpx.InvalidUsage):
        r.post()  # still in flight
    assert ep.get_notifs() == []


def test_truncation(pair):
    ep, peer, rem = pair
    rem.call("alloc", "r", 100, "")
    mem = ep.register(regobj(alloc(4096)))
    s = peer.send(mem, tag=4, size=200)
    with pytest.raises(tpx.Truncated):
        rem.call("recv", "r", 4, 0, 100)
    with pytest.raises(tpx.Truncated):
        s.wait(TIMEOUT)


def test_registration_errors(ep):
    with pytest.raises(tpx.InvalidArgument, match="read-only"):
        ep.register(b"immutable")  # default access lets peers write
    ep.register(b"immutable", access="r")
    with pytest.raises(tpx.InvalidArgument, match="contiguous"):
        ep.register(np.zeros((8, 8), np.uint8)[:, ::2])
    with pytest.raises(tpx.InvalidArgument):
        ep.register(object())
    with pytest.raises(tpx.InvalidArgument):
        ep.register(np.zeros(0, np.uint8))  # len must be > 0
    with pytest.raises(tpx.InvalidArgument, match="access"):
        ep.register(bytearray(8), access="x")


def test_connect_errors(ep):
    # Nothing listens there: refused connects are retried until the connect
    # timeout (docs/RELIABILITY.md, "Connection setup"); without retries the
    # first refusal ends it.
    with tpx.Endpoint(port=None, listen_host="127.0.0.1", connect_timeout_ms=400) as short:
        t0 = time.monotonic()
        with pytest.raises(tpx.Error, match="Connection refused"):
            short.connect("127.0.0.1", 1)
        assert time.monotonic() - t0 >= 0.4
    with tpx.Endpoint(port=None, listen_host="127.0.0.1", socket_retry_cnt=0) as once:
        with pytest.raises(tpx.Error, match="Connection refused"):
            once.connect("127.0.0.1", 1)
    with pytest.raises(tpx.ProtocolError):
        ep.connect(b"not a conn info")
    with pytest.raises(tpx.InvalidArgument):
        ep.connect("127.0.0.1")


def test_auth_key(tmp_path):
    """A shared key (docs/SECURITY.md): the same key connects and moves bytes;
    another key is tpx.AuthError; a key file others may read is refused."""
    key = "py-shared-key-" + "k" * 18
    kw = dict(port=None, listen_host="127.0.0.1", connect_timeout_ms=5000)
    with tpx.Endpoint(auth_key=key, **kw) as a, tpx.Endpoint(auth_key=key, **kw) as b:
        peer = a.connect("127.0.0.1", b.port)
        b.accept(5)
        dst = np.zeros(4096, np.uint8)
        src = np.arange(4096, dtype=np.uint32).astype(np.uint8)
        msrc, mdst = a.register(src), b.register(dst, access="rw")  # kept: registered while used
        peer.write(msrc, mdst.descriptor).wait()
        assert (dst == src).all()
    with tpx.Endpoint(auth_key=key, **kw) as a, tpx.Endpoint(auth_key=key[::-1], **kw) as b:
        with pytest.raises(tpx.AuthError, match="authentication failed") as e:
            a.connect("127.0.0.1", b.port)
        assert e.value.code == -21
    f = tmp_path / "key"
    f.write_text(key + "\n")
    f.chmod(0o644)
    with pytest.raises(tpx.InvalidArgument, match="group or others"):
        tpx.Endpoint(auth_key_file=str(f), **kw)


_ONCE = r'''
import socket, threading, tpx
try:
    tpx.Endpoint(port=None, num_channels=0)
except tpx.InvalidArgument as e:
    print("raised", e.code)
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(4)
def answer():  # a program that is not tpx: answers in another protocol
    s.settimeout(10)
    c, _ = s.accept()
    c.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    c.close()
threading.Thread(target=answer, daemon=True).start()
with tpx.Endpoint(port=None, listen_host="127.0.0.1", connect_timeout_ms=5000) as ep:
    try:
        ep.connect("127.0.0.1", s.getsockname()[1])
    except tpx.ProtocolError as e:
        print("raised", e.code, e.detail)
'''


def test_error_is_the_exception_alone():
    """One error reported once: with the default TPX_LOG the library logs
    nothing of an error it returns; the exception carries it."""
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "TPX_LOG"}
    p = subprocess.run([sys.executable, "-c", _ONCE], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "raised -4", p.stdout
    assert lines[1].startswith("raised -16") and "not a tpx peer" in lines[1], p.stdout
    assert p.stderr == "", p.stderr


def test_message_names_the_code_once():
    e = tpx.Error(-8, "tpx_connect: peer x: no answer (timed out)")
    assert str(e) == "tpx_connect: peer x: no answer (timed out)" and e.name == "timed out"
    assert str(tpx.Error(-8, "a detail")) == "timed out: a detail"
    assert str(tpx.Error(-8)) == "timed out"
