"""Every operation across two processes, checked byte for byte."""
import numpy as np
import pytest

import tpx
from helpers import TIMEOUT, alloc, digest, get, pattern, put, regobj

MB = 1 << 20


def test_write_read(pair):
    ep, peer, rem = pair
    n = 3 * MB + 123  # several chunks, an odd tail
    desc = rem.call("alloc", "dst", n, "rw")
    buf = alloc(n)
    mem = ep.register(regobj(buf))
    data = pattern(n, 1)
    put(buf, data)
    peer.write(mem, desc, notif=b"w").wait(TIMEOUT)
    assert rem.call("wait_notif", TIMEOUT) == (b"w", "parent")
    assert rem.call("digest", "dst", 0, n) == digest(data)
    # read it back into another region, and a sub-range with offsets
    back = alloc(n)
    mback = ep.register(regobj(back))
    peer.read(mback, desc).wait(TIMEOUT)
    assert digest(get(back)) == digest(data)
    rem.call("fill", "dst", 9, 1000, 5000)
    peer.read(mback, desc, local_offset=17, remote_offset=1000, size=5000).wait(TIMEOUT)
    assert digest(get(back, 17, 5000)) == digest(pattern(5000, 9))


def test_remote_writes_to_us(pair):
    ep, peer, rem = pair
    n = MB
    buf = alloc(n)
    mem = ep.register(regobj(buf), access="w")
    rem.call("alloc", "src", n, "")
    rem.call("fill", "src", 2, 0, n)
    rem.call("write", "src", mem.descriptor, 0, 0, n, b"done")
    n_ = ep.wait_notif(TIMEOUT)
    assert (n_.msg, n_.peer_name, n_.peer) == (b"done", "child", peer)
    assert digest(get(buf)) == digest(pattern(n, 2))


def test_send_recv(pair):
    ep, peer, rem = pair
    n = 2 * MB
    rem.call("alloc", "r", n, "")
    buf = alloc(n)
    mem = ep.register(regobj(buf), access="")
    put(buf, pattern(n, 3))
    t = peer.send(mem, tag=5, size=n - 7)  # posted before the recv
    assert rem.call("recv", "r", 5, 0, n) == n - 7
    t.wait(TIMEOUT)
    assert rem.call("digest", "r", 0, n - 7) == digest(pattern(n - 7, 3))
    # the other way, recv posted first, into an offset
    r = peer.recv(mem, tag=6, offset=100, size=4096)
    rem.call("fill", "r", 4, 0, 4000)
    rem.call("send", "r", 6, 0, 4000)
    assert r.wait(TIMEOUT).received == 4000
    assert digest(get(buf, 100, 4000)) == digest(pattern(4000, 4))


def test_vectored_1000_blocks(pair):
    ep, peer, rem = pair
    blk, nblk = 4096, 1000
    desc = rem.call("alloc", "kv", 2 * blk * nblk, "rw")
    src = alloc(blk * nblk)
    msrc = ep.register(regobj(src))
    data = pattern(blk * nblk, 5)
    put(src, data)
    dst_blocks = list(np.random.default_rng(0).permutation(2 * nblk)[:nblk])  # non-contiguous, shuffled
    roffs = [int(b) * blk for b in dst_blocks]
    loffs = [i * blk for i in range(nblk)]
    peer.writev(msrc, desc, loffs, roffs, blk, notif=b"kv").wait(TIMEOUT)
    assert rem.call("wait_notif", TIMEOUT)[0] == b"kv"
    assert rem.call("gather", "kv", roffs, blk) == digest(data)
    # readv them back in reverse into a fresh region
    back = alloc(blk * nblk)
    mback = ep.register(regobj(back))
    peer.readv(mback, desc, loffs, roffs[::-1], [blk] * nblk).wait(TIMEOUT)
    got = get(back).reshape(nblk, blk)
    assert digest(got[::-1]) == digest(data)


def test_notifications_in_order(pair):
    ep, peer, rem = pair
    for i in range(50):
        peer.notify(b"n%d" % i)
    got = [rem.call("wait_notif", TIMEOUT)[0] for _ in range(50)]
    assert got == [b"n%d" % i for i in range(50)]
    for i in range(3):
        rem.call("notify", b"back%d" % i)
    first = ep.wait_notif(TIMEOUT)
    assert first.msg == b"back0"
    rest = []
    for _ in range(100):  # get_notifs drains what arrived; wait for the rest
        rest += ep.get_notifs()
        if len(rest) >= 2:
            break
        rest.append(ep.wait_notif(TIMEOUT))
    assert [n.msg for n in rest] == [b"back1", b"back2"]
    peer.notify(b"x" * tpx.NOTIF_MAX)
    assert rem.call("wait_notif", TIMEOUT)[0] == b"x" * tpx.NOTIF_MAX


def test_prepared_repost(pair):
    ep, peer, rem = pair
    n = 64 * 1024
    desc = rem.call("alloc", "d", n, "w")
    buf = alloc(n)
    mem = ep.register(regobj(buf))
    t = peer.prepare_write(mem, desc, notif=b"r0")
    with pytest.raises(tpx.InvalidUsage):
        t.done()  # never posted
    for i in range(3):
        put(buf, pattern(n, 10 + i))
        t.set_notif(b"r%d" % i)
        t.post().wait(TIMEOUT)
        assert t.done()
        assert rem.call("wait_notif", TIMEOUT)[0] == b"r%d" % i
        assert rem.call("digest", "d", 0, n) == digest(pattern(n, 10 + i))


def test_wait_any_many(pair):
    ep, peer, rem = pair
    blk, k = 1024, 300
    desc = rem.call("alloc", "d", blk * k, "w")
    buf = alloc(blk * k)
    mem = ep.register(regobj(buf))
    data = pattern(blk * k, 6)
    put(buf, data)
    ts = [peer.write(mem, desc, local_offset=i * blk, remote_offset=i * blk, size=blk) for i in range(k)]
    live = list(ts)
    seen = set()
    for _ in range(k):
        i = tpx.wait_any(live, TIMEOUT)
        assert i not in seen and live[i].done()
        seen.add(i)
        live[i] = None
    assert rem.call("digest", "d", 0, blk * k) == digest(data)
    with pytest.raises(tpx.InvalidArgument):
        tpx.wait_any(live, 0)  # nothing left in the set


def test_connect_by_conn_info(ep, remote):
    peer = ep.connect(remote.conn_info)
    assert remote.call("accept") == "parent"
    assert peer.name == "child" and peer.ok and peer.num_channels >= 1
    assert peer in ep.peers
    # and the remote dials us
    remote.call("connect", ep.conn_info)
    p2 = ep.accept(TIMEOUT)
    assert p2.name == "child"
