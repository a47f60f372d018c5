#!/usr/bin/env python3
"""Pinned host <-> GPU copy bandwidth with PyTorch (bench/compare.sh mem):
256 MiB copies on one stream for SECONDS, 1e9 B/s.

  gpu_copy.py d2h|h2d SECONDS
"""
import sys
import time

import torch


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[1] not in ("d2h", "h2d"):
        print(__doc__, file=sys.stderr)
        return 2
    kind, secs = sys.argv[1], float(sys.argv[2])
    n = 256 << 20
    g = torch.ones(n, dtype=torch.uint8, device="cuda")
    h = torch.zeros(n, dtype=torch.uint8, pin_memory=True)
    src, dst = (g, h) if kind == "d2h" else (h, g)
    for _ in range(3):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    t0, k = time.time(), 0
    while time.time() - t0 < secs and k < 100000:
        dst.copy_(src, non_blocking=True)
        k += 1
        if k % 4 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    dt = time.time() - t0
    print(f"{kind}: {k * n / dt / 1e9:.1f} GB/s over {dt:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
