#!/usr/bin/env python3
"""Two builds side by side on what a post costs and what it must not cost:
prep+post through the C API (tpx-postbench) and through NIXL's
Python agent (bench/nixl_bench.py), 4 KiB round trips (tpx-bench --latency;
NIXL 4 KiB WRITE), 64 MiB throughput (tpx-bench loopback; NIXL 64 MiB WRITE
and READ). Builds alternate within each round (the first one swaps every
round) so both see the same machine load; the summary gives each metric's
median per build and the median of the per-round ratios new / old.

  bench/post_compare.py OLD_BUILD NEW_BUILD [--rounds N] [--csv FILE] [--no-nixl]

A build directory needs tpx-postbench and tpx-bench; for the NIXL rows a
directory OLD_BUILD/pdir (NEW_BUILD/pdir) to use as NIXL_PLUGIN_DIR, with the
environment of the NIXL prefix sourced (<prefix>/env.sh).
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = dict(os.environ, TPX_SOCKET_IFNAME="lo", TPX_LOG=os.environ.get("TPX_LOG", "error"))


def sh(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env or ENV)
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return r.stdout


def postbench(b, res):
    for name, args in (("C_post_64Kx64_write", ["--block", "64K", "--batch", "64", "--iters", "300"]),
                       ("C_post_64Kx64_read", ["--block", "64K", "--batch", "64", "--op", "read", "--iters", "300"]),
                       ("C_post_4Kx1_write", ["--block", "4K", "--batch", "1", "--iters", "1000"])):
        out = sh([f"{b}/tpx-postbench"] + args)
        m = re.search(r"prep\+post med\s+([0-9.]+) p99\s+([0-9.]+)", out)
        res[name + "_med_us"] = float(m.group(1))
        res[name + "_p99_us"] = float(m.group(2))


def tpxbench(b, res):
    out = sh([f"{b}/tpx-bench", "loopback", "--latency", "--size", "4K", "--iters", "2000"])
    m = re.search(r"avg ([0-9.]+) us, p50 ([0-9.]+) us", out)
    res["tpxbench_4K_lat_p50_us"] = float(m.group(2))
    out = sh([f"{b}/tpx-bench", "loopback", "--size", "64M", "--iters", "10"])
    res["tpxbench_64M_GBps"] = float(re.search(r"BW: ([0-9.]+) GB/s", out).group(1))


def nixl(b, res):
    env = dict(ENV, NIXL_PLUGIN_DIR=os.path.abspath(f"{b}/pdir"))
    py = [sys.executable, os.path.join(HERE, "nixl_bench.py"), "--backends", "TPX"]
    for args in (["--sizes", "4K,64M", "--batches", "1"], ["--sizes", "64K", "--batches", "64", "--max-bytes", "4M"]):
        for line in sh(py + args, env).splitlines():
            w = line.split()
            if len(w) < 13 or w[0] != "TPX":
                continue
            key = f"nixl_{w[1]}_{w[2]}x{w[3]}"
            if w[2] == "64M":
                res[key + "_GBps"] = float(w[4])
            elif w[2] == "4K":
                res[key + "_lat_us"] = float(w[5])
            else:
                res[key + "_prep+post_med_us"] = float(w[8])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--csv", default="")
    ap.add_argument("--no-nixl", action="store_true")
    a = ap.parse_args()
    print(f"# post_compare {time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}, {os.cpu_count()} CPUs, "
          f"load {open('/proc/loadavg').read().split()[:3]}; old {a.old}, new {a.new}", flush=True)
    rows = {"old": [], "new": []}
    for r in range(a.rounds):
        for side in (("old", "new") if r % 2 == 0 else ("new", "old")):
            b = a.old if side == "old" else a.new
            res = {}
            postbench(b, res)
            tpxbench(b, res)
            if not a.no_nixl:
                nixl(b, res)
            rows[side].append(res)
            print(f"round {r + 1} {side}: " + " ".join(f"{k}={v:g}" for k, v in res.items()), flush=True)
    keys = list(rows["old"][0].keys())
    print(f"\n{'metric':42} {'old (median)':>13} {'new (median)':>13} {'new/old (median of rounds)':>27}")
    for k in keys:
        o = [x[k] for x in rows["old"]]
        n = [x[k] for x in rows["new"]]
        ratio = statistics.median(nv / ov for nv, ov in zip(n, o) if ov)
        print(f"{k:42} {statistics.median(o):13.2f} {statistics.median(n):13.2f} {ratio:27.2f}")
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("side,round," + ",".join(keys) + "\n")
            for side in ("old", "new"):
                for i, x in enumerate(rows[side]):
                    f.write(f"{side},{i + 1}," + ",".join(str(x[k]) for k in keys) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
