"""What register() accepts, reduced to (address, bytes, memory type, device).

In order of preference: PyTorch tensors (CPU and CUDA), objects with
``__cuda_array_interface__`` (CuPy, Numba, ...), numpy arrays and anything
with ``__array_interface__``, objects with ``__dlpack__``, bytes-like objects
(the buffer protocol), and raw ``(pointer, nbytes[, device])`` tuples. Every
form must describe one contiguous range.
"""
from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass
from typing import Any, Optional, Tuple

from ._errors import InvalidArgument, error
from ._lib import MEM_CUDA, MEM_HOST


@dataclass
class Buffer:
    addr: int
    nbytes: int
    mem_type: int      # MEM_HOST or MEM_CUDA
    device: int        # CUDA ordinal, -1: the pointer's own; 0 for host
    readonly: bool
    keep: Any          # what keeps the memory alive (the object, a capsule)


def _bad(msg: str) -> InvalidArgument:
    return error(-4, msg)  # type: ignore[return-value]


def _device(spec: Any) -> Tuple[int, int]:
    """'cpu' / 'cuda' / 'cuda:N' / N (CUDA ordinal) / None -> (type, device)."""
    if spec is None or spec == "cpu":
        return MEM_HOST, 0
    if isinstance(spec, int):
        return MEM_CUDA, spec
    if isinstance(spec, str) and spec.startswith("cuda"):
        return MEM_CUDA, int(spec[5:]) if spec.startswith("cuda:") else -1
    raise _bad(f"device {spec!r}: expected 'cpu', 'cuda', 'cuda:N' or an int")


def _contiguous(shape, strides, itemsize: int) -> bool:
    if strides is None:
        return True
    expect = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def _prod(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _torch(obj: Any) -> Optional[Buffer]:
    mod = type(obj).__module__
    if not (mod.startswith("torch") and hasattr(obj, "data_ptr") and hasattr(obj, "is_contiguous")):
        return None
    if not obj.is_contiguous():
        raise _bad("tensor is not contiguous (call .contiguous())")
    dev = obj.device
    mt, d = (MEM_CUDA, dev.index if dev.index is not None else -1) if dev.type == "cuda" else (MEM_HOST, 0)
    if dev.type not in ("cpu", "cuda"):
        raise _bad(f"tensor on device {dev}: only cpu and cuda")
    return Buffer(obj.data_ptr(), obj.numel() * obj.element_size(), mt, d, False, obj)


def _array_iface(obj: Any, cuda: bool) -> Optional[Buffer]:
    iface = getattr(obj, "__cuda_array_interface__" if cuda else "__array_interface__", None)
    if iface is None:
        return None
    ptr, readonly = iface["data"]
    shape = tuple(iface["shape"])
    itemsize = int(re.match(r"\d+", iface["typestr"][2:]).group())  # "<f4", "|b1", "<M8[s]"
    if not _contiguous(shape, iface.get("strides"), itemsize):
        raise _bad("array is not C-contiguous")
    if iface.get("mask") is not None:
        raise _bad("masked arrays are not supported")
    return Buffer(ptr or 0, _prod(shape) * itemsize, MEM_CUDA if cuda else MEM_HOST, -1 if cuda else 0,
                  bool(readonly), obj)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype_code", ctypes.c_uint8), ("dtype_bits", ctypes.c_uint8), ("dtype_lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_kDLCPU, _kDLCUDA, _kDLCUDAHost = 1, 2, 3


def _dlpack(obj: Any) -> Optional[Buffer]:
    if not hasattr(obj, "__dlpack__"):
        return None
    # The capsule is kept unconsumed: its destructor tells the producer when
    # we let go (DLPack's rule), so holding it keeps the memory alive.
    capsule = obj.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    t = _DLTensor.from_address(get(capsule, b"dltensor"))  # DLManagedTensor starts with its DLTensor
    shape = [t.shape[i] for i in range(t.ndim)]
    itemsize = (t.dtype_bits * t.dtype_lanes + 7) // 8
    strides = [t.strides[i] * itemsize for i in range(t.ndim)] if t.strides else None
    if not _contiguous(shape, strides, itemsize):
        raise _bad("DLPack tensor is not contiguous")
    if t.device.device_type == _kDLCUDA:
        mt, dev = MEM_CUDA, t.device.device_id
    elif t.device.device_type in (_kDLCPU, _kDLCUDAHost):
        mt, dev = MEM_HOST, 0
    else:
        raise _bad(f"DLPack device type {t.device.device_type}: only CPU and CUDA")
    return Buffer((t.data or 0) + t.byte_offset, _prod(shape) * itemsize, mt, dev, False, (obj, capsule))


def _bytes_like(obj: Any) -> Optional[Buffer]:
    try:
        mv = memoryview(obj)
    except TypeError:
        return None
    if not mv.c_contiguous:
        raise _bad("buffer is not contiguous")
    n = mv.nbytes
    if not mv.readonly:
        # The ctypes view holds a buffer export for as long as the Memory
        # lives, so a bytearray cannot be resized (moved) under a registration.
        view = (ctypes.c_char * n).from_buffer(mv.cast("B")) if n else None
        return Buffer(ctypes.addressof(view) if n else 0, n, MEM_HOST, 0, False, (obj, mv, view))
    if isinstance(obj, bytes):
        return Buffer(ctypes.cast(ctypes.c_char_p(obj), ctypes.c_void_p).value or 0, n, MEM_HOST, 0, True, obj)
    raise _bad(f"read-only {type(obj).__name__}: register bytes, a writable buffer or a numpy array")


def resolve(obj: Any, device: Any = None) -> Buffer:
    """The memory an object describes; ``device`` applies to raw tuples."""
    if isinstance(obj, tuple):
        if len(obj) not in (2, 3) or not all(isinstance(v, int) for v in obj[:2]):
            raise _bad("raw memory is (pointer, nbytes) or (pointer, nbytes, device)")
        mt, dev = _device(obj[2] if len(obj) == 3 else device)
        return Buffer(obj[0], obj[1], mt, dev, False, None)
    for probe in (_torch, lambda o: _array_iface(o, True), lambda o: _array_iface(o, False), _dlpack,
                  _bytes_like):
        b = probe(obj)
        if b is not None:
            return b
    raise _bad(f"cannot register a {type(obj).__name__}: not a tensor, array, DLPack object, buffer "
               "or (pointer, nbytes[, device])")
