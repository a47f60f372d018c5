#!/usr/bin/env python3
"""NCCL over a chosen net transport, two GPUs of one host, checked and timed.

Runs all_reduce and send/recv GPU0 -> GPU1 from 1 KiB to 256 MiB with exact
result checks, then times send/recv at 64 MiB and 256 MiB. P2P, SHM and NVLS
are disabled so every byte goes through the net transport over loopback.

Transports (--transport, or TPX_BENCH_TRANSPORT):
  socket      NCCL's built-in Socket transport, defaults
  socket-4x4  NCCL Socket with NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4
  tpx         our plugin: NCCL_NET_PLUGIN=<--plugin path> NCCL_NET=tpx
  tcpx        Google's GPUDirect-TCPX plugin (the real one, --plugin PATH to
              libnccl-net-tcpx.so), NCCL_NET=GPUDirectTCPX_v7, GPU memory at
              both ends of the network (NCCL_NET_GDR_LEVEL=SYS,
              NCCL_NET_GDR_READ=1: the plugin's devmem path and NCCL's unpack
              kernels, as on A3-high), NCCL's Simple protocol only (the one
              that unpacks) and the three plugin variables tcpx-p2p
              fills in for itself (docs/CONFIG.md). The plugin's own
              NCCL_GPUDIRECTTCPX_* (interfaces, RxDM's socket prefix) and the
              devmem stand-in (LD_PRELOAD) come from the caller:
              tests/gpu/tcpx_clients.sh
  tcpx-a3     tcpx with the settings of Google's A3-high NCCL configuration
              (NCCL_P2P_NET_CHUNKSIZE=524288, NCCL_BUFFSIZE=4194304, and
              for the plugin 1 thread x 4 sockets per comm: on lo it
              otherwise takes 1 x 1)
  env         leave NCCL_NET* as the caller set them

Start:  python3 bench/nccl_with_tpx.py --transport tpx --plugin build/libnccl-net-tpx.so
   or:  torchrun --nproc-per-node 2 bench/nccl_with_tpx.py --transport socket
Exit status 0 only when every result was exact. Prints one line
"RESULT {json}" (rank 0) for bench/nccl_compare.sh.

--check-max SIZE (default 256M; 0: no checks) bounds the checked sizes;
--sizes LIST (default 64M,256M) the timed ones; --inflight LIST (default 1)
times each size with N send/recv pairs posted at once (one NCCL group,
torch.distributed.batch_isend_irecv, N buffers), N x size bytes an
iteration.

--selftest-cpu runs the same checks and timing with the gloo backend on the
CPU (no GPU, no NCCL): a check of this script's own logic.

Bandwidth: GB/s = 1e9 bytes/s, per GPU (each GPU sends or receives `size`
bytes per iteration); the time is the slower rank's, from a synchronised
start to cuda.synchronize() after the last iteration.
"""

import argparse
import datetime
import json
import os
import socket
import sys
import time

KIB = 1024
MIB = 1024 * 1024

# Sizes checked for exact results: powers of 4 from 1 KiB to 256 MiB, plus
# odd sizes that are no multiple of any chunk or element size.
CHECK_SIZES = [KIB * 4**i for i in range(10)] + [12_345, 1_000_003]
TIMED_SIZES = [64 * MIB, 256 * MIB]

COMMON_ENV = {
    "NCCL_P2P_DISABLE": "1",
    "NCCL_SHM_DISABLE": "1",
    "NCCL_NVLS_ENABLE": "0",
    "NCCL_IB_DISABLE": "1",  # never let an InfiniBand NIC carry the traffic
    "NCCL_SOCKET_IFNAME": "lo",
    "TPX_SOCKET_IFNAME": "lo",
}


# Google's GPUDirect-TCPX plugin: its ncclNet table's name, and how NCCL is
# made to use it as A3-high does: GPU memory at both ends of the network
# (loopback's PCI path, which the devmem stand-in supplies, is not near the
# GPU, so NCCL would otherwise stage through host memory and never use the
# plugin's devmem path or its own unpack kernels).
TCPX_NAME = "GPUDirectTCPX_v7"
# Only NCCL's Simple protocol unpacks: its LL and LL128 receive kernels read
# NCCL's own buffer, which the plugin never writes (the bytes land in the
# devmem receive buffer and wait for the unpack kernel of prims_simple), so
# they wait for ever. NCCL 2.28.9 picked LL for a 1 KiB all_reduce over the
# plugin and hung ("rx ctrl timeout"); Google's A3-high configuration sets
# NCCL_PROTO=Simple too. Small send/recv take LL below NCCL_P2P_LL_THRESHOLD.
TCPX_ENV = {"NCCL_NET_GDR_LEVEL": "SYS", "NCCL_NET_GDR_READ": "1", "NCCL_PROTO": "Simple",
            "NCCL_P2P_LL_THRESHOLD": "0"}
# The plugin's three variables whose unset values are unsafe; tpx-p2p fills
# in the same for itself (docs/CONFIG.md, "The GPUDirect-TCPX plugin's
# environment"), so NCCL and the engine run the plugin alike.
TCPX_PLUGIN_DEFAULTS = {"NCCL_DYNAMIC_CHUNK_SIZE": "524288", "NCCL_GPUDIRECTTCPX_RECV_SYNC": "1",
                        "NCCL_MIN_ZCOPY_SIZE": "4096"}
# Google's A3-high NCCL configuration: NCCL's chunk and buffer sizes, and the
# plugin's threads and sockets per comm (read by the plugin; on a NIC it does
# not know, lo included, it takes 1 x 1: connect.cc, tcpxGetNsockNthread).
A3_TUNING = {"NCCL_P2P_NET_CHUNKSIZE": "524288", "NCCL_BUFFSIZE": "4194304",
             "NCCL_SOCKET_NTHREADS": "1", "NCCL_NSOCKS_PERTHREAD": "4"}


def parse_size(text):
    """'64M' -> 67108864; K, M, G suffixes (powers of 1024) or bytes."""
    t = text.strip().upper()
    mult = {"K": KIB, "M": MIB, "G": 1024 * MIB}.get(t[-1:], 1)
    try:
        n = int(t[:-1] if mult > 1 else t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    if n < 0:
        raise argparse.ArgumentTypeError(f"negative size: {text!r}")
    return n


def size_list(text):
    sizes = [parse_size(x) for x in text.split(",") if x.strip()]
    if not sizes or any(n < 1 for n in sizes):
        raise argparse.ArgumentTypeError(f"sizes: a comma-separated list of positive sizes, not {text!r}")
    return sizes


def int_list(text):
    try:
        v = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        v = []
    if not v or any(n < 1 or n > 64 for n in v):
        raise argparse.ArgumentTypeError(f"a comma-separated list of integers 1..64, not {text!r}")
    return v


def transport_env(transport, plugin):
    """Environment for one transport, applied before NCCL initialises."""
    env = dict(COMMON_ENV)
    if transport in ("socket", "socket-4x4"):
        env["NCCL_NET"] = "Socket"
        env["NCCL_NET_PLUGIN"] = "none"  # no external plugin may be picked
        if transport == "socket-4x4":
            env["NCCL_SOCKET_NTHREADS"] = "4"
            env["NCCL_NSOCKS_PERTHREAD"] = "4"
    elif transport == "tpx":
        if not plugin:
            sys.exit("nccl_with_tpx: --transport tpx needs --plugin PATH (or TPX_PLUGIN_SO)")
        path = os.path.abspath(plugin)
        if not os.path.isfile(path):
            sys.exit(f"nccl_with_tpx: plugin {path} does not exist (build it: make build)")
        env["NCCL_NET_PLUGIN"] = path
        env["NCCL_NET"] = "tpx"
    elif transport in ("tcpx", "tcpx-a3"):
        if not plugin:
            sys.exit(f"nccl_with_tpx: --transport {transport} needs --plugin PATH (libnccl-net-tcpx.so)")
        path = os.path.abspath(plugin)
        if not os.path.isfile(path):
            sys.exit(f"nccl_with_tpx: plugin {path} does not exist (scripts/build-tcpx-plugin.sh builds it)")
        env["NCCL_NET_PLUGIN"] = path
        env["NCCL_NET"] = TCPX_NAME
        env.update(TCPX_ENV)
        # What the caller set wins (the plugin's own variables, tuning).
        for k in TCPX_PLUGIN_DEFAULTS:
            env[k] = os.environ.get(k, TCPX_PLUGIN_DEFAULTS[k])
        if transport == "tcpx-a3":
            env.update(A3_TUNING)
    elif transport != "env":
        sys.exit(f"nccl_with_tpx: unknown transport {transport!r}")
    return env


def fmt_size(n):
    if n >= MIB and n % MIB == 0:
        return f"{n // MIB} MiB"
    if n >= KIB and n % KIB == 0:
        return f"{n // KIB} KiB"
    return f"{n} B"


class WrongResult(RuntimeError):
    pass


def first_mismatch(torch, got, want):
    bad = (got != want).nonzero()
    i = int(bad[0].item())
    return f"index {i}: got {got[i].item()}, want {want[i].item()} ({bad.numel()} wrong)"


def agree(torch, dist, ok, device):
    """Both ranks learn whether both checks passed (so neither hangs)."""
    flag = torch.tensor([1 if ok else 0], dtype=torch.int32, device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def check_all_reduce(torch, dist, rank, device, nbytes):
    n = max(1, nbytes // 4)
    base = (torch.arange(n, dtype=torch.int64, device=device) % 251).to(torch.float32)
    # rank 0: x, rank 1: 2x + 1 -> sum 3x + 1, exact in float32 (< 2^24).
    t = base.clone() if rank == 0 else base * 2 + 1
    dist.all_reduce(t)
    want = base * 3 + 1
    ok = torch.equal(t, want)
    detail = "" if ok else first_mismatch(torch, t, want)
    if not agree(torch, dist, ok, device):
        raise WrongResult(f"all_reduce {fmt_size(nbytes)}: wrong result on rank {rank}: {detail or 'peer failed'}")


def pattern(torch, n, seed, device):
    # Values 0..250: 255 (the receive buffer's fill) never occurs.
    return ((torch.arange(n, dtype=torch.int64, device=device) * 7 + seed) % 251).to(torch.uint8)


def check_send_recv(torch, dist, rank, device, nbytes, seed):
    want = pattern(torch, nbytes, seed, device)
    if rank == 0:
        dist.send(want, dst=1)
        ok, detail = True, ""
    else:
        buf = torch.full((nbytes,), 255, dtype=torch.uint8, device=device)
        dist.recv(buf, src=0)
        ok = torch.equal(buf, want)
        detail = "" if ok else first_mismatch(torch, buf, want)
    if not agree(torch, dist, ok, device):
        raise WrongResult(f"send/recv {fmt_size(nbytes)}: wrong bytes on rank {rank}: {detail or 'peer failed'}")


def sync(torch, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_send_recv(torch, dist, rank, device, nbytes, warmup, iters, inflight=1):
    seed = nbytes % 251
    want = pattern(torch, nbytes, seed, device)
    if rank == 0:
        bufs = [want] * inflight
    else:
        bufs = [torch.full((nbytes,), 255, dtype=torch.uint8, device=device) for _ in range(inflight)]

    def one():
        if inflight == 1:
            if rank == 0:
                dist.send(bufs[0], dst=1)
            else:
                dist.recv(bufs[0], src=0)
            return
        # N pairs in one NCCL group: all posted before any completes.
        op = dist.isend if rank == 0 else dist.irecv
        for w in dist.batch_isend_irecv([dist.P2POp(op, b, 1 - rank) for b in bufs]):
            w.wait()

    for _ in range(warmup):
        one()
    sync(torch, device)
    if rank == 1:
        for b in bufs:
            b.fill_(255)
    dist.barrier()
    sync(torch, device)
    t0 = time.perf_counter()
    for _ in range(iters):
        one()
    sync(torch, device)
    elapsed = time.perf_counter() - t0
    ok, detail = True, ""
    if rank == 1:
        for b in bufs:
            if not torch.equal(b, want):
                ok, detail = False, first_mismatch(torch, b, want)
                break
    if not agree(torch, dist, ok, device):
        raise WrongResult(f"timed send/recv {fmt_size(nbytes)} x{inflight}: wrong bytes on rank {rank}: "
                          f"{detail or 'peer failed'}")
    slowest = torch.tensor([elapsed], dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    secs = float(slowest.item())
    return {"bytes": nbytes, "inflight": inflight, "iters": iters, "seconds": secs,
            "gbps_per_gpu": nbytes * inflight * iters / secs / 1e9}


def worker(rank, world, args, env):
    os.environ.update(env)
    import torch
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=args.timeout)
    if args.selftest_cpu:
        device = torch.device("cpu")
        dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timeout)
    else:
        local = int(os.environ.get("LOCAL_RANK", rank))
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
        try:
            dist.init_process_group("nccl", rank=rank, world_size=world, timeout=timeout, device_id=device)
        except TypeError:  # torch without device_id
            dist.init_process_group("nccl", rank=rank, world_size=world, timeout=timeout)
    rows = []
    try:
        for i, size in enumerate(s for s in CHECK_SIZES if s <= args.check_max):
            check_all_reduce(torch, dist, rank, device, size)
            check_send_recv(torch, dist, rank, device, size, seed=i + 1)
            rows.append(size)
            if rank == 0:
                print(f"  {fmt_size(size):>10}  all_reduce exact  send/recv exact", flush=True)
        timed = [time_send_recv(torch, dist, rank, device, s, args.warmup, args.iters, n)
                 for s in args.sizes for n in args.inflight]
    finally:
        dist.destroy_process_group()
    if rank == 0:
        if args.selftest_cpu:
            nccl, gpus = "none (gloo self-test)", "none"
        else:
            v = torch.cuda.nccl.version()
            nccl = ".".join(str(x) for x in v) if isinstance(v, (tuple, list)) else str(v)
            gpus = f"{torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
        print()
        print(f"transport {args.transport}   torch {torch.__version__}   NCCL {nccl}   GPUs {gpus}")
        print(f"{'size':>10} {'inflight':>8} {'iters':>6} {'time (s)':>10} {'GB/s per GPU':>13}")
        for t in timed:
            print(f"{fmt_size(t['bytes']):>10} {t['inflight']:>8} {t['iters']:>6} {t['seconds']:>10.4f}"
                  f" {t['gbps_per_gpu']:>13.2f}")
        result = {
            "transport": "gloo-selftest" if args.selftest_cpu else args.transport,
            "torch": torch.__version__,
            "nccl": nccl,
            "checked_sizes": rows,
            "timed": timed,
            "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(("NCCL_", "TPX_"))},
        }
        print("RESULT " + json.dumps(result), flush=True)


def spawn_main(rank, world, args, env):
    try:
        worker(rank, world, args, env)
    except WrongResult as e:
        print(f"FAIL (rank {rank}): {e}", file=sys.stderr, flush=True)
        raise


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--transport", default=os.environ.get("TPX_BENCH_TRANSPORT", "tpx"),
                    choices=["socket", "socket-4x4", "tpx", "tcpx", "tcpx-a3", "env"])
    ap.add_argument("--plugin", default=os.environ.get("TPX_PLUGIN_SO", ""),
                    help="path to libnccl-net-tpx.so (transport tpx) or libnccl-net-tcpx.so (tcpx)")
    ap.add_argument("--check-max", type=parse_size, default=256 * MIB,
                    help="largest size checked for exact results (default 256M; 0: none)")
    ap.add_argument("--sizes", type=size_list, default=list(TIMED_SIZES),
                    help="sizes timed (default 64M,256M)")
    ap.add_argument("--inflight", type=int_list, default=[1],
                    help="send/recv pairs in flight while timing, e.g. 1,4 (default 1)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--timeout", type=int, default=600, help="NCCL collective timeout, seconds")
    ap.add_argument("--selftest-cpu", action="store_true",
                    help="check this script on the CPU with gloo (no GPU, no NCCL)")
    args = ap.parse_args()
    if args.warmup < 0 or args.iters < 1:
        sys.exit("nccl_with_tpx: --warmup >= 0 and --iters >= 1")

    env = {} if args.selftest_cpu else transport_env(args.transport, args.plugin)
    env.setdefault("NCCL_DEBUG", os.environ.get("NCCL_DEBUG", "INFO"))
    print(f"nccl_with_tpx: transport {args.transport}: " + " ".join(f"{k}={v}" for k, v in sorted(env.items())),
          flush=True)

    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # torchrun
        world = int(os.environ["WORLD_SIZE"])
        if world != 2:
            sys.exit("nccl_with_tpx: needs exactly 2 ranks")
        spawn_main(int(os.environ["RANK"]), world, args, env)
        return

    import torch
    import torch.multiprocessing as mp

    if args.selftest_cpu:
        pass
    elif not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        sys.exit(f"nccl_with_tpx: needs 2 GPUs, found {torch.cuda.device_count() if torch.cuda.is_available() else 0}")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    mp.spawn(spawn_main, args=(2, args, env), nprocs=2, join=True)


if __name__ == "__main__":
    main()
