"""tpx: point-to-point transfers of GPU and host memory over TCP (tcpx-p2p).

    import tpx, numpy as np
    with tpx.Endpoint(port=None) as ep:
        buf = np.zeros(1 << 20, np.uint8)
        mem = ep.register(buf)              # mem.descriptor -> the peer
        peer = ep.connect(host, port)       # or ep.accept(), ep.connect(conn_info)
        peer.write(mem, remote_descriptor, notif=b"done").wait()

A thin layer over libtpx.so (ctypes); docs/PYTHON.md maps UCCL's and
Mooncake's calls onto it.
"""
from ._core import (READ, WRITE, Endpoint, Memory, Notification, Peer, RemoteMemory, Transfer, version,
                    wait_any)
from ._errors import (AccessDenied, AddressInUse, Again, AuthError, Cancelled, Closed, CudaError, Error, InProgress,
                      IntegrityError,
                      InternalError, InvalidArgument, InvalidUsage, NoSymbol, NotFound, OutOfMemory,
                      ProtocolError, RemoteError, SystemError_, TimedOut, Truncated, Unsupported,
                      VersionMismatch)
from ._lib import NOTIF_MAX, XFER_MAX_IOV

__version__ = version()

__all__ = [
    "Endpoint", "Peer", "Memory", "RemoteMemory", "Transfer", "Notification", "wait_any", "version",
    "READ", "WRITE", "NOTIF_MAX", "XFER_MAX_IOV",
    "Error", "CudaError", "SystemError_", "InternalError", "InvalidArgument", "InvalidUsage", "RemoteError",
    "InProgress", "TimedOut", "OutOfMemory", "Unsupported", "NotFound", "NoSymbol", "VersionMismatch",
    "Truncated", "Closed", "ProtocolError", "AccessDenied", "AddressInUse", "Again", "Cancelled",
    "AuthError", "IntegrityError",
]
