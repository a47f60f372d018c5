"""Build hooks pyproject.toml cannot express: the version comes from the C
headers (include/tpx/version.h, the one place it is written); the installed
package records this checkout's build folder (tpx/_where.py), so it finds
libtpx.so there without TPX_LIBRARY (tpx/_lib.py says the order); and the
optional compiled fast path."""
import os
import re

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def version() -> str:
    with open(os.path.join(ROOT, "include", "tpx", "version.h")) as f:
        return re.search(r'#define TPX_VERSION_STRING "([^"]+)"', f.read()).group(1)


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        with open(os.path.join(self.build_lib, "tpx", "_where.py"), "w") as f:
            f.write('"""Written by setup.py: build folders of the checkout this was installed from."""\n')
            f.write(f"BUILD_DIRS = {build_dirs()!r}\n")


def build_dirs() -> list:
    """ROOT/build* folders holding libtpx.so, sanitizer builds left out (an
    ASan library cannot be loaded into a plain interpreter)."""
    out = []
    for d in sorted(os.listdir(ROOT)):
        b = os.path.join(ROOT, d)
        cache = os.path.join(b, "CMakeCache.txt")
        if not (d.startswith("build") and os.path.exists(os.path.join(b, "libtpx.so"))):
            continue
        with open(cache) if os.path.exists(cache) else open(os.devnull) as f:
            if re.search(r"^TPX_SANITIZE:\w+=(?!OFF$|$)", f.read(), re.M):
                continue
        out.append(b)
    return out


# The compiled fast path for two hot calls (tpx/_speedups.c): built when a
# compiler and Python's headers are there, skipped otherwise (optional=True),
# and the package then uses ctypes for them too.
speedups = Extension("tpx._speedups", ["tpx/_speedups.c"], include_dirs=[os.path.join(ROOT, "include")],
                     optional=True)

setup(version=version(), cmdclass={"build_py": BuildPy}, ext_modules=[speedups])
