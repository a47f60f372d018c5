"""Endpoints, peers, registered memory, transfers and notifications.

Lifetimes: an Endpoint owns everything made from it. Dropping a Transfer
frees it (one still in flight finishes in the background, holding its
registrations); dropping a Memory deregisters it, and one still in use by a
transfer is parked and deregistered later, its Python object (the tensor,
the array) kept alive until then. Peers belong to the endpoint: a receiver
may drop the Peer that accept() returned and still be written to; they end
with Peer.close() or with the endpoint. Endpoint.close()
(or dropping the endpoint, or interpreter exit) cancels what is in flight and
releases all of it; objects made from a closed endpoint raise tpx.Closed.
"""
from __future__ import annotations

import atexit
import ctypes
import math
import threading
import weakref
from ctypes import byref, c_size_t, c_void_p
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _buffers, _lib
from ._errors import Error, check, error
from ._lib import (ACCESS_READ, ACCESS_WRITE, CONN_INFO_MAX, EINPROGRESS, MD_MAX, MEM_CUDA, PORT_EPHEMERAL,
                   EndpointParams, Iov, MemDesc, Notif, lib)

try:
    import numpy as _np
except ImportError:  # numpy only speeds up vectored transfers
    _np = None

READ = ACCESS_READ
WRITE = ACCESS_WRITE
Timeout = Optional[float]
Descriptor = Union["RemoteMemory", bytes, bytearray, memoryview]

_live: "weakref.WeakSet[Endpoint]" = weakref.WeakSet()
_exiting = False


def _close_all() -> None:
    global _exiting
    for ep in list(_live):
        ep.close()
    _exiting = True


atexit.register(_close_all)


def _ms(timeout: Timeout) -> int:
    if timeout is None:
        return -1
    if type(timeout) is int and 0 <= timeout < 2147483:
        return timeout * 1000
    return max(0, min(2**31 - 1, math.ceil(timeout * 1000)))


# The calls on the per-transfer path, bound once (attribute lookups cost
# as much as the calls themselves: docs/notes/python-vs-c.md).
_xfer_post, _xfer_test, _xfer_wait = lib.tpx_xfer_post, lib.tpx_xfer_test, lib.tpx_xfer_wait
_xfer_run = lib.tpx_xfer_run
_fast = _lib.speedups()  # the compiled fast path for run / wait_notif, or None
_wait_notif, _get_notif = lib.tpx_wait_notif, lib.tpx_get_notif


def _closed(what: str) -> Error:
    return error(-15, f"{what} is closed")


def _access(a: Union[str, int]) -> int:
    if isinstance(a, int):
        return a
    flags = 0
    for ch in a:
        if ch not in "rw":
            raise error(-4, f"access {a!r}: use 'r', 'w', 'rw', '' or tpx.READ | tpx.WRITE")
        flags |= READ if ch == "r" else WRITE
    return flags


class _Closing:
    """Context manager: leaving the block calls close()."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: Any) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Endpoint(_Closing):
    """One process's presence on the network for one GPU (or host memory).

    ``Endpoint(gpu=0, plugin=None, name=None, port=0, listen_host=None,
    listen=True, **config)``: ``plugin`` None / "tpx" = the built-in TCP
    transport (else a path or name of an NCCL net plugin, "tcpx");
    ``port`` 0 = the configured base + gpu, None = any free port; every
    other keyword is a setting of docs/CONFIG.md by field or variable name
    (``num_channels=8``, ``TPX_CHUNK_BYTES="1M"``), checked like the
    environment. Use as a context manager or call close().
    """

    def __init__(self, gpu: int = 0, plugin: Optional[str] = None, *, name: Optional[str] = None,
                 port: Optional[int] = 0, listen_host: Optional[str] = None, listen: bool = True,
                 **config: Any) -> None:
        self._h: Optional[int] = None
        # Shared with every object made from this endpoint, which checks it
        # before each call: when objects die together (a reference cycle),
        # the garbage collector clears weak references before finalizers
        # run, so the endpoint could not reach them to tell them itself.
        self._life = _Life()
        self._lock = threading.Lock()
        self._peers: Dict[int, "Peer"] = {}  # every peer handed out, until closed
        self._parked: List["_Registration"] = []  # deregistration refused (EAGAIN): retried later
        self._tls = threading.local()  # one notification buffer per thread
        cfg = ctypes.create_string_buffer(lib.tpx_config_size())
        lib.tpx_config_from_env(cfg)  # a malformed variable was logged and its default kept
        for key, value in config.items():
            if isinstance(value, bool):
                value = int(value)
            rc = lib.tpx_config_set(cfg, key.encode(), str(value).encode())
            if rc == -11:  # TPX_ENOENT: no such setting, i.e. a bad keyword argument
                raise error(-4, lib.tpx_last_error().decode(errors="replace"))
            check(rc)
        p = EndpointParams()
        lib.tpx_endpoint_params_init(byref(p))
        p.cfg = ctypes.cast(cfg, c_void_p)
        if plugin is not None:
            p.plugin = plugin.encode()
        if name is not None:
            p.name = name.encode()
        p.gpu = gpu
        if listen_host is not None:
            p.listen_host = listen_host.encode()
        p.port = PORT_EPHEMERAL if port is None else port
        p.no_listen = 0 if listen else 1
        h = c_void_p()
        check(lib.tpx_endpoint_create(byref(p), byref(h)))
        self._h = self._life.h = h.value
        self.gpu = gpu
        _live.add(self)

    # -- identity ---------------------------------------------------------
    def _handle(self) -> int:
        if self._h is None:
            raise _closed("endpoint")
        return self._h

    @property
    def port(self) -> int:
        """The control port actually bound (0 when not listening)."""
        return lib.tpx_endpoint_port(self._handle())

    @property
    def name(self) -> str:
        return lib.tpx_endpoint_name(self._handle()).decode()

    @property
    def transport(self) -> str:
        """The transport in use: "tpx" (built-in), "GPUDirectTCPX_v7", ..."""
        return lib.tpx_endpoint_transport(self._handle()).decode()

    @property
    def conn_info(self) -> bytes:
        """Connection info for a remote ``connect(conn_info)``: opaque bytes."""
        buf = ctypes.create_string_buffer(CONN_INFO_MAX)
        n = c_size_t()
        check(lib.tpx_get_conn_info(self._handle(), buf, CONN_INFO_MAX, byref(n)))
        return buf.raw[:n.value]

    # -- peers ------------------------------------------------------------
    def connect(self, host: Union[str, bytes], port: Optional[int] = None) -> "Peer":
        """Connect to ``host:port``, or to the endpoint a ``conn_info`` (bytes)
        describes. Blocks until the peer is usable (connect_timeout_ms)."""
        h, out = self._handle(), c_void_p()
        if isinstance(host, (bytes, bytearray, memoryview)):
            blob = bytes(host)
            check(lib.tpx_load_remote_conn_info(h, blob, len(blob), byref(out)))
        else:
            if port is None:
                raise error(-4, "connect(host, port): port missing")
            check(lib.tpx_connect(h, host.encode(), port, byref(out)))
        return self._peer(out.value)

    def accept(self, timeout: Timeout = None) -> "Peer":
        """The next peer that connected to us, in arrival order. Raises
        tpx.TimedOut when none came within ``timeout`` seconds."""
        out = c_void_p()
        check(lib.tpx_accept(self._handle(), _ms(timeout), byref(out)))
        return self._peer(out.value)

    def _peer(self, ptr: int) -> "Peer":
        with self._lock:
            p = self._peers.get(ptr)
            if p is None:
                p = self._peers[ptr] = Peer(self, ptr)
            return p

    @property
    def peers(self) -> List["Peer"]:
        """The peers this endpoint handed out (connect, accept, a
        notification's sender) and that are not closed."""
        with self._lock:
            return list(self._peers.values())

    # -- memory -----------------------------------------------------------
    def register(self, obj: Any, access: Union[str, int] = "rw", device: Any = None) -> "Memory":
        """Register memory for transfers. ``obj``: a PyTorch tensor (CPU or
        CUDA), a numpy array, anything with ``__cuda_array_interface__`` or
        ``__dlpack__``, a bytes-like object, or ``(pointer, nbytes[, device])``
        (``device``: "cpu", "cuda", "cuda:N" or N). ``access`` says what REMOTE
        peers may do: "r" read it, "w" write into it (default "rw"). The
        Memory keeps ``obj`` alive."""
        self._reap()
        b = _buffers.resolve(obj, device)
        flags = _access(access)
        if b.readonly and flags & WRITE:
            raise error(-4, f"read-only {type(obj).__name__} registered with remote write access "
                            "(use access='r')")
        d = MemDesc(b.addr, b.nbytes, b.mem_type, b.device, flags)
        out = c_void_p()
        check(lib.tpx_mem_register(self._handle(), byref(d), byref(out)))
        m = Memory(self, _Registration(out.value, b.keep), b)
        return m

    @staticmethod
    def remote(descriptor: Descriptor) -> "RemoteMemory":
        """A peer's memory from its descriptor bytes (Memory.descriptor)."""
        return RemoteMemory(descriptor)

    def _park(self, reg: "_Registration") -> None:
        with self._lock:
            self._parked.append(reg)

    def _reap(self) -> None:
        """Retry the deregistrations that transfers in flight held up."""
        if not self._parked or self._h is None:
            return
        with self._lock:
            parked, self._parked = self._parked, []
        for reg in parked:
            if lib.tpx_mem_deregister(reg.h) != 0:
                self._park(reg)

    # -- notifications and progress -----------------------------------------
    def _nbuf(self) -> Any:
        try:
            return self._tls.b
        except AttributeError:
            n = Notif()
            b = self._tls.b = (n, byref(n), memoryview(n.msg).cast("B"))  # bytes(view[:len]): no C call
            return b

    def get_notifs(self) -> List["Notification"]:
        """Every notification delivered so far (oldest first), without waiting."""
        out, h = [], self._handle()
        n, ref, msg = self._nbuf()
        while check(_get_notif(h, ref)) == 1:
            out.append(self._notif(n, msg))
        return out

    def wait_notif(self, timeout: Timeout = None) -> "Notification":
        """The oldest notification, waiting up to ``timeout`` seconds for one
        (tpx.TimedOut if none came)."""
        h = self._h
        if h is None:
            raise _closed("endpoint")
        ms = -1 if timeout is None else _ms(timeout)
        if _fast:
            r = _fast.wait_notif(h, ms)
            if type(r) is tuple:
                peer = self._peers.get(r[1]) or self._peer(r[1]) if r[1] else None
                return Notification(r[0], r[2].decode(errors="replace"), peer)
            check(r)
            raise error(-8, f"no notification within {timeout} s")
        n, ref, msg = self._nbuf()
        rc = _wait_notif(h, ms, ref)
        if rc != 1:
            check(rc)
            raise error(-8, f"no notification within {timeout} s")
        return self._notif(n, msg)

    def _notif(self, n: Notif, msg: memoryview) -> "Notification":
        ptr = n.peer
        if not ptr:
            return Notification(bytes(msg[:n.len]), n.peer_name.decode(errors="replace"), None)
        peer = self._peers.get(ptr) or self._peer(ptr)
        name = peer._name  # a peer's name never changes: decoded once
        if name is None:
            name = peer._name = n.peer_name.decode(errors="replace")
        return Notification(bytes(msg[:n.len]), name, peer)

    def progress(self) -> None:
        """One progress pass; needed only with progress_thread=0."""
        check(lib.tpx_progress(self._handle()))

    def wait_any(self, transfers: Sequence[Optional["Transfer"]], timeout: Timeout = None) -> int:
        """See tpx.wait_any."""
        return wait_any(transfers, timeout)

    # -- lifetime ---------------------------------------------------------
    def close(self) -> None:
        """Close every peer (transfers in flight fail with tpx.Cancelled),
        stop the progress thread and release all registrations and transfer
        handles. Idempotent."""
        with self._lock:
            h, self._h = self._h, None
            self._life.h = None  # every object made from it is dead from now on
            self._parked = []
            self._peers = {}
        if h is None:
            return
        lib.tpx_endpoint_destroy(h)
        _live.discard(self)

    def __del__(self) -> None:
        if not _exiting:
            self.close()

    def __repr__(self) -> str:
        return f"<tpx.Endpoint {'closed' if self._h is None else repr(self.name) + ' port ' + str(self.port)}>"


class _Life:
    """Whether an endpoint is still open: its handle, or None."""
    __slots__ = ("h",)

    def __init__(self) -> None:
        self.h: Optional[int] = None


class _Registration:
    """A tpx_mem_t and the Python object whose memory it covers."""
    __slots__ = ("h", "keep")

    def __init__(self, h: int, keep: Any) -> None:
        self.h, self.keep = h, keep


class Memory(_Closing):
    """Registered local memory (Endpoint.register). ``descriptor`` is what a
    peer needs to reach it; ``obj`` the registered object (kept alive)."""

    def __init__(self, ep: Endpoint, reg: _Registration, b: "_buffers.Buffer") -> None:
        self._ep, self._reg, self._life = ep, reg, ep._life
        self._h: Optional[int] = reg.h
        self.ptr: int = b.addr
        self.nbytes: int = b.nbytes
        self.device: str = "cpu" if b.mem_type != MEM_CUDA else ("cuda" if b.device < 0 else f"cuda:{b.device}")
        self.obj: Any = b.keep
        self._desc: Optional[bytes] = None

    def _handle(self) -> int:
        if self._h is None or self._life.h is None:
            raise _closed("registration")
        return self._h

    @property
    def descriptor(self) -> bytes:
        """The public descriptor (opaque bytes, at most 128) for peers."""
        if self._desc is None:
            buf, n = ctypes.create_string_buffer(MD_MAX), c_size_t()
            check(lib.tpx_mem_get_public_data(self._handle(), buf, MD_MAX, byref(n)))
            self._desc = buf.raw[:n.value]
        return self._desc

    def __len__(self) -> int:
        return self.nbytes

    def deregister(self) -> None:
        """Deregister now; tpx.Again while transfers still use it."""
        if self._h is None or self._life.h is None:
            self._h = None
            return
        check(lib.tpx_mem_deregister(self._h))
        self._h = None

    close = deregister

    def __del__(self) -> None:
        if self._h is None or self._life.h is None or _exiting:
            return
        if lib.tpx_mem_deregister(self._h) != 0:
            self._ep._park(self._reg)  # in use by a transfer still in flight: later
        self._h = None

    def __repr__(self) -> str:
        return f"<tpx.Memory {self.nbytes} bytes {self.device} at {self.ptr:#x}>"


class RemoteMemory:
    """A peer's registered memory, from its descriptor bytes."""

    def __init__(self, descriptor: Descriptor) -> None:
        self._h: Optional[int] = None
        blob = bytes(descriptor)
        out = c_void_p()
        check(lib.tpx_load_remote_md(blob, len(blob), byref(out)))
        self._h = out.value
        self.descriptor = blob
        self.nbytes: int = lib.tpx_rmem_len(self._h)
        self.addr: int = lib.tpx_rmem_addr(self._h)
        self.access: int = lib.tpx_rmem_access(self._h)

    def __len__(self) -> int:
        return self.nbytes

    def __del__(self) -> None:
        if self._h is not None and not _exiting:
            lib.tpx_rmem_free(self._h)
            self._h = None

    def __repr__(self) -> str:
        return f"<tpx.RemoteMemory {self.nbytes} bytes at {self.addr:#x}>"


def _rmem(d: Descriptor) -> RemoteMemory:
    return d if isinstance(d, RemoteMemory) else RemoteMemory(d)


_IOV_DTYPE = None if _np is None else _np.dtype(
    [("local", "u8"), ("local_off", "u8"), ("remote", "u8"), ("remote_off", "u8"), ("len", "u8")])


class Peer(_Closing):
    """One remote endpoint. Transfers start here; all of them return a
    Transfer (posted, unless made by a ``prepare_*`` method)."""

    def __init__(self, ep: Endpoint, h: int) -> None:
        self._ep, self._h, self._life = ep, h, ep._life
        self._name: Optional[str] = None

    def _handle(self) -> int:
        if self._h is None or self._life.h is None:
            raise _closed("peer")
        return self._h

    @property
    def name(self) -> str:
        """The remote endpoint's name."""
        if self._name is None:
            self._name = lib.tpx_peer_name(self._handle()).decode(errors="replace")
        return self._name

    @property
    def gpu(self) -> int:
        return lib.tpx_peer_gpu(self._handle())

    @property
    def num_channels(self) -> int:
        return lib.tpx_peer_num_channels(self._handle())

    @property
    def status(self) -> int:
        """0 while usable, else the (negative) code of what broke it."""
        return lib.tpx_peer_status(self._h) if self._h is not None and self._life.h is not None else -15

    @property
    def ok(self) -> bool:
        return self.status == 0

    def close(self) -> None:
        """Close: unfinished transfers fail with tpx.Cancelled. Idempotent."""
        h, self._h = self._h, None
        if h is not None and self._life.h is not None:
            with self._ep._lock:
                self._ep._peers.pop(h, None)
            lib.tpx_peer_close(h)

    def __repr__(self) -> str:
        return f"<tpx.Peer {self.name!r} status {self.status}>" if self.status != -15 else "<tpx.Peer closed>"

    # -- one-sided ----------------------------------------------------------
    def _local(self, m: Any) -> Memory:
        if not isinstance(m, Memory):
            raise error(-4, f"local memory must be registered first (Endpoint.register), got {type(m).__name__}")
        if m._ep is not self._ep:
            raise error(-4, "local memory is registered with another endpoint")
        m._handle()
        return m

    def _rw(self, write: bool, local: Memory, remote: Descriptor, local_offset: int, remote_offset: int,
            size: Optional[int], notif: Optional[bytes], post: bool) -> "Transfer":
        local, rm = self._local(local), _rmem(remote)
        n = local.nbytes - local_offset if size is None else size
        iov = Iov(local._handle(), local_offset, rm._h, remote_offset, n)
        return self._prep_rw(write, ctypes.pointer(iov), 1, notif, [local, rm], post)

    def _prep_rw(self, write: bool, iovs: Any, n: int, notif: Optional[bytes], keep: list,
                 post: bool) -> "Transfer":
        fn = lib.tpx_xfer_prep_write if write else lib.tpx_xfer_prep_read
        out = c_void_p()
        nb = None if notif is None else bytes(notif)
        check(fn(self._handle(), iovs, n, nb, 0 if nb is None else len(nb), byref(out)))
        return self._ep_xfer(out.value, "write" if write else "read", keep, post)

    def _ep_xfer(self, h: int, op: str, keep: list, post: bool) -> "Transfer":
        t = Transfer(self, h, op, keep)
        if post:
            t.post()
        return t

    def _vec(self, write: bool, local: Any, remote: Any, local_offsets: Sequence[int],
             remote_offsets: Sequence[int], sizes: Union[int, Sequence[int]], notif: Optional[bytes],
             post: bool) -> "Transfer":
        n = len(local_offsets)
        if len(remote_offsets) != n or (not isinstance(sizes, int) and len(sizes) != n):
            raise error(-4, "local_offsets, remote_offsets and sizes differ in length")
        locs = [self._local(m) for m in (local if isinstance(local, (list, tuple)) else [local])]
        rems = [_rmem(r) for r in (remote if isinstance(remote, (list, tuple)) else [remote])]
        if len(locs) not in (1, n) or len(rems) not in (1, n):
            raise error(-4, "local / remote: one region, or one per entry")
        if _np is not None:
            a = _np.empty(n, dtype=_IOV_DTYPE)
            a["local"] = [m._handle() for m in locs] if len(locs) == n else locs[0]._handle()
            a["remote"] = [r._h for r in rems] if len(rems) == n else rems[0]._h
            a["local_off"], a["remote_off"], a["len"] = local_offsets, remote_offsets, sizes
            iovs: Any = a.ctypes.data_as(ctypes.POINTER(Iov))
            keep: list = locs + rems + [a]
        else:
            iovs = (Iov * max(n, 1))()
            for i in range(n):
                lm, rm = locs[i if len(locs) > 1 else 0], rems[i if len(rems) > 1 else 0]
                sz = sizes if isinstance(sizes, int) else sizes[i]
                iovs[i] = Iov(lm._handle(), local_offsets[i], rm._h, remote_offsets[i], sz)
            keep = locs + rems + [iovs]
        return self._prep_rw(write, iovs, n, notif, keep, post)

    def write(self, local: Memory, remote: Descriptor, *, local_offset: int = 0, remote_offset: int = 0,
              size: Optional[int] = None, notif: Optional[bytes] = None) -> "Transfer":
        """Write ``size`` bytes (default: the rest of ``local``) from ``local``
        into the peer's ``remote`` memory. ``notif`` (bytes) reaches the peer
        after the data. Completes when the peer acknowledged every byte."""
        return self._rw(True, local, remote, local_offset, remote_offset, size, notif, True)

    def read(self, local: Memory, remote: Descriptor, *, local_offset: int = 0, remote_offset: int = 0,
             size: Optional[int] = None, notif: Optional[bytes] = None) -> "Transfer":
        """Read from the peer's ``remote`` memory into ``local``."""
        return self._rw(False, local, remote, local_offset, remote_offset, size, notif, True)

    def writev(self, local: Any, remote: Any, local_offsets: Sequence[int], remote_offsets: Sequence[int],
               sizes: Union[int, Sequence[int]], notif: Optional[bytes] = None) -> "Transfer":
        """One write of many blocks (up to 32768): entry i moves ``sizes[i]``
        (or ``sizes`` for all) bytes from ``local_offsets[i]`` to
        ``remote_offsets[i]``. ``local`` / ``remote``: one region, or a list
        with one per entry. One notification after all of them landed."""
        return self._vec(True, local, remote, local_offsets, remote_offsets, sizes, notif, True)

    def readv(self, local: Any, remote: Any, local_offsets: Sequence[int], remote_offsets: Sequence[int],
              sizes: Union[int, Sequence[int]], notif: Optional[bytes] = None) -> "Transfer":
        """One read of many blocks; see writev."""
        return self._vec(False, local, remote, local_offsets, remote_offsets, sizes, notif, True)

    def prepare_write(self, local: Memory, remote: Descriptor, *, local_offset: int = 0,
                      remote_offset: int = 0, size: Optional[int] = None,
                      notif: Optional[bytes] = None) -> "Transfer":
        """Like write, not posted: call .post() (again after each completion)."""
        return self._rw(True, local, remote, local_offset, remote_offset, size, notif, False)

    def prepare_read(self, local: Memory, remote: Descriptor, *, local_offset: int = 0,
                     remote_offset: int = 0, size: Optional[int] = None,
                     notif: Optional[bytes] = None) -> "Transfer":
        return self._rw(False, local, remote, local_offset, remote_offset, size, notif, False)

    def prepare_writev(self, *args: Any, **kw: Any) -> "Transfer":
        return self._vec(True, *args, post=False, **kw)

    def prepare_readv(self, *args: Any, **kw: Any) -> "Transfer":
        return self._vec(False, *args, post=False, **kw)

    # -- two-sided ----------------------------------------------------------
    def _two(self, send: bool, local: Memory, tag: int, offset: int, size: Optional[int],
             post: bool) -> "Transfer":
        local = self._local(local)
        n = local.nbytes - offset if size is None else size
        fn = lib.tpx_xfer_prep_send if send else lib.tpx_xfer_prep_recv
        out = c_void_p()
        check(fn(self._handle(), local._handle(), offset, n, tag, byref(out)))
        return self._ep_xfer(out.value, "send" if send else "recv", [local], post)

    def send(self, local: Memory, *, tag: int = 0, offset: int = 0, size: Optional[int] = None) -> "Transfer":
        """Send to the peer's oldest unmatched recv with the same tag."""
        return self._two(True, local, tag, offset, size, True)

    def recv(self, local: Memory, *, tag: int = 0, offset: int = 0, size: Optional[int] = None) -> "Transfer":
        """Receive up to ``size`` bytes; Transfer.received says how many came."""
        return self._two(False, local, tag, offset, size, True)

    def prepare_send(self, local: Memory, *, tag: int = 0, offset: int = 0,
                     size: Optional[int] = None) -> "Transfer":
        return self._two(True, local, tag, offset, size, False)

    def prepare_recv(self, local: Memory, *, tag: int = 0, offset: int = 0,
                     size: Optional[int] = None) -> "Transfer":
        return self._two(False, local, tag, offset, size, False)

    def notify(self, msg: bytes = b"") -> None:
        """A notification (at most 4096 bytes), delivered after every write
        posted to this peer before it."""
        b = bytes(msg)
        check(lib.tpx_notify(self._handle(), b, len(b)))


class Transfer(_Closing):
    """A transfer handle: post(), done(), wait(); post again once complete."""

    def __init__(self, peer: Peer, h: int, op: str, keep: list) -> None:
        self.peer, self._h, self.op, self._keep, self._life = peer, h, op, keep, peer._life

    def _handle(self) -> int:
        if self._h is None or self._life.h is None:
            raise _closed("transfer")
        return self._h

    def post(self) -> "Transfer":
        """Start it (never blocks). tpx.InvalidUsage while still in flight."""
        h = self._h
        if h is None or self._life.h is None:
            raise _closed("transfer")
        rc = _xfer_post(h)
        if rc:
            check(rc)
        return self

    def run(self, timeout: Timeout = None) -> "Transfer":
        """post() then wait(timeout): one call for a synchronous transfer."""
        h = self._h
        if h is None or self._life.h is None:
            raise _closed("transfer")
        ms = -1 if timeout is None else _ms(timeout)
        rc = _fast.run(h, ms) if _fast else _xfer_run(h, ms)
        if rc:
            check(rc)
        return self

    def done(self) -> bool:
        """True when complete, False while in flight; raises its error if it
        failed."""
        rc = _xfer_test(self._handle())
        if rc == EINPROGRESS:
            return False
        if rc:
            check(rc)
        return True

    def wait(self, timeout: Timeout = None) -> "Transfer":
        """Wait up to ``timeout`` seconds (None: forever). Raises tpx.TimedOut
        when the wait times out (the transfer goes on), or its own error."""
        h = self._h
        if h is None or self._life.h is None:
            raise _closed("transfer")
        rc = _xfer_wait(h, -1 if timeout is None else _ms(timeout))
        if rc:
            check(rc)
        return self

    @property
    def received(self) -> int:
        """Bytes a completed recv received."""
        return lib.tpx_xfer_received(self._handle())

    def set_notif(self, notif: Optional[bytes]) -> None:
        """The notification of the next post of a write or read."""
        nb = None if notif is None else bytes(notif)
        check(lib.tpx_xfer_set_notif(self._handle(), nb, 0 if nb is None else len(nb)))

    def close(self) -> None:
        """Free the handle; one still in flight finishes in the background."""
        h, self._h = self._h, None
        if h is not None and self._life.h is not None:
            lib.tpx_xfer_free(h)

    def __del__(self) -> None:
        if not _exiting:
            self.close()

    def __repr__(self) -> str:
        return f"<tpx.Transfer {self.op}{' closed' if self._h is None else ''}>"


def wait_any(transfers: Sequence[Optional[Transfer]], timeout: Timeout = None) -> int:
    """Wait until any transfer of the set is no longer in flight; return its
    index (the lowest one settled). ``None`` entries are skipped; all others
    must belong to one endpoint. Raises tpx.TimedOut when none settled within
    ``timeout`` seconds (0: poll). The transfer's own result: its .done() or
    .wait(0) (which raise its error). A completed transfer stays settled until
    posted again: re-post it or replace it with None before the next call."""
    n = len(transfers)
    arr = (c_void_p * max(n, 1))()
    for i, t in enumerate(transfers):
        if t is not None:
            arr[i] = t._handle()
    idx = c_size_t(n)
    rc = lib.tpx_xfer_wait_any(arr, n, _ms(timeout), byref(idx))
    if idx.value >= n:
        check(rc if rc < 0 else -3)
    return idx.value


class Notification:
    """A notification: its bytes, the sender endpoint's name and, when this
    process holds it, the sender's Peer."""
    __slots__ = ("msg", "peer_name", "peer")

    def __init__(self, msg: bytes, peer_name: str, peer: Optional[Peer] = None) -> None:
        self.msg, self.peer_name, self.peer = msg, peer_name, peer

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Notification) and (self.msg, self.peer_name, self.peer) == (
            other.msg, other.peer_name, other.peer)

    def __repr__(self) -> str:
        return f"Notification(msg={self.msg!r}, peer_name={self.peer_name!r}, peer={self.peer!r})"


def version() -> str:
    """The loaded library's version (tpx_version())."""
    return lib.tpx_version().decode()

