"""The package's own PEP 517 build backend: `pip install ./python` needs no
setuptools, no `wheel` package and no network, so it works the same in a
fresh venv (which has neither `wheel` nor, in build isolation, setuptools),
system-wide and offline; `pip wheel ./python` gives a wheel to copy
elsewhere.

What it puts in the wheel: the tpx package; tpx/_where.py, the build folders
of this checkout holding a plain (not sanitizer) libtpx.so, so the installed
package finds the library there without TPX_LIBRARY (tpx/_lib.py says the
order); and the optional compiled fast path tpx/_speedups*.so, built with
the interpreter's C compiler when Python.h is there and skipped (with a
note) otherwise, the package then using ctypes for those calls too. The
version comes from include/tpx/version.h, the one place it is written (an
sdist carries it in PKG-INFO). Metadata: pyproject.toml's [project] table.
"""
from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
ROOT = os.path.dirname(HERE)  # the checkout
NAME = "tpx"


def _say(msg: str) -> None:
    print(f"tpx build: {msg}", file=sys.stderr)


def _project() -> dict:
    path = os.path.join(HERE, "pyproject.toml")
    try:
        import tomllib  # Python 3.11
    except ImportError:  # older Pythons: tomli, the same parser
        try:
            import tomli as tomllib  # type: ignore
        except ImportError:
            raise RuntimeError("building tpx on Python < 3.11 needs the tomli package "
                               "(pip install tomli; Debian: python3-tomli)")
    with open(path, "rb") as f:
        return tomllib.load(f)["project"]


def _version() -> str:
    h = os.path.join(ROOT, "include", "tpx", "version.h")
    if os.path.exists(h):
        with open(h) as f:
            return re.search(r'#define TPX_VERSION_STRING "([^"]+)"', f.read()).group(1)
    pkg = os.path.join(HERE, "PKG-INFO")  # an unpacked sdist
    with open(pkg) as f:
        return re.search(r"^Version: (.+)$", f.read(), re.M).group(1).strip()


def _metadata() -> str:
    p = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {_version()}",
             f"Summary: {p.get('description', '')}"]
    if p.get("requires-python"):
        lines.append(f"Requires-Python: {p['requires-python']}")
    for c in p.get("classifiers", []):
        lines.append(f"Classifier: {c}")
    for d in p.get("dependencies", []):
        lines.append(f"Requires-Dist: {d}")
    for extra, deps in p.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        for d in deps:
            lines.append(f'Requires-Dist: {d}; extra == "{extra}"')
    body = ""
    readme = p.get("readme")
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(HERE, readme), encoding="utf-8") as f:
            body = "\n" + f.read()
    return "\n".join(lines) + "\n" + body


def _build_dirs() -> list:
    """ROOT/build* folders holding libtpx.so, sanitizer builds left out (an
    ASan library cannot be loaded into a plain interpreter)."""
    out = []
    if not os.path.isdir(ROOT):
        return out
    for d in sorted(os.listdir(ROOT)):
        b = os.path.join(ROOT, d)
        if not (d.startswith("build") and os.path.exists(os.path.join(b, "libtpx.so"))):
            continue
        cache = os.path.join(b, "CMakeCache.txt")
        if os.path.exists(cache):
            with open(cache) as f:
                if re.search(r"^TPX_SANITIZE:\w+=(?!OFF$|$)", f.read(), re.M):
                    continue
        out.append(os.path.realpath(b))
    return out


def _speedups(tmp: str):
    """Compiles tpx/_speedups.c; returns (path, name in the wheel) or None."""
    inc = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(inc, "Python.h")):
        _say(f"no {inc}/Python.h: the compiled fast path is left out (ctypes only; python3-dev adds it)")
        return None
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    out = os.path.join(tmp, "_speedups" + suffix)
    cmd = cc + ["-shared", "-fPIC", "-O2", "-I", inc, "-I", os.path.join(ROOT, "include"),
                os.path.join(HERE, "tpx", "_speedups.c"), "-o", out]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as e:
        _say(f"no C compiler ({e}): the compiled fast path is left out (ctypes only)")
        return None
    if r.returncode != 0:
        _say(f"the compiled fast path did not build, left out (ctypes only):\n{r.stdout}")
        return None
    return out, f"{NAME}/_speedups{suffix}"


def _tag(binary: bool) -> str:
    if not binary:
        return "py3-none-any"
    impl = sys.implementation.name
    pre = {"cpython": "cp", "pypy": "pp"}.get(impl, impl)
    py = f"{pre}{sys.version_info[0]}{sys.version_info[1]}"
    abi = py + getattr(sys, "abiflags", "") if impl == "cpython" else "none"
    plat = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return f"{py}-{abi}-{plat}"


class _Wheel:
    def __init__(self, path: str):
        self.z = zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED)
        self.record = []

    def add(self, arcname: str, data: bytes, mode: int = 0o644) -> None:
        info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = (0o100000 | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.z.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.record.append(f"{arcname},sha256={digest},{len(data)}")

    def close(self, dist_info: str) -> None:
        self.record.append(f"{dist_info}/RECORD,,")
        self.z.writestr(zipfile.ZipInfo(f"{dist_info}/RECORD", date_time=(2020, 1, 1, 0, 0, 0)),
                        "\n".join(self.record) + "\n")
        self.z.close()


def _dist_info() -> str:
    return f"{NAME}-{_version()}.dist-info"


def _wheel(wheel_directory: str, editable: bool) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        ext = None if editable else _speedups(tmp)
        tag = _tag(ext is not None)
        name = f"{NAME}-{_version()}-{tag}.whl"
        w = _Wheel(os.path.join(wheel_directory, name))
        if editable:
            # the source folder on sys.path: edits show at once
            w.add(f"{NAME}.pth", (HERE + "\n").encode())
        else:
            pkg = os.path.join(HERE, NAME)
            for f in sorted(os.listdir(pkg)):
                if f.endswith(".py") and f != "_where.py" or f == "py.typed":
                    with open(os.path.join(pkg, f), "rb") as fh:
                        w.add(f"{NAME}/{f}", fh.read())
            where = ('"""Written by the build backend (python/backend/tpx_build.py): build folders of '
                     'the checkout this was installed from."""\n'
                     f"BUILD_DIRS = {_build_dirs()!r}\n")
            w.add(f"{NAME}/_where.py", where.encode())
            if ext:
                with open(ext[0], "rb") as fh:
                    w.add(ext[1], fh.read(), 0o755)
        di = _dist_info()
        w.add(f"{di}/METADATA", _metadata().encode("utf-8"))
        w.add(f"{di}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: tpx_build\nRoot-Is-Purelib: "
                              f"{'false' if ext else 'true'}\nTag: {tag}\n").encode())
        w.close(di)
        return name


# PEP 517 / PEP 660 hooks
def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, editable=False)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, editable=True)


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{_version()}"
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        def add_bytes(arc: str, data: bytes) -> None:
            ti = tarfile.TarInfo(f"{base}/{arc}")
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 1577836800
            t.addfile(ti, io.BytesIO(data))
        for rel in ["pyproject.toml", "README.md", "backend/tpx_build.py"] + \
                [f"{NAME}/{f}" for f in sorted(os.listdir(os.path.join(HERE, NAME)))
                 if f.endswith((".py", ".c")) and f != "_where.py" or f == "py.typed"]:
            with open(os.path.join(HERE, rel), "rb") as fh:
                add_bytes(rel, fh.read())
        add_bytes("PKG-INFO", _metadata().encode("utf-8"))
    return name
