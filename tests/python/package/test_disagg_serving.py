"""examples/disagg_serving.py on a GPU: a Llama-shaped model's KV cache moves
from a prefill process into scattered blocks of a decode process's paged
pool (tpx, and NIXL/TPX when NIXL is there), and decoding continues token
for token: greedy tokens equal prefill's own continuation, first-step
logits bitwise equal, for prompt lengths on and off the block size. A peer
killed mid-transfer gives an error on the other side within
TPX_TIMEOUT_MS, and no token.

Needs torch with CUDA and transformers (tests/gpu/run.sh, step `disagg`);
skips with the reason elsewhere. NIXL cases need NIXL's Python package and
NIXL_PLUGIN_DIR holding libplugin_TPX.so (docs/NIXL.md)."""
import importlib.util
import os
import re
import subprocess
import sys
import time

import pytest

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "python", "examples", "disagg_serving.py")
TIMEOUT_MS = 5000


def _gpu_reason():
    for mod in ("torch", "transformers"):
        if importlib.util.find_spec(mod) is None:
            return f"{mod} is not installed"
    import torch
    if not torch.cuda.is_available():
        return "no CUDA GPU"
    return ""


def _nixl_reason():
    if not os.environ.get("NIXL_PLUGIN_DIR"):
        return "NIXL_PLUGIN_DIR is not set"
    if not any(importlib.util.find_spec(m) for m in ("nixl", "nixl_cu13", "nixl_cu12")):
        return "NIXL's Python package is not importable"
    return ""


pytestmark = pytest.mark.skipif(bool(_gpu_reason()), reason=_gpu_reason() or "")


def transport(name):
    reason = _gpu_reason() or (_nixl_reason() if name == "nixl" else "")
    return pytest.param(name, marks=pytest.mark.skipif(bool(reason), reason=reason), id=name)


def example(*args, timeout=300):
    env = dict(os.environ, TPX_TIMEOUT_MS=str(TIMEOUT_MS), TPX_SOCKET_IFNAME="lo", PYTHONUNBUFFERED="1")
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, EXAMPLE, *args], capture_output=True, text=True, timeout=timeout, env=env)
    return p, time.monotonic() - t0


@pytest.mark.parametrize("layout", ["blocks", "layers"])
@pytest.mark.parametrize("name", [transport("tpx"), transport("nixl")])
def test_decode_continues_token_for_token(name, layout):
    # 100 and 1000 are no multiple of the 16-token block; 256 is.
    p, _ = example("--transport", name, "--layout", layout, "--prompt-lens", "100,256,1000",
                   "--new-tokens", "16", "--layers", "4")
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    lines = [s for s in p.stdout.splitlines() if s.startswith("req")]
    assert len(lines) == 3, out
    for s in lines:
        assert "cache bytes equal, tokens 16/16 equal, first-step logits bitwise equal" in s, s
    assert p.stdout.rstrip().endswith("ok"), out


# Llama-8B's cache shape on a small model: a 4096-token prompt is 512 MiB of
# KV, tens of milliseconds on the wire, so the kill lands mid-transfer.
BIG = ["--prompt-lens", "4096", "--layers", "32", "--hidden", "1024", "--heads", "8", "--kv-heads", "8",
       "--head-dim", "128", "--ffn", "1024", "--new-tokens", "2"]


@pytest.mark.parametrize("victim", ["decode", "prefill"])
@pytest.mark.parametrize("name", [transport("tpx"), transport("nixl")])
def test_peer_killed_mid_transfer(name, victim):
    p, wall = example("--transport", name, "--kill", victim, *BIG, "--wait", "120")
    out = p.stdout + p.stderr
    assert p.returncode == 1 and p.stdout.rstrip().endswith("FAILED"), out
    survivor = "prefill" if victim == "decode" else "decode"
    m = re.search(rf"^{survivor} failed: .*\(after (\d+) ms\)", p.stdout, re.M)
    assert m, out
    assert int(m.group(1)) <= TIMEOUT_MS + 1000, m.group(0)
    assert not re.search(r"^req", p.stdout, re.M), out  # nothing was decoded
