"""tpx.Error and its subclasses: one per C error code (tpx/error.h)."""
from __future__ import annotations

from typing import Dict, Type

from ._lib import lib


class Error(Exception):
    """A failed tpx call. ``code`` is the negative C code (``tpx.TPX_E*``),
    ``name`` its short description (tpx_strerror) and ``detail`` the
    library's message for this failure (tpx_last_error): which peer, channel,
    chunk or range."""

    code: int = -3

    def __init__(self, code: int, detail: str = "") -> None:
        self.code = code
        self.name = lib.tpx_strerror(code).decode()
        self.detail = detail
        # The library's detail names the code at its end already: then it is
        # the whole message (the code named once).
        named = detail.endswith(f"({self.name})")
        super().__init__(detail if named else f"{self.name}: {detail}" if detail else self.name)


class CudaError(Error): pass                            # noqa: E701  -1
class SystemError_(Error): pass                         # noqa: E701  -2
class InternalError(Error): pass                        # noqa: E701  -3
class InvalidArgument(Error, ValueError): pass          # noqa: E701  -4
class InvalidUsage(Error): pass                         # noqa: E701  -5
class RemoteError(Error): pass                          # noqa: E701  -6
class InProgress(Error): pass                           # noqa: E701  -7
class TimedOut(Error, TimeoutError): pass               # noqa: E701  -8
class OutOfMemory(Error, MemoryError): pass             # noqa: E701  -9
class Unsupported(Error): pass                          # noqa: E701 -10
class NotFound(Error): pass                             # noqa: E701 -11
class NoSymbol(Error): pass                             # noqa: E701 -12
class VersionMismatch(Error): pass                      # noqa: E701 -13
class Truncated(Error): pass                            # noqa: E701 -14
class Closed(Error, ConnectionError): pass              # noqa: E701 -15
class ProtocolError(Error): pass                        # noqa: E701 -16
class AccessDenied(Error, PermissionError): pass        # noqa: E701 -17
class AddressInUse(Error): pass                         # noqa: E701 -18
class Again(Error): pass                                # noqa: E701 -19
class Cancelled(Error): pass                            # noqa: E701 -20
class AuthError(Error, PermissionError): pass           # noqa: E701 -21
class IntegrityError(Error): pass                       # noqa: E701 -22

_BY_CODE: Dict[int, Type[Error]] = {
    -1: CudaError, -2: SystemError_, -3: InternalError, -4: InvalidArgument, -5: InvalidUsage,
    -6: RemoteError, -7: InProgress, -8: TimedOut, -9: OutOfMemory, -10: Unsupported,
    -11: NotFound, -12: NoSymbol, -13: VersionMismatch, -14: Truncated, -15: Closed,
    -16: ProtocolError, -17: AccessDenied, -18: AddressInUse, -19: Again, -20: Cancelled,
    -21: AuthError, -22: IntegrityError,
}


def error(code: int, detail: str = "") -> Error:
    """The exception for ``code`` with the given detail (no library call)."""
    return _BY_CODE.get(code, Error)(code, detail)


def check(rc: int) -> int:
    """Raise the matching Error for a negative rc, with tpx_last_error()
    (read in the calling thread, right after the failing call)."""
    if rc < 0:
        raise error(rc, lib.tpx_last_error().decode(errors="replace"))
    return rc
