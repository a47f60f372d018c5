#!/usr/bin/env python3
"""NIXL's Python agent with the TPX backend over the transport TPX_NET_PLUGIN
names (on the GPU machine: Google's GPUDirect-TCPX plugin with the RxDM and
devmem stand-ins, tests/gpu/tcpx_nixl.sh), GPU memory at both ends:

  1. WRITE of 1,000 blocks of 64 KiB (non-contiguous, shuffled block-index
     lists, prepared once per side as vLLM's NixlConnector does) with a
     notification, then
  2. WRITE of one 64 MiB block with a notification,
  3. READ of that block back into a zeroed region.

The initiator runs on --init-gpu (default 0), the target in a second process
on --target-gpu (default 1, or 0 on a one-GPU machine). Every byte is
compared on the GPU that received it. Every wait is bounded; nothing but
127.0.0.1 is dialled. Exit status 0 only when every byte matched; prints one
"RESULT {json}" line (times are informational, not a benchmark).

  TPX_NET_PLUGIN=/path/libnccl-net-tcpx.so python3 tests/gpu/tcpx_nixl.py
Needs torch with CUDA and NIXL built with --cuda (PYTHONPATH, NIXL_PLUGIN_DIR:
docs/NIXL.md). --mem DRAM runs the same with numpy host memory at both ends
(the CPU check over the CUDA test doubles, ctest nixl_tcpx_real).
"""

import argparse
import json
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python", "nixl"))
from peer_process import PeerProcess  # noqa: E402

KIB = 1024
MIB = 1024 * KIB
WAIT_S = 60.0
SEED_KV, SEED_BIG = 5, 9


class Mem:
    """A registered byte region: VRAM (a torch tensor on GPU `gpu`) or DRAM
    (numpy: the CPU check over the CUDA test doubles), and the few array
    operations the checks need, on the memory's own side."""

    def __init__(self, kind, gpu, nbytes):
        self.kind, self.nbytes = kind, nbytes
        self.dev_id = gpu if kind == "VRAM" else 0
        if kind == "VRAM":
            import torch
            self.xp = torch
            torch.cuda.set_device(gpu)
            self.dev = torch.device("cuda", gpu)
            self.buf = torch.zeros(nbytes, dtype=torch.uint8, device=self.dev)
            self.addr = self.buf.data_ptr()
        else:
            import numpy
            self.xp = numpy
            self.buf = numpy.zeros(nbytes, dtype=numpy.uint8)
            self.addr = self.buf.ctypes.data

    def gen(self, seed, start, n):
        """Bytes of the source at [start, start + n): a function of the
        offset that differs between any two 64 KiB blocks, so a block landing
        in the wrong place is seen. Made 16 MiB at a time (int64 temporaries)."""
        xp, out = self.xp, self.new(n)
        for o in range(0, n, 16 * MIB):
            m = min(16 * MIB, n - o)
            if self.kind == "VRAM":
                i = xp.arange(start + o, start + o + m, dtype=xp.int64, device=self.dev)
                out[o:o + m] = (((i * 2654435761 + seed * 97) >> 13) & 0xFF).to(xp.uint8)
            else:
                i = xp.arange(start + o, start + o + m, dtype=xp.int64)
                out[o:o + m] = (((i * 2654435761 + seed * 97) >> 13) & 0xFF).astype(xp.uint8)
        return out

    def new(self, n):
        if self.kind == "VRAM":
            return self.xp.empty(n, dtype=self.xp.uint8, device=self.dev)
        return self.xp.empty(n, dtype=self.xp.uint8)

    def sync(self):
        if self.kind == "VRAM":
            self.xp.cuda.synchronize(self.dev)

    def nonzero(self, x):
        return int(self.xp.count_nonzero(x))

    def rows_differ(self, a, b):
        d = (a != b).any(1)
        return int(d.sum())

    def register(self, agent):
        return agent.register_memory([(self.addr, self.nbytes, self.dev_id, "")], self.kind)

    def descs(self, offsets, size):
        return [(self.addr + o, size, self.dev_id) for o in offsets]


def index_lists(seed, nblk):
    rng = random.Random(seed)
    return rng.sample(range(nblk), nblk), rng.sample(range(nblk), nblk)


def say(line):
    print("@@ " + line, flush=True)


def import_nixl():
    from nixl_import import nixl_agent, nixl_agent_config  # noqa: E402
    return nixl_agent, nixl_agent_config


def make_agent(name, gpu):
    nixl_agent, nixl_agent_config = import_nixl()
    agent = nixl_agent(name, nixl_agent_config(backends=[]))
    if "TPX" not in agent.get_plugin_list():
        raise SystemExit(f"tcpx_nixl: NIXL found no TPX plugin (NIXL_PLUGIN_DIR={os.environ.get('NIXL_PLUGIN_DIR')})")
    # The transport comes from TPX_NET_PLUGIN; the endpoint's GPU from "gpu".
    agent.create_backend("TPX", {"gpu": str(gpu)})
    return agent


def layout(args):
    stride = 2 * args.block  # a gap as large as each block: non-contiguous
    return stride, args.blocks * stride, args.blocks * stride + args.big


def target(args):
    from nixl_peer import wait_notif  # bounded by its WAIT_S
    stride, big_off, total = layout(args)
    mem = Mem(args.mem, args.target_gpu, total)
    agent = make_agent("target", args.target_gpu)
    reg = mem.register(agent)
    say(f"READY {mem.addr} {total} {agent.get_agent_metadata().hex()}")
    region = mem.buf
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "meta":
            agent.add_remote_agent(bytes.fromhex(arg))
            say("OK meta")
        elif cmd == "expect-kv":
            if not wait_notif(agent, b"kv"):
                say("BAD no notification kv")
                continue
            mem.sync()
            src_idx, dst_idx = index_lists(SEED_KV, args.blocks)
            src = mem.gen(SEED_KV, 0, big_off).reshape(args.blocks, stride)[:, :args.block]
            got = region[:big_off].reshape(args.blocks, stride)
            bad = mem.rows_differ(got[dst_idx, :args.block], src[src_idx])
            # The gaps between blocks must stay untouched.
            gaps = mem.nonzero(got[:, args.block:])
            if bad or gaps:
                say(f"BAD kv: {bad} of {args.blocks} blocks differ, {gaps} gap bytes written")
            else:
                say("OK kv")
        elif cmd == "expect-big":
            if not wait_notif(agent, b"big"):
                say("BAD no notification big")
                continue
            mem.sync()
            n = mem.nonzero(region[big_off:] != mem.gen(SEED_BIG, big_off, args.big))
            say("OK big" if n == 0 else f"BAD big: {n} bytes differ")
        elif cmd == "quit":
            break
    agent.deregister_memory(reg)
    say("BYE")
    return 0


class Peer(PeerProcess):
    def __init__(self, args):
        super().__init__([sys.executable, os.path.abspath(__file__), "--role", "target", "--target-gpu",
                          str(args.target_gpu), "--blocks", str(args.blocks), "--block-size", str(args.block),
                          "--big", str(args.big), "--mem", args.mem])


def run_xfer(agent, h, what):
    t0 = time.perf_counter()
    st = agent.transfer(h)
    if st not in ("PROC", "DONE"):
        raise RuntimeError(f"{what}: transfer() answered {st}")
    deadline = time.monotonic() + WAIT_S
    while st == "PROC":
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not done within {WAIT_S} s")
        st = agent.check_xfer_state(h)
    if st != "DONE":
        raise RuntimeError(f"{what}: ended {st}")
    return time.perf_counter() - t0


def report(result, failures, key, what, nbytes, secs, answer):
    """One transfer's line (its time is informational) and its verdict."""
    result[key] = secs
    print(f"{what}: {secs * 1e3:.1f} ms ({nbytes / secs / 1e9:.2f} GB/s): {answer}", flush=True)
    if not answer.startswith("OK"):
        failures.append(f"{what}: {answer}")


def initiator(args):
    stride, big_off, total = layout(args)
    peer = Peer(args)
    result = {"plugin": os.environ.get("TPX_NET_PLUGIN", "(built-in)"), "mem": args.mem, "init_gpu": args.init_gpu,
              "target_gpu": args.target_gpu, "blocks": args.blocks, "block_bytes": args.block, "big_bytes": args.big}
    failures = []
    kind = args.mem
    try:
        words = peer.line().split()
        if words[0] != "READY":
            raise RuntimeError(f"target: {' '.join(words)}")
        t_addr, t_total, t_meta = int(words[1]), int(words[2]), bytes.fromhex(words[3])
        if t_total != total:
            raise RuntimeError(f"target's region is {t_total} bytes, not {total}")
        mem = Mem(kind, args.init_gpu, total)
        region = mem.buf
        region[:big_off] = mem.gen(SEED_KV, 0, big_off)
        region[big_off:] = mem.gen(SEED_BIG, big_off, args.big)
        mem.sync()
        agent = make_agent("init", args.init_gpu)
        reg = mem.register(agent)
        agent.add_remote_agent(t_meta)
        if peer.ask("meta " + agent.get_agent_metadata().hex()) != "OK meta":
            raise RuntimeError("target did not take the initiator's metadata")
        t_dev = args.target_gpu if kind == "VRAM" else 0
        blocks = [i * stride for i in range(args.blocks)]
        # 1. 1,000 x 64 KiB, one descriptor per block, prepared once per side.
        local = agent.prep_xfer_dlist("NIXL_INIT_AGENT", mem.descs(blocks, args.block), kind)
        remote = agent.prep_xfer_dlist("target", [(t_addr + o, args.block, t_dev) for o in blocks], kind)
        src_idx, dst_idx = index_lists(SEED_KV, args.blocks)
        h = agent.make_prepped_xfer("WRITE", local, src_idx, remote, dst_idx, b"kv")
        secs = run_xfer(agent, h, f"WRITE {args.blocks} blocks")
        report(result, failures, "kv_write_s", f"WRITE {args.blocks} x {args.block // KIB} KiB {kind} -> {kind} "
               "(the first transfer: connection included)", args.blocks * args.block, secs, peer.ask("expect-kv"))
        agent.release_xfer_handle(h)
        agent.release_dlist_handle(local)
        agent.release_dlist_handle(remote)
        # 2. one large block, WRITE then READ back.
        lbig = agent.get_xfer_descs(mem.descs([big_off], args.big), kind)
        rbig = agent.get_xfer_descs([(t_addr + big_off, args.big, t_dev)], kind)
        h = agent.initialize_xfer("WRITE", lbig, rbig, "target", b"big")
        secs = run_xfer(agent, h, f"WRITE {args.big} bytes")
        report(result, failures, "big_write_s", f"WRITE {args.big // MIB} MiB {kind} -> {kind}", args.big, secs,
               peer.ask("expect-big"))
        agent.release_xfer_handle(h)
        region[big_off:] = 0
        mem.sync()
        h = agent.initialize_xfer("READ", lbig, rbig, "target")
        secs = run_xfer(agent, h, f"READ {args.big} bytes")
        mem.sync()
        n = mem.nonzero(region[big_off:] != mem.gen(SEED_BIG, big_off, args.big))
        report(result, failures, "big_read_s", f"READ {args.big // MIB} MiB {kind} <- {kind}", args.big, secs,
               "OK" if n == 0 else f"BAD {n} bytes differ")
        agent.release_xfer_handle(h)
        agent.remove_remote_agent("target")
        agent.deregister_memory(reg)
    except Exception as e:  # reported, never a hang: the target is stopped below
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        peer.close()
    result["ok"] = not failures
    result["failures"] = failures
    print("RESULT " + json.dumps(result), flush=True)
    if failures:
        print("tcpx_nixl: FAILED: " + "; ".join(failures), file=sys.stderr)
        return 1
    print(f"tcpx_nixl: every byte matched ({args.blocks} x {args.block // KIB} KiB WRITE, {args.big // MIB} MiB WRITE "
          f"and READ, {kind} at both ends)")
    return 0


def size(text):
    t = text.strip().upper()
    mult = {"K": KIB, "M": MIB}.get(t[-1:], 1)
    n = int(t[:-1] if mult > 1 else t) * mult
    if n < 4 * KIB or n % (4 * KIB):
        raise argparse.ArgumentTypeError(f"a multiple of 4 KiB, not {text!r}")
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--role", choices=["init", "target"], default="init", help=argparse.SUPPRESS)
    ap.add_argument("--init-gpu", type=int, default=0)
    ap.add_argument("--target-gpu", type=int, default=None, help="default 1, or 0 with one GPU")
    ap.add_argument("--blocks", type=int, default=1000)
    ap.add_argument("--block-size", dest="block", type=size, default=64 * KIB)
    ap.add_argument("--big", type=size, default=64 * MIB)
    ap.add_argument("--mem", choices=["VRAM", "DRAM"], default="VRAM",
                    help="VRAM (torch, the GPU machine) or DRAM (numpy: over the CUDA test doubles)")
    args = ap.parse_args()
    if not 1 <= args.blocks <= 100000:
        ap.error("--blocks: 1..100000")
    if args.target_gpu is None:
        if args.mem == "VRAM":
            import torch
            args.target_gpu = 1 if torch.cuda.device_count() >= 2 else 0
        else:
            args.target_gpu = 1
    return target(args) if args.role == "target" else initiator(args)


if __name__ == "__main__":
    sys.exit(main())
