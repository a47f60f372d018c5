#!/usr/bin/env python3
"""The Python package against tpx-bench, side by side in one run.

Both sides speak tpx-bench's protocol (the client's "CFG" notification with
its descriptor, the server's "MD" answer, "DONE"), so a Python client and
server are a drop-in pair for `tpx-bench client` / `tpx-bench server`.
Rounds alternate: Python client + Python server, then tpx-bench client +
tpx-bench server, each pair two processes on 127.0.0.1.

Latency (--size 4K, the default): `tpx-bench --latency`'s ping-pong: the
client writes 4 KiB with a notification, the server writes 4 KiB back with
one; a round trip ends when the client's write completed and the server's
notification arrived. Printed: round trips per second from the mean and
from the median round trip, for both, and python / tpx-bench ratios.
Bandwidth (--size 64M [--mem cuda]): one write of --size at a time, waited,
as `tpx-bench client --size` does; GB/s from the mean.

usage: python_vs_bench.py [--build BUILD] [--mem host|cuda] [--size 4K|64M] [--iters N]
       [--warmup N] [--rounds 3] [--gpus C,S] [--pure]
       python_vs_bench.py --serve PORT [--mem host|cuda] [--gpus C,S]   (the server side)
TPX_LIBRARY, else BUILD/libtpx.so; CUDA memory is a torch tensor when torch
is there, else cudaMalloc through libcudart (tests/python/package/helpers.py).
"""
import argparse
import os
import re
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python", "package"))
CFG = struct.Struct("=iiiiQ")  # tpx-bench's struct cfgmsg: op, iters, warmup, latency, size (x86_64)
OP_WRITE = 1


def size_arg(s: str) -> int:
    m = re.fullmatch(r"(\d+)([KMG]?)", s.upper())
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def buffer(mem: str, gpu: int, n: int):
    os.environ["TPX_PY_MEM"], os.environ["TPX_PY_GPU"] = mem, str(gpu)
    import helpers  # numpy, torch or cudaMalloc
    helpers.MEM, helpers.GPU = mem, gpu
    b = helpers.alloc(n)
    return b, helpers.regobj(b)


def serve(port: int, mem: str, gpu: int) -> None:
    import tpx
    with tpx.Endpoint(gpu, port=port, listen_host="127.0.0.1", name="pyserver") as ep:
        print("listening", flush=True)
        peer = ep.accept(60)
        msg = ep.wait_notif(60).msg
        op, iters, warmup, latency, size = CFG.unpack_from(msg, 4)
        cli = tpx.RemoteMemory(msg[4 + CFG.size:])
        keep, obj = buffer(mem, gpu, size)
        m = ep.register(obj)
        peer.notify(b"MD\0\0" + m.descriptor)
        if latency:
            back = peer.prepare_write(m, cli, size=size, notif=b"p")
            for _ in range(iters + warmup):  # waits without a limit, like tpx-bench's
                ep.wait_notif()
                back.run()
        ep.wait_notif(300)  # DONE


def client(args, port: int):
    """Per-iteration seconds (latency: round trips)."""
    import tpx
    with tpx.Endpoint(args.client_gpu, port=None, listen_host="127.0.0.1", name="pyclient") as ep:
        peer = ep.connect("127.0.0.1", port)
        keep, obj = buffer(args.mem, args.client_gpu, args.size)
        m = ep.register(obj, access="w")
        peer.notify(b"CFG\0" + CFG.pack(OP_WRITE, args.iters, args.warmup, int(args.latency), args.size)
                    + m.descriptor)
        srv = tpx.RemoteMemory(ep.wait_notif(60).msg[4:])
        x = peer.prepare_write(m, srv, size=args.size, notif=b"p" if args.latency else None)
        t, perf_counter, latency = [], time.perf_counter, args.latency
        for i in range(args.iters + args.warmup):
            t0 = perf_counter()
            x.run()
            if latency:
                ep.wait_notif()
            t.append(perf_counter() - t0)
        peer.notify(b"DONE")
        return t[args.warmup:]


def start_server(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()  # "listening" / "[SERVER] listening on port"
    if "listening" not in line:
        raise RuntimeError(f"server did not start: {line!r}")
    return p


def run_python(args, port: int):
    srv = start_server([sys.executable, os.path.abspath(__file__), "--serve", str(port), "--mem", args.mem,
                        "--gpus", f"{args.client_gpu},{args.server_gpu}", "--build", args.build]
                       + (["--pure"] if args.pure else []))
    try:
        t = client(args, port)
    finally:
        srv.wait(120)
    t.sort()
    return statistics.mean(t), statistics.median(t), t[len(t) * 99 // 100]


def run_bench(args, port: int):
    tool = os.path.join(args.build, "tpx-bench")
    srv = start_server([tool, "server", "--port", str(port), "--host", "127.0.0.1", "--mem", args.mem,
                        "--gpu", str(args.server_gpu)])
    try:
        cli = [tool, "client", "127.0.0.1", "--port", str(port), "--mem", args.mem, "--gpu", str(args.client_gpu),
               "--iters", str(args.iters), "--warmup", str(args.warmup)]
        cli += ["--latency"] if args.latency else ["--size", str(args.size)]
        out = subprocess.run(cli, capture_output=True, text=True, timeout=600, check=True).stdout
    finally:
        srv.wait(120)
    if args.latency:  # one-way = round trip / 2
        m = re.search(r"Latency .*: avg ([\d.]+) us, p50 ([\d.]+) us, p99 ([\d.]+) us", out)
        return tuple(2e-6 * float(m.group(i)) for i in (1, 2, 3))
    avg = float(re.search(r"\[PERF\] Avg \(\d+ iter\): ([\d.]+) ms", out).group(1)) * 1e-3
    return avg, avg, avg


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--serve", type=int, default=0)
    ap.add_argument("--mem", default="host", choices=["host", "cuda"])
    ap.add_argument("--size", default="4K")
    ap.add_argument("--iters", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gpus", default="0,0", help="client,server GPU")
    ap.add_argument("--pure", action="store_true", help="ctypes only, without the compiled fast path")
    args = ap.parse_args()
    if args.pure:
        os.environ["TPX_PY_PURE"] = "1"
    sys.path.insert(0, os.path.join(args.build, "python"))  # the fast path CMake built, if any
    args.client_gpu, args.server_gpu = (int(g) for g in args.gpus.split(","))
    os.environ.setdefault("TPX_LIBRARY", os.path.join(args.build, "libtpx.so"))
    if args.serve:
        serve(args.serve, args.mem, args.server_gpu)
        return
    args.size = size_arg(args.size)
    args.latency = args.size == 4096
    args.iters = args.iters or (2000 if args.latency else 20)
    args.warmup = args.warmup or (200 if args.latency else 2)
    import tpx
    how = "compiled fast path" if tpx._core._fast else "ctypes only"
    port = 21000 + os.getpid() % 20000
    py, cb = [], []
    for r in range(args.rounds):
        py.append(run_python(args, port + 2 * r))
        cb.append(run_bench(args, port + 2 * r + 1))
        f = "mean {:.1f} us p50 {:.1f} us p99 {:.1f} us"
        print(f"round {r}: python " + f.format(*(v * 1e6 for v in py[-1])) + "; tpx-bench "
              + f.format(*(v * 1e6 for v in cb[-1])) + f" per {'round trip' if args.latency else 'write'}", flush=True)
    pm, pp = statistics.median(p[0] for p in py), statistics.median(p[1] for p in py)
    bm, bp = statistics.median(b[0] for b in cb), statistics.median(b[1] for b in cb)
    if args.latency:
        print(f"[RESULT] 4 KiB write round trips/s ({args.mem}, python: {how}, medians of {args.rounds} rounds x {args.iters}): "
              f"from the mean: python {1 / pm:.0f}, tpx-bench {1 / bm:.0f}, ratio {bm / pm:.2f}x; "
              f"from the median round trip: python {1 / pp:.0f}, tpx-bench {1 / bp:.0f}, ratio {bp / pp:.2f}x")
    else:
        print(f"[RESULT] {args.size >> 20} MiB writes ({args.mem}, python: {how}, medians of {args.rounds} rounds x {args.iters}): "
              f"python {args.size / pm / 1e9:.2f} GB/s, tpx-bench {args.size / bm / 1e9:.2f} GB/s, "
              f"ratio {bm / pm:.2f}x")


if __name__ == "__main__":
    main()
