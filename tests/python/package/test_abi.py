"""The ctypes mirrors of the C structs (tpx/_lib.py) match the headers:
sizes and field offsets from the C compiler, against ctypes'."""
import ctypes
import os
import shutil
import subprocess

import pytest

from tpx import _lib

INCLUDE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "include")
MIRRORS = {"tpx_endpoint_params_t": _lib.EndpointParams, "tpx_mem_desc_t": _lib.MemDesc,
           "tpx_iov_t": _lib.Iov, "tpx_notif_t": _lib.Notif}


@pytest.mark.skipif(not shutil.which("cc") or not os.path.isdir(INCLUDE), reason="needs cc and the headers")
def test_struct_layouts(tmp_path):
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "tpx/tpx.h"', "int main(void) {"]
    for cname, py in MIRRORS.items():
        lines.append(f'printf("{cname} size %zu\\n", sizeof({cname}));')
        for f, _ in py._fields_:
            lines.append(f'printf("{cname} {f} %zu\\n", offsetof({cname}, {f}));')
    lines.append("return 0; }")
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    subprocess.run(["cc", "-I", INCLUDE, str(src), "-o", str(exe)], check=True)
    got = dict(line.rsplit(" ", 1) for line in subprocess.run([str(exe)], capture_output=True, text=True,
                                                                   check=True).stdout.splitlines())
    for cname, py in MIRRORS.items():
        assert int(got[f"{cname} size"]) == ctypes.sizeof(py), cname
        for f, _ in py._fields_:
            assert int(got[f"{cname} {f}"]) == getattr(py, f).offset, f"{cname}.{f}"
    assert _lib.lib.tpx_config_size() > 0


def test_fast_path_as_configured():
    """TPX_PY_PURE=1: ctypes only; TPX_PY_EXPECT_FAST=1 (ctest, when it built
    the module): the compiled fast path is in use."""
    import tpx
    if os.environ.get("TPX_PY_PURE") == "1":
        assert tpx._core._fast is None
    elif os.environ.get("TPX_PY_EXPECT_FAST") == "1":
        assert tpx._core._fast is not None
