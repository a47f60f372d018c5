#!/usr/bin/env python3
"""nixlbench-shaped benchmark through NIXL's Python agent API, two processes
(initiator and target, pairwise), host memory (DRAM) or GPU memory (VRAM,
needs torch with CUDA), loopback. Several backends in one run, so their
figures sit side by side:

  bench/nixl_bench.py [--backends TPX,UCX] [--op WRITE|READ|both] [--mem DRAM|VRAM]
                      [--sizes 4K,...,64M] [--batches 1,64] [--max-bytes 256M]
                      [--iters N] [--csv FILE] [--tpx-bench build/tpx-bench]
                      [--poll spin|yield|sleep:US] [--target-polls-notifs]

Environment as for the tests (tests/nixl/CMakeLists.txt): NIXL_PLUGIN_DIR
holding libplugin_TPX.so, PYTHONPATH/LD_LIBRARY_PATH for the NIXL prefix.
UCX runs with UCX_TLS=tcp and UCX_NET_DEVICES=lo unless set; TPX with TPX_SOCKET_IFNAME=lo
unless set.

Columns (nixlbench's): block size, batch size, GB/s (1e9 bytes/s of the whole
request, from first prep to completion, iterations back to back), average
latency of one request, and average / p99 of prep (make_prepped_xfer), post
(transfer) and transfer (post to DONE) time in microseconds; then the CPU
time the initiator and the target process used per request (cpu_init_us,
cpu_tgt_us; user + system, all threads).

--poll: how the initiator waits for DONE. spin (default) calls
check_xfer_state back to back, as nixlbench does; yield gives up the CPU
between calls (os.sched_yield); sleep:US sleeps US microseconds between
calls, as a serving loop that checks its transfers once per step does (vLLM's
NixlConnector checks once per engine step). --target-polls-notifs: the
target calls get_new_notifs back to back while the initiator transfers (a
receiver waiting for a notification that way) instead of sleeping.
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "python", "nixl"))

from nixl_import import nixl_agent, nixl_agent_config  # noqa: E402

WAIT_S = 120.0


def size(s: str) -> int:
    mul = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1].upper(), 1)
    return int(s[:-1] if mul > 1 else s) * mul


def human(n: int) -> str:
    for unit, m in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= m and n % m == 0:
            return f"{n // m}{unit}"
    return str(n)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Buffer:
    def __init__(self, nbytes: int, mem: str):
        self.mem = mem
        if mem == "VRAM":
            import torch
            self.t = torch.ones(nbytes, dtype=torch.uint8, device="cuda")
            self.addr = self.t.data_ptr()
        else:
            import numpy as np
            self.t = np.ones(nbytes, dtype=np.uint8)
            self.addr = self.t.ctypes.data
        self.nbytes = nbytes


def target(backend: str, nbytes: int, mem: str, poll_notifs: bool) -> int:
    port = free_port()
    a = nixl_agent("target", nixl_agent_config(enable_listen_thread=True, listen_port=port,
                                               backends=[backend]))
    buf = Buffer(nbytes, mem)
    a.register_memory([(buf.addr, nbytes, 0, "")], mem)
    print(f"@@ READY {port} {buf.addr}", flush=True)  # NIXL logs to stdout too
    if poll_notifs:  # a receiver waiting for notifications back to back
        import select
        while not select.select([sys.stdin], [], [], 0)[0]:
            a.get_new_notifs()
    sys.stdin.readline()  # the initiator says when it is done
    return 0


def until(cond, what: str):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
    raise RuntimeError(f"{what}: not within {WAIT_S} s")


def p99(v):
    s = sorted(v)
    return s[min(len(s) - 1, int(round(0.99 * (len(s) - 1))))]


def proc_cpu_s(pid: int) -> float:
    """user + system CPU seconds of a process, all its threads."""
    with open(f"/proc/{pid}/stat") as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def wait_done(a, h, st, poll):
    if poll == "spin":
        while st == "PROC":
            st = a.check_xfer_state(h)
    elif poll == "yield":
        while st == "PROC":
            os.sched_yield()
            st = a.check_xfer_state(h)
    else:
        nap = int(poll.split(":", 1)[1]) / 1e6
        while st == "PROC":
            time.sleep(nap)
            st = a.check_xfer_state(h)
    return st


def measure(a, op, local, remote, batch, iters, warmup, poll):
    idx = list(range(batch))
    prep, post, xfer, total = [], [], [], []
    t_start = None
    for it in range(warmup + iters):
        if it == warmup:
            t_start = time.perf_counter()
        t0 = time.perf_counter()
        h = a.make_prepped_xfer(op, local, idx, remote, idx)
        t1 = time.perf_counter()
        st = a.transfer(h)
        t2 = time.perf_counter()
        st = wait_done(a, h, st, poll)
        t3 = time.perf_counter()
        if st != "DONE":
            raise RuntimeError(f"transfer state {st}")
        a.release_xfer_handle(h)
        if it >= warmup:
            prep.append((t1 - t0) * 1e6)
            post.append((t2 - t1) * 1e6)
            xfer.append((t3 - t2) * 1e6)
            total.append((t3 - t0) * 1e6)
    wall = time.perf_counter() - t_start
    return prep, post, xfer, total, wall


def measure_cpu(a, op, local, remote, batch, iters, poll, tgt_pid):
    """measure() with the CPU time both processes used, per request."""
    c0, t0 = os.times(), proc_cpu_s(tgt_pid)
    r = measure(a, op, local, remote, batch, iters, max(2, iters // 10), poll)
    c1, t1 = os.times(), proc_cpu_s(tgt_pid)
    n = iters + max(2, iters // 10)
    ci = (c1.user + c1.system - c0.user - c0.system) / n * 1e6
    return r + (ci, (t1 - t0) / n * 1e6)


def run_backend(backend, args, rows):
    env = dict(os.environ)
    if backend == "UCX":
        env.setdefault("UCX_TLS", "tcp")
        env.setdefault("UCX_NET_DEVICES", "lo")  # loopback only
    else:
        env.setdefault("TPX_SOCKET_IFNAME", "lo")
    os.environ.update({k: v for k, v in env.items() if k in ("UCX_TLS", "UCX_NET_DEVICES", "TPX_SOCKET_IFNAME")})
    nbytes = args.max_bytes
    tp = subprocess.Popen([sys.executable, __file__, "--role", "target", "--backends", backend,
                           "--max-bytes", str(nbytes), "--mem", args.mem]
                          + (["--target-polls-notifs"] if args.target_polls_notifs else []),
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        words = []
        for line in tp.stdout:  # ends at EOF
            if line.startswith("@@ "):
                words = line.split()[1:]
                break
        if not words or words[0] != "READY":
            raise RuntimeError(f"{backend} target failed to start")
        port, raddr = int(words[1]), int(words[2])
        a = nixl_agent("init", nixl_agent_config(enable_listen_thread=True, listen_port=free_port(),
                                                 backends=[backend]))
        buf = Buffer(nbytes, args.mem)
        a.register_memory([(buf.addr, nbytes, 0, "")], args.mem)
        a.fetch_remote_metadata("target", "127.0.0.1", port)
        a.send_local_metadata("127.0.0.1", port)
        until(lambda: a.check_remote_metadata("target"), "metadata")
        ops = ["WRITE", "READ"] if args.op == "both" else [args.op]
        for batch in args.batches:
            for bs in args.sizes:
                if bs * batch > nbytes:
                    continue
                local = a.prep_xfer_dlist("NIXL_INIT_AGENT",
                                          [(buf.addr + i * bs, bs, 0) for i in range(batch)], args.mem)
                remote = a.prep_xfer_dlist("target", [(raddr + i * bs, bs, 0) for i in range(batch)],
                                           args.mem)
                iters = args.iters or max(8, min(200, (1 << 30) // (bs * batch)))
                for op in ops:
                    prep, post, xfer, total, wall, cpu_i, cpu_t = measure_cpu(a, op, local, remote, batch,
                                                                              iters, args.poll, tp.pid)
                    gbps = bs * batch * iters / wall / 1e9
                    rows.append((backend, op, bs, batch, gbps, statistics.mean(total),
                                 statistics.mean(prep), p99(prep), statistics.median([p + q for p, q in zip(prep, post)]),
                                 statistics.mean(post), p99(post), statistics.mean(xfer), p99(xfer),
                                 cpu_i, cpu_t))
                    print_row(rows[-1])
                a.release_dlist_handle(local)
                a.release_dlist_handle(remote)
        a.remove_remote_agent("target")
        del a
    finally:
        try:
            tp.stdin.write("done\n")
            tp.stdin.flush()
            tp.wait(timeout=60)
        except Exception:
            tp.kill()
            tp.wait(timeout=60)


def run_tpx_bench(path: str, rows, iters: int):
    """The engine alone (tpx-bench, two processes) at 64 MiB, same run: the
    reference for "the shim costs nothing measurable". CPU per request: the
    client's and the server's whole run (setup and 2 warm-up requests
    included) over the timed requests."""
    import re
    for op in ("write", "read"):
        port = free_port()
        srv = subprocess.Popen([path, "server", "--port", str(port), "--host", "127.0.0.1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cpu = [float("nan"), float("nan")]
        try:
            time.sleep(0.5)
            cli = subprocess.Popen([path, "client", "127.0.0.1", "--port", str(port), "--size", "64M",
                                    "--op", op, "--iters", str(iters)], stdout=subprocess.PIPE, text=True)
            out = cli.stdout.read()
            _, _, ru = os.wait4(cli.pid, 0)
            cli.returncode = 0  # reaped here
            cpu[0] = (ru.ru_utime + ru.ru_stime) / iters * 1e6
        finally:
            _, _, ru = os.wait4(srv.pid, 0)
            srv.returncode = 0
            cpu[1] = (ru.ru_utime + ru.ru_stime) / iters * 1e6
        m = re.search(r"Avg \((\d+) iter\): ([0-9.]+) ms, BW: ([0-9.]+) GB/s", out)
        if m:
            rows.append(("tpx-bench", op.upper(), 64 << 20, 1, float(m.group(3)),
                         float(m.group(2)) * 1e3) + (float("nan"),) * 7 + tuple(cpu))
            print_row(rows[-1])


HEADER = ("backend", "op", "block", "batch", "GB/s", "avg_lat_us", "prep_avg", "prep_p99",
          "prep+post_med", "post_avg", "post_p99", "xfer_avg", "xfer_p99", "cpu_init_us", "cpu_tgt_us")


def print_row(r):
    b, op, bs, batch, *v = r
    print(f"{b:>9} {op:>5} {human(bs):>5} {batch:>5} {v[0]:8.3f} " +
          " ".join(f"{x:10.1f}" for x in v[1:]), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--role", default="initiator")
    ap.add_argument("--backends", default="TPX,UCX")
    ap.add_argument("--op", default="both")
    ap.add_argument("--mem", default="DRAM")
    ap.add_argument("--sizes", default="4K,16K,64K,256K,1M,4M,16M,64M")
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--max-bytes", default="256M")
    ap.add_argument("--iters", type=int, default=0)
    ap.add_argument("--csv", default="")
    ap.add_argument("--tpx-bench", default="")
    ap.add_argument("--poll", default="spin")
    ap.add_argument("--target-polls-notifs", action="store_true")
    args = ap.parse_args()
    args.max_bytes = size(str(args.max_bytes))
    if args.poll not in ("spin", "yield") and not args.poll.startswith("sleep:"):
        ap.error("--poll: spin, yield or sleep:US")
    if args.role == "target":
        return target(args.backends, args.max_bytes, args.mem, args.target_polls_notifs)
    os.environ.setdefault("TPX_SOCKET_IFNAME", "lo")  # loopback only
    args.sizes = [size(s) for s in args.sizes.split(",")]
    args.batches = [int(b) for b in args.batches.split(",")]
    print(f"# nixl_bench {args.mem} loopback, {os.cpu_count()} CPUs, poll {args.poll}, "
          f"{time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}; times in us")
    print("#" + " ".join(HEADER))
    rows = []
    if args.tpx_bench:
        run_tpx_bench(args.tpx_bench, rows, args.iters or 20)
    for b in args.backends.split(","):
        run_backend(b, args, rows)
    if args.tpx_bench:  # again after, so drift across the run shows
        run_tpx_bench(args.tpx_bench, rows, args.iters or 20)
    if args.csv:
        with open(args.csv, "w") as f:
            f.write(",".join(HEADER) + "\n")
            for r in rows:
                f.write(",".join(str(x) for x in r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
