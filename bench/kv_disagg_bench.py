#!/usr/bin/env python3
"""What a disaggregated-serving request pays for moving its KV cache, through
tpx, NIXL/TPX and PyTorch's NCCL send/recv, side by side in one run.

Runs python/examples/disagg_serving.py (prefill on GPU 0, decode on GPU 1;
one GPU: both on it) for each transport and prompt length, the request's
cache written --repeat times into fresh scattered blocks of decode's pool:

  tpx          the tpx package: one vectored write + notification
  nixl         NIXL's Python agent, backends=["TPX"], as vLLM's NixlConnector
  nixl-ucx     the same with NIXL's UCX backend over TCP (UCX_TLS=tcp,cuda_copy,
               UCX_NET_DEVICES=lo unless set; needs a UCX built with CUDA:
               scripts/build-testdeps.sh --cuda --ucx)
  nccl-socket  torch.distributed NCCL send/recv over NCCL's Socket transport
               (NCCL_NET=Socket, NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1: TCP)
  nccl-socket-4x4  the same with NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4
  nccl-tpx     the same over our libnccl-net-tpx.so (--plugin)

NCCL moves the same blocks the way a NCCL-based KV connector does: gathered
into one buffer on prefill, one send, one recv, scattered into decode's
blocks (the gather and the scatter are counted).

Per transport and prompt length: KV bytes per request, transfer time p50 /
p99 (from prefill's cache being ready to the bytes being usable on decode:
notification received, or recv + scatter done), effective GB/s (bytes / p50;
1e9 bytes/s), and the time added to the first decoded token (decode's first
token after the cache was ready, minus what the same step costs prefill
locally). The cache shape is Llama-3-8B's by default (32 layers, 8 KV heads,
head dim 128, bf16: 128 KiB per token); the model's other sizes are small.

  bench/kv_disagg_bench.py [--transports tpx,nixl,nccl-socket,nccl-tpx]
      [--prompt-lens 1024,4096,16384] [--repeat 10] [--layout blocks|layers]
      [--plugin build/libnccl-net-tpx.so] [--json FILE]
  bench/kv_disagg_bench.py --registration [--reg-gib 32] [--rounds 5]
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python", "examples"))
sys.path.insert(0, HERE)

import disagg_serving as ds  # noqa: E402


class NcclDecode:
    """recv of the whole request into one buffer, scattered into its blocks."""

    def __init__(self, pool, a):
        import torch
        import torch.distributed as dist
        dist.init_process_group("nccl", rank=1, world_size=2, device_id=torch.device("cuda:0"))
        self.dist, self.torch, self.pool, self.reg_s = dist, torch, pool, 0.0
        self.buf = torch.empty(pool.bytes_for(-(-max(a.prompt_lens) // a.block_size)), dtype=torch.uint8,
                               device="cuda")
        self.tok = torch.zeros(1, dtype=torch.int64, device="cuda")
        self.views = [r.view(torch.uint8).view(pool.nb, pool.block_bytes) for r in pool.regions]

    def hello(self):
        return {}

    def accept(self, _info):
        pass

    def wait(self, req, deadline, blocks):
        torch = self.torch
        n = len(blocks) * self.pool.block_bytes
        self.dist.recv(self.buf[:n * len(self.views)], src=0)
        self.dist.recv(self.tok, src=0)
        idx = torch.tensor(blocks, device="cuda")
        for i, v in enumerate(self.views):
            v[idx] = self.buf[i * n:(i + 1) * n].view(len(blocks), -1)
        first = int(self.tok.item())  # synchronises: the blocks are in place
        return f"{req}:{first}".encode()

    def close(self):
        self.dist.destroy_process_group()


class NcclPrefill:
    def __init__(self, pool, a):
        import torch
        import torch.distributed as dist
        dist.init_process_group("nccl", rank=0, world_size=2, device_id=torch.device("cuda:0"))
        self.dist, self.torch, self.pool = dist, torch, pool
        self.buf = torch.empty(pool.bytes_for(-(-max(a.prompt_lens) // a.block_size)), dtype=torch.uint8,
                               device="cuda")
        self.views = [r.view(torch.uint8).view(pool.nb, pool.block_bytes) for r in pool.regions]

    def connect(self, _hello):
        return None

    def send(self, req, src, dst, msg, timeout):
        torch = self.torch
        n = len(src) * self.pool.block_bytes
        idx = torch.tensor(src, device="cuda")
        for i, v in enumerate(self.views):
            self.buf[i * n:(i + 1) * n].view(len(src), -1).copy_(v[idx])
        self.dist.send(self.buf[:n * len(self.views)], dst=1)
        self.dist.send(torch.tensor([int(msg.split(b":")[1])], dtype=torch.int64, device="cuda"), dst=1)
        torch.cuda.synchronize()

    def close(self):
        self.dist.destroy_process_group()


TRANSPORTS = dict(ds.TRANSPORTS, **{t: (NcclPrefill, NcclDecode) for t in ("nccl-socket", "nccl-socket-4x4", "nccl-tpx")})
NCCL_NET = {"nccl-socket": "socket", "nccl-socket-4x4": "socket-4x4", "nccl-tpx": "tpx"}


def pct(v, q):
    s = sorted(v)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def bench_transport(t, args, out):
    from nccl_with_tpx import free_port, transport_env
    saved = dict(os.environ)
    if t.startswith("nccl"):
        os.environ.update(transport_env(NCCL_NET[t], args.plugin))
        os.environ.setdefault("TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING", "false")
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    kind, extra = t, []
    if t == "nixl-ucx":
        # Over TCP only (no cuda_ipc / shared memory between the two GPUs):
        # device memory goes through host buffers (cuda_copy), as between nodes.
        os.environ.setdefault("UCX_TLS", "tcp,cuda_copy")
        os.environ.setdefault("UCX_NET_DEVICES", "lo")
        kind, extra = "nixl", ["--nixl-backend", "UCX"]
    a = ds.parse(["--transport", kind if kind in ds.TRANSPORTS else "tpx"] + extra + args.model_args)
    a.transport = kind
    a.gpus = args.gpus
    t0 = time.monotonic()
    try:
        ok, rows, errors = ds.run(a, TRANSPORTS, report=lambda s: print(s) if "DIFFER" in s else None)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    wall = time.monotonic() - t0
    if not ok:
        print(f"{t}: FAILED {errors}", flush=True)
        out.append({"transport": t, "failed": errors or "wrong result"})
        return
    for seq in a.prompt_lens:
        rs = [r for r in rows if r["seq"] == seq]
        rs_t = [r for r in rs if not r["req"].endswith(".0")] or rs  # the first one warms up
        xfer = [r["notif_ms"] for r in rs_t]
        local = next(r["local_ms"] for r in rs if "local_ms" in r)
        added = [r["first_tok_ms"] - local for r in rs_t]
        nbytes = rs[0]["bytes"]
        row = {"transport": t, "tokens": seq, "kv_bytes": nbytes, "n": len(xfer),
               "xfer_p50_ms": statistics.median(xfer), "xfer_p99_ms": pct(xfer, 0.99),
               "gbps": nbytes / statistics.median(xfer) / 1e6,
               "prefill_done_p50_ms": statistics.median([r["xfer_ms"] for r in rs_t]),
               "ttft_added_p50_ms": statistics.median(added), "ttft_added_p99_ms": pct(added, 0.99),
               "local_first_step_ms": local}
        out.append(row)
        print(f"{t:>12} {seq:>6} {nbytes / 1e9:8.3f} {row['xfer_p50_ms']:9.2f} {row['xfer_p99_ms']:9.2f} "
              f"{row['gbps']:7.2f} {row['ttft_added_p50_ms']:9.2f} {row['ttft_added_p99_ms']:9.2f}  ({wall:.0f} s)",
              flush=True)


def registration(args):
    """Register / deregister a vLLM-shaped KV cache (2 x layers tensors) through
    tpx and NIXL/TPX, cold (first on the endpoint / agent) and repeated."""
    import torch
    L = args.layers
    per = (args.reg_gib << 30) // (2 * L)
    ts = [torch.empty(per, dtype=torch.uint8, device="cuda") for _ in range(2 * L)]
    print(f"# registration: {2 * L} tensors of {per / 2**30:.2f} GiB, {args.rounds} rounds; ms per set")
    res = {}
    if "tpx" in args.transports:
        import tpx
        with tpx.Endpoint(port=None, listen_host="127.0.0.1") as ep:
            reg, dereg = [], []
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                ms = [ep.register(t, access="rw") for t in ts]
                t1 = time.perf_counter()
                for m in ms:
                    m.deregister()
                t2 = time.perf_counter()
                reg.append((t1 - t0) * 1e3)
                dereg.append((t2 - t1) * 1e3)
            res["tpx"] = (reg, dereg)
    if "nixl" in args.transports:
        agent, config = ds.nixl_api()
        t0 = time.perf_counter()
        ag = agent("reg", config(backends=["TPX"]))
        create = (time.perf_counter() - t0) * 1e3
        reg, dereg = [], []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            d = ag.get_reg_descs([(t.data_ptr(), ds.nbytes(t), 0, "") for t in ts], "VRAM")
            ag.register_memory(d)
            t1 = time.perf_counter()
            ag.deregister_memory(d)
            t2 = time.perf_counter()
            reg.append((t1 - t0) * 1e3)
            dereg.append((t2 - t1) * 1e3)
        res["nixl"] = (reg, dereg)
        print(f"# nixl agent creation (backend TPX): {create:.1f} ms")
    for k, (reg, dereg) in res.items():
        print(f"{k:>6} register cold {reg[0]:8.2f}  repeated median {statistics.median(reg[1:]):8.2f} max "
              f"{max(reg[1:]):8.2f} | deregister first {dereg[0]:8.2f} repeated median "
              f"{statistics.median(dereg[1:]):8.2f} max {max(dereg[1:]):8.2f}", flush=True)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--transports", default="tpx,nixl,nccl-socket,nccl-tpx")
    ap.add_argument("--prompt-lens", default="1024,4096,16384")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--layout", default="blocks", choices=["blocks", "layers"])
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--plugin", default=os.environ.get("TPX_PLUGIN_SO", ""))
    ap.add_argument("--gpus", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--registration", action="store_true")
    ap.add_argument("--reg-gib", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    args.transports = args.transports.split(",")
    if args.registration:
        r = registration(args)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(r, f)
        return 0
    # Llama-3-8B's cache shape on a small model (hidden 1024, 8 heads of 128).
    args.model_args = ["--prompt-lens", args.prompt_lens, "--repeat", str(args.repeat + 1), "--layout",
                       args.layout, "--block-size", str(args.block_size), "--layers", str(args.layers),
                       "--hidden", "1024", "--ffn", "2048", "--heads", "8", "--kv-heads", "8",
                       "--head-dim", "128", "--new-tokens", "4"]
    import torch
    args.gpus = [int(g) for g in (args.gpus or ("0,1" if torch.cuda.device_count() > 1 else "0,0")).split(",")]
    print(f"# kv_disagg_bench {time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}, GPUs {args.gpus}, "
          f"{os.cpu_count()} CPUs, layout {args.layout}, block {args.block_size} tokens, {args.layers} layers x 8 "
          f"KV heads x 128 bf16, {args.repeat} timed of {args.repeat + 1}")
    print(f"{'transport':>12} {'tokens':>6} {'KV GB':>8} {'p50 ms':>9} {'p99 ms':>9} {'GB/s':>7} "
          f"{'+TTFT p50':>9} {'+TTFT p99':>9}")
    out = []
    for t in args.transports:
        bench_transport(t, args, out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if all("failed" not in r for r in out) else 1


if __name__ == "__main__":
    sys.exit(main())
