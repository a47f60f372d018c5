"""What register() accepts: numpy, bytes-like, DLPack, the CUDA array
interface, torch tensors (when torch is there) and raw pointers."""
import ctypes

import numpy as np
import pytest

import tpx
from helpers import MEM

try:
    import torch
except ImportError:
    torch = None


def test_host_objects(ep):
    arr = np.arange(1000, dtype=np.float32)
    m = ep.register(arr)
    assert (m.ptr, m.nbytes, m.device) == (arr.ctypes.data, 4000, "cpu")
    ba = bytearray(b"abc" * 100)
    m = ep.register(ba)
    assert m.nbytes == 300 and ctypes.string_at(m.ptr, 3) == b"abc"
    with pytest.raises(BufferError):  # registered memory cannot move
        ba.extend(b"x" * 4096)
    mv = memoryview(bytearray(64))
    assert ep.register(mv).nbytes == 64
    b = b"read only"
    m = ep.register(b, access="r")
    assert ctypes.string_at(m.ptr, m.nbytes) == b
    buf = ctypes.create_string_buffer(128)
    assert ep.register((ctypes.addressof(buf), 128)).nbytes == 128
    assert ep.register(np.zeros((4, 4), np.int64)[1:3]).nbytes == 64  # contiguous slice
    assert len(ep.register(np.zeros(10, np.uint8))) == 10


def test_dlpack(ep):
    class OnlyDLPack:  # hides numpy's other interfaces
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None):
            return self.a.__dlpack__()

    arr = np.arange(256, dtype=np.uint16)
    m = ep.register(OnlyDLPack(arr))
    assert (m.ptr, m.nbytes, m.device) == (arr.ctypes.data, 512, "cpu")


def test_cuda_array_interface_object(ep):
    class FakeDev:
        __cuda_array_interface__ = {"data": (0x7F0000000000, False), "shape": (1024,), "typestr": "<f4",
                                    "version": 3, "strides": None}
    if MEM != "cuda":
        with pytest.raises(tpx.Error) as e:  # no GPU here, or no such pointer
            ep.register(FakeDev())
        assert e.value.code in (-10, -1, -4)


def test_descriptor_is_bytes(ep):
    m = ep.register(np.zeros(4096, np.uint8))
    d = m.descriptor
    assert isinstance(d, bytes) and 0 < len(d) <= 128
    r = tpx.RemoteMemory(d)
    assert (r.nbytes, r.addr) == (4096, m.ptr)
    assert r.access == tpx.READ | tpx.WRITE


@pytest.mark.skipif(torch is None, reason="torch is not installed")
def test_torch_cpu(ep):
    t = torch.arange(100, dtype=torch.float64)
    m = ep.register(t)
    assert (m.ptr, m.nbytes, m.device) == (t.data_ptr(), 800, "cpu")
    with pytest.raises(tpx.InvalidArgument):
        ep.register(torch.zeros(8, 8).t())


@pytest.mark.skipif(torch is None or MEM != "cuda", reason="needs torch and TPX_PY_MEM=cuda")
def test_torch_cuda(ep):
    t = torch.zeros(1 << 20, dtype=torch.uint8, device="cuda")
    m = ep.register(t)
    assert m.device.startswith("cuda") and m.nbytes == 1 << 20


def test_version():
    assert tpx.__version__ == tpx.version()
    assert tpx.__version__.count(".") == 2
