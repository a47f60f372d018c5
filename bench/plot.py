#!/usr/bin/python3
"""Plots of bandwidth by size, from a `LOGS=DIR bench/compare.sh sweep` folder
(its results.txt.csv: medians of cases "write SIZE", "raw SIZE", "iperf3
SIZE", "kv BLOCKxBATCH", ...) or a bench/gpu_sweep.sh one (tpx-bench --json
files engine.json, kv.json, nccl-*.json).

usage: bench/plot.py DIR [--to DIR]
  bw_vs_size.{png,svg}: GB/s against message size: the engine's write, read
      and send, the raw transport (tpx-netbench) and one iperf3 stream (or
      NCCL send/recv), measured in the same run
  kv_sweep.{png,svg}: GB/s of one vectored write of BATCH blocks against the
      block size, a line per batch (tpx-bench --block-size x --batch)

Matplotlib from Debian (python3-matplotlib, scripts/deps.sh --bench).
"""
import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def human(n):
    for unit, s in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= s and n % s == 0:
            return f"{n // s}{unit}"
    return str(n)


def size_axis(ax, xs):
    ax.set_xscale("log", base=2)
    ticks = xs[:: max(1, len(xs) // 8)]
    ax.set_xticks(ticks)
    ax.set_xticklabels([human(x) for x in ticks])
    ax.grid(True, which="major", alpha=0.3)


def machine(d):
    try:
        lines = open(os.path.join(d, "machine.txt")).read().splitlines()
    except OSError:
        return ""
    keep = [ln.split(":", 1)[1].strip() for ln in lines if ln.startswith(("date:", "host:"))]
    return "; ".join(keep)


def save(fig, to, name):
    for ext in ("png", "svg"):
        p = os.path.join(to, f"{name}.{ext}")
        fig.savefig(p, dpi=110, bbox_inches="tight")
        print(f"plot: {p}")
    plt.close(fig)


def from_csv(d, to):
    """compare.sh sweep: one median per case."""
    med = {r["case"]: float(r["median"]) for r in csv.DictReader(open(os.path.join(d, "results.txt.csv")))}
    series, kv = {}, {}
    for name, v in med.items():
        what, _, arg = name.rpartition(" ")
        if what == "kv":
            b, n = arg.split("x")
            kv.setdefault(int(n), []).append((int(b), v))
        elif arg.isdigit():
            series.setdefault(what, []).append((int(arg), v))
    title = machine_of_csv(d)
    for name, lines, xlabel in (("bw_vs_size", series, "message size (bytes)"),
                                ("kv_sweep", {f"batch {n}": p for n, p in sorted(kv.items())}, "block size (bytes)")):
        if not lines:
            continue
        fig, ax = plt.subplots(figsize=(8, 4.8))
        xs_all = set()
        for label, pts in lines.items():
            xs, ys = zip(*sorted(pts))
            xs_all.update(xs)
            ax.plot(xs, ys, "o-", ms=4, label=str(label))
        size_axis(ax, sorted(xs_all))
        ax.set_xlabel(xlabel)
        ax.set_ylabel("GB/s (1e9 B/s)")
        ax.set_title(f"host memory over loopback, one transfer in flight\n{title}", fontsize=9)
        ax.legend(fontsize=8)
        save(fig, to, name)


def machine_of_csv(d):
    p = os.path.join(d, "machine.txt")
    return open(p).read().strip().replace("\n", "; ") if os.path.exists(p) else ""


def bw_vs_size(d, to):
    eng = json.load(open(os.path.join(d, "engine.json")))
    fig, ax = plt.subplots(figsize=(8, 4.8))
    xs_all = set()
    for op, style in (("write", "o-"), ("read", "s-"), ("send", "^-")):
        pts = [(r["bytes"], r["gbps_per_gpu"]) for r in eng["runs"] if r["op"] == op and r["gbps_per_gpu"] is not None]
        if pts:
            xs, ys = zip(*sorted(pts))
            xs_all.update(xs)
            ax.plot(xs, ys, style, label=f"engine {op}", ms=4)
    for name, f, style in (("raw transport (tpx-netbench)", "raw.csv", "d--"), ("iperf3, 1 stream", "iperf3.csv", "x:")):
        p = os.path.join(d, f)
        if not os.path.exists(p):
            continue
        pts = [(int(r["bytes"]), float(r["gbps"])) for r in csv.DictReader(open(p)) if r["gbps"]]
        if pts:
            xs, ys = zip(*sorted(pts))
            xs_all.update(xs)
            ax.plot(xs, ys, style, label=name, ms=4)
    for f in sorted(os.listdir(d)):  # NCCL send/recv (bench/gpu_sweep.sh: nccl-*.json), GPU runs only
        if f.startswith("nccl-") and f.endswith(".json") and os.path.getsize(os.path.join(d, f)):
            r = json.load(open(os.path.join(d, f)))
            pts = sorted((x["bytes"], x["gbps_per_gpu"]) for x in r.get("timed", []))
            if pts:
                xs, ys = zip(*pts)
                ax.plot(xs, ys, "*", ms=10, label=f"NCCL {f[5:-5]} send/recv")
    size_axis(ax, sorted(xs_all))
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("GB/s (1e9 B/s), per GPU = total")
    mem = "GPU" if eng["config"]["mem"] == "cuda" else "host"
    ax.set_title(f"{mem} memory over loopback, one transfer in flight\n" + machine(d), fontsize=9)
    ax.legend(fontsize=8)
    save(fig, to, "bw_vs_size")


def kv_sweep(d, to):
    p = os.path.join(d, "kv.json")
    if not os.path.exists(p):
        return
    kv = json.load(open(p))
    fig, ax = plt.subplots(figsize=(8, 4.8))
    batches = sorted({r["batch"] for r in kv["runs"]})
    xs_all = set()
    for b in batches:
        pts = sorted((r["block_bytes"], r["gbps_per_gpu"]) for r in kv["runs"] if r["batch"] == b and r["gbps_per_gpu"])
        if pts:
            xs, ys = zip(*pts)
            xs_all.update(xs)
            ax.plot(xs, ys, "o-", ms=4, label=f"batch {b}" + (" (contiguous)" if b == 1 else ""))
    size_axis(ax, sorted(xs_all))
    ax.set_xlabel("block size (bytes)")
    ax.set_ylabel("GB/s (1e9 B/s)")
    mem = "GPU" if kv["config"]["mem"] == "cuda" else "host"
    ax.set_title(f"KV-cache pattern: BATCH blocks in one vectored write, {mem} memory, loopback\n" + machine(d),
                 fontsize=9)
    ax.legend(fontsize=8)
    save(fig, to, "kv_sweep")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    to = sys.argv[sys.argv.index("--to") + 1] if "--to" in sys.argv else d
    os.makedirs(to, exist_ok=True)
    if os.path.exists(os.path.join(d, "results.txt.csv")):
        from_csv(d, to)
        return
    bw_vs_size(d, to)
    kv_sweep(d, to)


main()
