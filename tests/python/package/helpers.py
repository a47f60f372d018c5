"""Test helpers: memory of the kind under test (TPX_PY_MEM=host | cuda) and a
second process driven over a pipe (the "remote" side of every test).

Host memory is numpy. CUDA memory is a torch tensor when torch is there,
else cudaMalloc'ed memory through ctypes (no dependency), registered as
(pointer, nbytes, "cuda:N")."""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import hashlib
import multiprocessing as mp
import os
import traceback
from typing import Any, Dict, Optional, Tuple

import numpy as np

import tpx

MEM = os.environ.get("TPX_PY_MEM", "host")
GPU = int(os.environ.get("TPX_PY_GPU", "0"))
TIMEOUT = 30.0


def pattern(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


class _Cudart:
    def __init__(self) -> None:
        names = [ctypes.util.find_library("cudart"), "libcudart.so"]
        names += sorted(glob.glob("/usr/local/cuda/lib*/libcudart.so*"))
        for name in filter(None, names):
            try:
                self.lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        else:
            raise OSError("libcudart not found (tried %s)" % names)
        assert self.lib.cudaSetDevice(GPU) == 0

    def malloc(self, n: int) -> int:
        p = ctypes.c_void_p()
        assert self.lib.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(max(n, 1))) == 0
        return p.value

    def copy(self, dst: int, src: int, n: int, kind: int) -> None:
        assert self.lib.cudaMemcpy(ctypes.c_void_p(dst), ctypes.c_void_p(src), ctypes.c_size_t(n), kind) == 0


_cudart: Optional[_Cudart] = None


class DevBuf:
    """Device memory without torch: (pointer, nbytes, device) plus copies."""

    def __init__(self, n: int) -> None:
        global _cudart
        _cudart = _cudart or _Cudart()
        self.n, self.ptr = n, _cudart.malloc(n)

    def regobj(self) -> Tuple[int, int, str]:
        return (self.ptr, self.n, f"cuda:{GPU}")

    def __del__(self) -> None:
        if _cudart is not None:
            _cudart.lib.cudaFree(ctypes.c_void_p(self.ptr))


def alloc(n: int) -> Any:
    """Zeroed memory of the kind under test."""
    if MEM == "host":
        return np.zeros(n, np.uint8)
    try:
        import torch
        return torch.zeros(n, dtype=torch.uint8, device=f"cuda:{GPU}")
    except ImportError:
        b = DevBuf(n)
        put(b, np.zeros(n, np.uint8))
        return b


def regobj(buf: Any) -> Any:
    return buf.regobj() if isinstance(buf, DevBuf) else buf


def put(buf: Any, data: np.ndarray, off: int = 0) -> None:
    if isinstance(buf, np.ndarray):
        buf[off:off + len(data)] = data
    elif isinstance(buf, DevBuf):
        _cudart.copy(buf.ptr + off, data.ctypes.data, len(data), 1)  # cudaMemcpyHostToDevice
    else:
        import torch
        buf[off:off + len(data)] = torch.from_numpy(np.ascontiguousarray(data)).to(buf.device)


def get(buf: Any, off: int = 0, n: Optional[int] = None) -> np.ndarray:
    n = (len(buf) if not isinstance(buf, DevBuf) else buf.n) - off if n is None else n
    if isinstance(buf, np.ndarray):
        return buf[off:off + n].copy()
    if isinstance(buf, DevBuf):
        out = np.empty(n, np.uint8)
        _cudart.copy(out.ctypes.data, buf.ptr + off, n, 2)  # cudaMemcpyDeviceToHost
        return out
    return buf[off:off + n].cpu().numpy()


# ---- the remote process ------------------------------------------------------
def _child(conn: Any, cfg: Dict[str, Any]) -> None:
    ep = tpx.Endpoint(GPU if MEM == "cuda" else 0, port=None, listen_host="127.0.0.1", name="child", **cfg)
    bufs: Dict[str, Any] = {}
    mems: Dict[str, tpx.Memory] = {}
    peer: Optional[tpx.Peer] = None
    conn.send((ep.port, ep.conn_info))
    while True:
        cmd, *args = conn.recv()
        try:
            if cmd == "exit":
                conn.send(("ok", None))
                break
            elif cmd == "accept":
                peer = ep.accept(TIMEOUT)
                r: Any = peer.name
            elif cmd == "connect":
                peer = ep.connect(*args)
                r = peer.name
            elif cmd == "alloc":  # name, nbytes, access -> descriptor
                bufs[args[0]] = alloc(args[1])
                mems[args[0]] = ep.register(regobj(bufs[args[0]]), args[2])
                r = mems[args[0]].descriptor
            elif cmd == "fill":  # name, seed, off, n
                put(bufs[args[0]], pattern(args[3], args[1]), args[2])
                r = None
            elif cmd == "digest":  # name, off, n
                r = digest(get(bufs[args[0]], args[1], args[2]))
            elif cmd == "gather":  # name, offsets, size -> digest of the blocks in order
                whole = get(bufs[args[0]])
                r = digest(np.concatenate([whole[o:o + args[2]] for o in args[1]]))
            elif cmd == "write":  # local, remote desc, loff, roff, size, notif
                peer.write(mems[args[0]], args[1], local_offset=args[2], remote_offset=args[3], size=args[4],
                           notif=args[5]).wait(TIMEOUT)
                r = None
            elif cmd == "send":  # local, tag, off, size
                peer.send(mems[args[0]], tag=args[1], offset=args[2], size=args[3]).wait(TIMEOUT)
                r = None
            elif cmd == "recv":  # local, tag, off, size -> received
                r = peer.recv(mems[args[0]], tag=args[1], offset=args[2], size=args[3]).wait(TIMEOUT).received
            elif cmd == "notify":
                peer.notify(args[0])
                r = None
            elif cmd == "wait_notif":
                n = ep.wait_notif(args[0])
                r = (n.msg, n.peer_name)
            elif cmd == "close_peer":
                peer.close()
                r = None
            elif cmd == "peer_status":
                r = peer.status
            else:
                raise ValueError(cmd)
            conn.send(("ok", r))
        except tpx.Error as e:
            conn.send(("tpx", (e.code, e.detail)))
        except Exception:  # a test bug: show it
            conn.send(("py", traceback.format_exc()))
    ep.close()


class Remote:
    """The other process. call("write", ...) runs a command there and returns
    its result, re-raising a tpx.Error with the same code."""

    def __init__(self, **cfg: Any) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_child, args=(child, cfg), daemon=True)
        self.proc.start()
        child.close()
        if not self.conn.poll(TIMEOUT):
            raise RuntimeError("remote process did not start")
        self.port, self.conn_info = self.conn.recv()

    def call(self, cmd: str, *args: Any, timeout: float = TIMEOUT) -> Any:
        self.conn.send((cmd, *args))
        if not self.conn.poll(timeout):
            raise RuntimeError(f"remote {cmd}: no answer in {timeout} s")
        kind, r = self.conn.recv()
        if kind == "tpx":
            raise tpx._errors.error(r[0], r[1])
        if kind == "py":
            raise RuntimeError("remote: " + r)
        return r

    def close(self) -> None:
        try:
            if self.proc.is_alive():
                self.call("exit", timeout=10)
        except (RuntimeError, OSError, EOFError):
            pass
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
