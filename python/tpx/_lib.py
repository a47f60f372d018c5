"""Loading libtpx.so and declaring its functions (ctypes).

Where the library is looked for, first match wins:

1. ``TPX_LIBRARY``: a path to ``libtpx.so`` (or to its folder);
2. the build tree this package came from (``<repo>/build``, or the folders
   recorded by ``pip install`` in ``_where.py``), for development;
3. ``TPX_PREFIX`` and the usual prefixes (``sys.prefix``, ``/usr/local``,
   ``/usr``, ``/opt/tpx``): ``lib``, ``lib64`` and Debian's multiarch folder;
4. the dynamic loader's own search (``ldconfig``, ``LD_LIBRARY_PATH``).
"""
from __future__ import annotations

import ctypes
import os
import sys
import sysconfig
from ctypes import (POINTER, Structure, c_char, c_char_p, c_int, c_size_t, c_ubyte, c_uint, c_uint32,
                    c_uint64, c_void_p)
from typing import List, Optional

NAME_MAX = 64
NOTIF_MAX = 4096
MD_MAX = 128
CONN_INFO_MAX = 1024
PORT_EPHEMERAL = -1
XFER_MAX_IOV = 32768
MEM_HOST, MEM_CUDA = 0, 1
ACCESS_READ, ACCESS_WRITE = 0x1, 0x2
EINPROGRESS = -7
ETIMEDOUT = -8


class EndpointParams(Structure):
    _fields_ = [("cfg", c_void_p), ("plugin", c_char_p), ("net", c_void_p), ("name", c_char_p),
                ("gpu", c_int), ("listen_host", c_char_p), ("port", c_int), ("no_listen", c_int)]


class MemDesc(Structure):
    _fields_ = [("addr", c_void_p), ("len", c_size_t), ("type", c_int), ("device", c_int),
                ("access", c_uint)]


class Iov(Structure):
    _fields_ = [("local", c_void_p), ("local_off", c_size_t), ("remote", c_void_p),
                ("remote_off", c_uint64), ("len", c_size_t)]


class Notif(Structure):
    _fields_ = [("peer", c_void_p), ("peer_name", c_char * NAME_MAX), ("len", c_uint32),
                ("msg", c_ubyte * NOTIF_MAX)]


H = c_void_p
PH = POINTER(c_void_p)
PS = POINTER(c_size_t)
_PROTOS = {
    "tpx_version": (c_char_p, []),
    "tpx_strerror": (c_char_p, [c_int]),
    "tpx_last_error": (c_char_p, []),
    "tpx_config_size": (c_size_t, []),
    "tpx_config_from_env": (c_int, [c_void_p]),
    "tpx_config_set": (c_int, [c_void_p, c_char_p, c_char_p]),
    "tpx_endpoint_params_init": (None, [POINTER(EndpointParams)]),
    "tpx_endpoint_create": (c_int, [POINTER(EndpointParams), PH]),
    "tpx_endpoint_destroy": (None, [H]),
    "tpx_endpoint_port": (c_int, [H]),
    "tpx_endpoint_name": (c_char_p, [H]),
    "tpx_endpoint_transport": (c_char_p, [H]),
    "tpx_progress": (c_int, [H]),
    "tpx_get_conn_info": (c_int, [H, c_void_p, c_size_t, PS]),
    "tpx_load_remote_conn_info": (c_int, [H, c_char_p, c_size_t, PH]),
    "tpx_connect": (c_int, [H, c_char_p, c_int, PH]),
    "tpx_accept": (c_int, [H, c_int, PH]),
    "tpx_peer_close": (None, [H]),
    "tpx_peer_status": (c_int, [H]),
    "tpx_peer_name": (c_char_p, [H]),
    "tpx_peer_gpu": (c_int, [H]),
    "tpx_peer_num_channels": (c_int, [H]),
    "tpx_notify": (c_int, [H, c_char_p, c_size_t]),
    "tpx_get_notif": (c_int, [H, POINTER(Notif)]),
    "tpx_wait_notif": (c_int, [H, c_int, POINTER(Notif)]),
    "tpx_mem_register": (c_int, [H, POINTER(MemDesc), PH]),
    "tpx_mem_deregister": (c_int, [H]),
    "tpx_mem_get_public_data": (c_int, [H, c_void_p, c_size_t, PS]),
    "tpx_load_remote_md": (c_int, [c_char_p, c_size_t, PH]),
    "tpx_rmem_free": (None, [H]),
    "tpx_rmem_addr": (c_uint64, [H]),
    "tpx_rmem_len": (c_size_t, [H]),
    "tpx_rmem_access": (c_uint, [H]),
    "tpx_xfer_prep_write": (c_int, [H, POINTER(Iov), c_size_t, c_char_p, c_size_t, PH]),
    "tpx_xfer_prep_read": (c_int, [H, POINTER(Iov), c_size_t, c_char_p, c_size_t, PH]),
    "tpx_xfer_prep_send": (c_int, [H, H, c_size_t, c_size_t, c_uint64, PH]),
    "tpx_xfer_prep_recv": (c_int, [H, H, c_size_t, c_size_t, c_uint64, PH]),
    "tpx_xfer_set_notif": (c_int, [H, c_char_p, c_size_t]),
    "tpx_xfer_post": (c_int, [H]),
    "tpx_xfer_test": (c_int, [H]),
    "tpx_xfer_wait": (c_int, [H, c_int]),
    "tpx_xfer_run": (c_int, [H, c_int]),
    "tpx_xfer_wait_any": (c_int, [PH, c_size_t, c_int, PS]),
    "tpx_xfer_received": (c_size_t, [H]),
    "tpx_xfer_free": (None, [H]),
}


def _multiarch() -> Optional[str]:
    return sysconfig.get_config_var("MULTIARCH")


def candidates() -> List[str]:
    """Every path tried, in order (for error messages and tests)."""
    out: List[str] = []
    env = os.environ.get("TPX_LIBRARY")
    if env:
        out.append(os.path.join(env, "libtpx.so") if os.path.isdir(env) else env)
    here = os.path.dirname(os.path.abspath(__file__))
    builds = [os.path.join(here, "..", "..", "build")]
    try:
        from . import _where  # written by pip install (python/backend/tpx_build.py)
        builds += list(_where.BUILD_DIRS)
    except ImportError:
        pass
    out += [os.path.join(b, "libtpx.so") for b in builds]
    prefixes = [os.environ.get("TPX_PREFIX", ""), sys.prefix, "/usr/local", "/usr", "/opt/tpx"]
    arch = _multiarch()
    for p in prefixes:
        if not p:
            continue
        for lib in ["lib", "lib64"] + ([os.path.join("lib", arch)] if arch else []):
            out.append(os.path.join(p, lib, "libtpx.so"))
    return out


def load() -> ctypes.CDLL:
    tried = []
    explicit = bool(os.environ.get("TPX_LIBRARY"))
    for i, path in enumerate(candidates()):
        if not os.path.exists(path):
            tried.append(path)
            if explicit and i == 0:
                raise OSError(f"TPX_LIBRARY={os.environ['TPX_LIBRARY']}: no such file")
            continue
        return _declare(ctypes.CDLL(os.path.realpath(path)))
    try:  # the loader's own search path (ldconfig cache, LD_LIBRARY_PATH)
        return _declare(ctypes.CDLL("libtpx.so"))
    except OSError:
        pass
    raise OSError("libtpx.so not found; set TPX_LIBRARY to its path. Tried:\n  " + "\n  ".join(tried))


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    for name, (res, args) in _PROTOS.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    return lib


def speedups():
    """The compiled fast path (tpx/_speedups.c) bound to this library, or None:
    not built, or TPX_PY_PURE=1 (ctypes only)."""
    if os.environ.get("TPX_PY_PURE") == "1":
        return None
    try:
        from . import _speedups as mod  # built by pip install
    except ImportError:
        try:
            import _tpx_speedups as mod  # built by CMake for the tests
        except ImportError:
            return None
    addr = ctypes.cast(lib.tpx_xfer_run, c_void_p).value, ctypes.cast(lib.tpx_wait_notif, c_void_p).value
    mod.bind(*addr)
    return mod


lib = load()
