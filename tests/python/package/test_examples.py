"""The examples run as users run them (python3 examples/X.py), in the memory
kind under test, and say ok."""
import os
import subprocess
import sys

import pytest

from helpers import MEM

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "python", "examples")


@pytest.mark.parametrize("name", ["kv_cache_transfer.py", "weight_broadcast.py"])
def test_example(name):
    path = os.path.join(EXAMPLES, name)
    with open(path) as f:
        assert len(f.read().splitlines()) < 120  # examples stay short
    args = [sys.executable, path] + (["--cuda"] if MEM == "cuda" else [])
    if MEM == "cuda":
        pytest.importorskip("torch")
    p = subprocess.run(args, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.rstrip().endswith("ok"), p.stdout
