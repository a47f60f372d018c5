#!/usr/bin/env python3
"""Disaggregated prefill and decode of a Llama-shaped model: the prompt's
KV cache moves from the prefill process (GPU 0) into free, non-contiguous
blocks of the decode process's paged KV pool (GPU 1; GPU 0 when only one
exists) with one vectored write and a notification, and decode continues
the generation from it.

Both processes build the same model from a transformers LlamaConfig and a
fixed seed (grouped-query attention, bf16; sizes by flags). The decode side
owns the pool and registers it once, laid out as serving engines lay it out:

  --layout blocks   one tensor [num_blocks, layers, 2, block_size, kv_heads, head_dim]:
                    a block is contiguous across layers (one entry per block)
  --layout layers   vLLM's: per layer [2, num_blocks, block_size, kv_heads, head_dim],
                    K and V registered separately (2 x layers regions; one
                    entry per block per region)

Transports (--transport): `tpx` (the package: Endpoint, register, writev
with a notification) or `nixl` (NIXL's Python agent with backends=["TPX"],
driven as vLLM's NixlConnector drives it: registered regions, one
descriptor per block, prep_xfer_dlist / make_prepped_xfer with block ids,
transfer, check_xfer_state, notifications; needs NIXL_PLUGIN_DIR).
--nixl-backend UCX drives NIXL's own UCX backend the same way (for
comparison; over TCP it needs UCX_TLS=tcp,cuda_copy and a UCX built with
CUDA).

With --check (the default) prefill also continues the generation itself
from the same cache and the run fails unless decode's greedy tokens and its
first step's logits are bitwise the same. Prints one line per request and
"ok" at the end.

    python3 disagg_serving.py [--transport tpx|nixl] [--nixl-backend TPX|UCX] [--prompt-lens 100,256,1000]
        [--layers 4 --hidden 512 --heads 8 --kv-heads 2 --head-dim 64] [--block-size 16]
"""
import argparse
import multiprocessing as mp
import os
import signal
import sys
import threading
import time

DONE, FAILED = "ok", "FAILED"


# -- the model (the same seeded weights in every process) --------------------

def build_model(a):
    import torch
    import transformers
    cfg = transformers.LlamaConfig(
        vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.ffn, num_hidden_layers=a.layers,
        num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, head_dim=a.head_dim,
        max_position_embeddings=max(a.prompt_lens) + a.new_tokens + 1, rope_theta=500000.0)
    torch.manual_seed(a.seed)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    # Same seed, same kernels: the same weights. Say so if not (the check would fail later).
    checksum = sum(float(p.detach().float().sum()) for p in model.parameters())
    return model, checksum


def cache_layers(cache):
    """(K, V) per layer, each [1, kv_heads, seq, head_dim], of a transformers cache."""
    if hasattr(cache, "layers"):
        return [(lay.keys, lay.values) for lay in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache))


def make_cache(kvs):
    from transformers import DynamicCache
    cache = DynamicCache()
    for i, (k, v) in enumerate(kvs):
        cache.update(k, v, i)
    return cache


def step(model, cache, token):
    """One decode step: logits of the next token (bf16, on the GPU)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    ids = torch.tensor([[token]], device="cuda")
    # Not cuDNN's attention: the same inputs must give the same logits bitwise
    # in both processes (the check below).
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
        return model(input_ids=ids, past_key_values=cache, use_cache=True).logits[0, -1]


def digest(kvs):
    """A position-sensitive checksum of a request's cache (bytes equal or not)."""
    import torch
    h = 0
    for k, v in kvs:
        for t in (k, v):
            x = t.reshape(-1).view(torch.int16).to(torch.int64)
            w = torch.arange(1, x.numel() + 1, device=x.device, dtype=torch.int64) % 65521
            h = (h * 1000003 + int((x * w).sum())) % (1 << 61)
    return h


def generate(model, cache, first, n):
    """Greedy continuation from `first`; the first step's logits and the tokens."""
    logits = step(model, cache, first)
    toks, first_logits = [int(logits.argmax())], logits
    for _ in range(n - 1):
        toks.append(int(step(model, cache, toks[-1]).argmax()))
    return first_logits, toks


# -- the paged KV pool ----------------------------------------------------------

def nbytes(t):
    return t.numel() * t.element_size()


def seg(t):
    """NIXL's memory type of a tensor."""
    return "VRAM" if t.is_cuda else "DRAM"


class Pool:
    """A paged KV pool on the current GPU, in one of two layouts (module doc).

    regions: the tensors a transport registers; block_bytes: bytes of one
    block in one region (a block of a request is the same block id in every
    region)."""

    def __init__(self, a, num_blocks):
        import torch
        self.layout, self.bs, self.nb, self.L = a.layout, a.block_size, num_blocks, a.layers
        shape = (a.block_size, a.kv_heads, a.head_dim)
        if a.layout == "blocks":
            self.t = torch.zeros((num_blocks, a.layers, 2) + shape, dtype=torch.bfloat16, device="cuda")
            self.kv = [(self.t[:, i, 0], self.t[:, i, 1]) for i in range(a.layers)]
            self.regions = [self.t]
        else:
            self.t = [torch.zeros((2, num_blocks) + shape, dtype=torch.bfloat16, device="cuda")
                      for _ in range(a.layers)]
            self.kv = [(t[0], t[1]) for t in self.t]
            self.regions = [x for kv in self.kv for x in kv]
        self.block_bytes = nbytes(self.regions[0]) // num_blocks
        self.free = list(range(num_blocks))

    def bytes_for(self, nblocks):
        return nblocks * self.block_bytes * len(self.regions)

    def alloc(self, n, rng):
        """n free blocks, scattered as a long-running server's free list is."""
        if n > len(self.free):
            raise RuntimeError(f"pool full: {n} blocks asked, {len(self.free)} free")
        rng.shuffle(self.free)
        out, self.free = self.free[:n], self.free[n:]
        return out

    def release(self, blocks):
        self.free.extend(blocks)

    def scatter(self, kvs, blocks):
        """Write a request's cache (K, V per layer, [1, H, S, D]) into its blocks."""
        import torch
        idx = torch.tensor(blocks, device="cuda")
        for (pk, pv), (k, v) in zip(self.kv, kvs):
            for dst, src in ((pk, k), (pv, v)):
                s = src[0].transpose(0, 1)  # [S, H, D]
                pad = len(blocks) * self.bs - s.shape[0]
                s = torch.nn.functional.pad(s, (0, 0, 0, 0, 0, pad))
                dst[idx] = s.reshape((len(blocks), self.bs) + s.shape[1:])

    def gather(self, blocks, seq):
        """The cache of a request from its blocks: (K, V) per layer, [1, H, S, D], contiguous."""
        import torch
        idx = torch.tensor(blocks, device="cuda")

        def one(p):
            x = p[idx].reshape((-1,) + tuple(p.shape[2:]))[:seq]
            return x.transpose(0, 1).unsqueeze(0).contiguous()
        return [(one(pk), one(pv)) for pk, pv in self.kv]


# -- transports: the decode side (target) and the prefill side (initiator) ------

def nixl_api():
    for mod in ("nixl._api", "nixl_cu13._api", "nixl_cu12._api"):
        try:
            m = __import__(mod, fromlist=["nixl_agent"])
            return m.nixl_agent, m.nixl_agent_config
        except ImportError:
            pass
    raise SystemExit("NIXL's Python package is not importable (docs/NIXL.md: build and PYTHONPATH)")


class TpxDecode:
    def __init__(self, pool, a):
        import tpx
        self.tpx = tpx
        self.ep = tpx.Endpoint(port=None, listen_host="127.0.0.1", name="decode")
        t0 = time.perf_counter()
        self.mems = [self.ep.register(r, access="w") for r in pool.regions]  # once, for the process's life
        self.reg_s = time.perf_counter() - t0
        self.peer = None

    def hello(self):
        return {"conn_info": self.ep.conn_info, "descs": [m.descriptor for m in self.mems]}

    def accept(self, _info):
        self.peer = self.ep.accept(30)

    def wait(self, req, deadline, _blocks=None):
        """The notification of request `req` (the data landed before it)."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"request {req}: no notification within the deadline")
            try:
                n = self.ep.wait_notif(min(left, 0.05))
            except self.tpx.TimedOut:
                if not self.peer.ok:  # prefill died or its connection broke
                    raise RuntimeError(f"request {req}: prefill peer failed ({self.peer.status}) "
                                       "before its notification") from None
                continue
            if n.msg.split(b":")[0] == req.encode():
                return n.msg

    def close(self):
        self.ep.close()


class TpxPrefill:
    def __init__(self, pool, a):
        import tpx
        self.ep = tpx.Endpoint(port=None, listen_host="127.0.0.1", name="prefill")
        self.mems = [self.ep.register(r, access="") for r in pool.regions]
        self.pool = pool

    def connect(self, hello):
        import tpx
        self.peer = self.ep.connect(hello["conn_info"])
        self.remote = [tpx.RemoteMemory(d) for d in hello["descs"]]
        return None

    def send(self, req, src, dst, msg, timeout):
        """One vectored write of every block of every region, then the notification."""
        import numpy as np
        bb, R = self.pool.block_bytes, len(self.mems)
        lo = np.tile(np.asarray(src, np.uint64) * bb, R)
        ro = np.tile(np.asarray(dst, np.uint64) * bb, R)
        loc = [m for m in self.mems for _ in src] if R > 1 else self.mems[0]
        rem = [r for r in self.remote for _ in dst] if R > 1 else self.remote[0]
        n, cap = len(lo), 32768  # entries per transfer (TPX_XFER_MAX_IOV)
        if n <= cap:
            self.peer.writev(loc, rem, lo, ro, bb, notif=msg).wait(timeout)
            return
        sl = (lambda x, i: x[i:i + cap]) if R > 1 else (lambda x, i: x)
        xs = [self.peer.writev(sl(loc, i), sl(rem, i), lo[i:i + cap], ro[i:i + cap], bb)
              for i in range(0, n, cap)]
        self.peer.notify(msg)  # delivered after every write posted before it
        for x in xs:
            x.wait(timeout)

    def close(self):
        self.ep.close()


class NixlDecode:
    def __init__(self, pool, a):
        agent, config = nixl_api()
        self.agent = agent("decode", config(backends=[a.nixl_backend]))
        t0 = time.perf_counter()
        # vLLM's register_kv_caches: every region once, then its metadata to the peer.
        self.descs = self.agent.get_reg_descs(
            [(r.data_ptr(), nbytes(r), 0, "") for r in pool.regions], seg(pool.regions[0]))
        self.agent.register_memory(self.descs)
        self.reg_s = time.perf_counter() - t0
        self.pool = pool

    def hello(self):
        return {"meta": self.agent.get_agent_metadata(), "bases": [r.data_ptr() for r in self.pool.regions]}

    def accept(self, _info):
        pass

    def wait(self, req, deadline, _blocks=None):
        key = req.encode()
        while time.monotonic() < deadline:
            for msgs in self.agent.get_new_notifs().values():
                for m in msgs:
                    if m.split(b":")[0] == key:
                        return m
            time.sleep(0.0002)
        raise TimeoutError(f"request {req}: no notification within the deadline")

    def close(self):
        self.agent.deregister_memory(self.descs)


class NixlPrefill:
    def __init__(self, pool, a):
        agent, config = nixl_api()
        self.agent = agent("prefill", config(backends=[a.nixl_backend]))
        self.descs = self.agent.get_reg_descs([(r.data_ptr(), nbytes(r), 0, "") for r in pool.regions],
                                              seg(pool.regions[0]))
        self.agent.register_memory(self.descs)
        self.pool = pool

    def connect(self, hello):
        p, bb = self.pool, self.pool.block_bytes
        self.remote_name = self.agent.add_remote_agent(hello["meta"])
        # One descriptor per block per region, prepared once (NixlConnector's
        # src / dst xfer side handles); descriptor id = region * num_blocks + block.
        self.local = self.agent.prep_xfer_dlist(
            "NIXL_INIT_AGENT", [(r.data_ptr() + b * bb, bb, 0) for r in p.regions for b in range(p.nb)], seg(p.regions[0]))
        self.remote = self.agent.prep_xfer_dlist(
            self.remote_name, [(base + b * bb, bb, 0) for base in hello["bases"] for b in range(p.nb)],
            seg(p.regions[0]))
        return None

    def send(self, req, src, dst, msg, timeout):
        nb, R = self.pool.nb, len(self.pool.regions)
        h = self.agent.make_prepped_xfer("WRITE", self.local, [r * nb + b for r in range(R) for b in src],
                                         self.remote, [r * nb + b for r in range(R) for b in dst], msg)
        try:
            st = self.agent.transfer(h)
            deadline = time.monotonic() + timeout
            while st == "PROC" and time.monotonic() < deadline:
                st = self.agent.check_xfer_state(h)
            if st != "DONE":
                raise RuntimeError(f"request {req}: NIXL transfer state {st}")
        finally:
            self.agent.release_xfer_handle(h)

    def close(self):
        self.agent.release_dlist_handle(self.local)
        self.agent.release_dlist_handle(self.remote)
        self.agent.remove_remote_agent(self.remote_name)
        self.agent.deregister_memory(self.descs)


TRANSPORTS = {"tpx": (TpxPrefill, TpxDecode), "nixl": (NixlPrefill, NixlDecode)}


# -- the two processes -----------------------------------------------------------

def pool_blocks(a):
    per = -(-(max(a.prompt_lens)) // a.block_size)
    return a.pool_blocks or per * 5 // 4 + 8


def timeout_s():
    return int(os.environ.get("TPX_TIMEOUT_MS", "30000")) / 1000


def decode_main(a, conn, results, transports):
    """Owns the pool; per request: blocks out, notification in, cache rebuilt, tokens."""
    import random
    import torch
    try:
        model, checksum = build_model(a)
        pool = Pool(a, pool_blocks(a))
        side = transports[a.transport][1](pool, a)
        conn.send(("hello", side.hello(), checksum, side.reg_s))
        side.accept(conn.recv())
        rng = random.Random(a.seed + 1)
        while True:
            cmd = conn.recv()
            if cmd[0] == "quit":
                break
            _, req, seq, full = cmd
            blocks = pool.alloc(-(-seq // pool.bs), rng)
            conn.send(blocks)
            if a.kill == "decode":  # the test: die once the first bytes landed
                first = pool.regions[0][blocks[0]]
                t_end = time.monotonic() + timeout_s()
                while not first.any() and time.monotonic() < t_end:
                    time.sleep(0.0005)
                os.kill(os.getpid(), signal.SIGKILL)
            t_wait = time.monotonic_ns()
            try:
                msg = side.wait(req, time.monotonic() + timeout_s(), blocks)
            except Exception as e:
                raise RuntimeError(f"{e} (after {(time.monotonic_ns() - t_wait) / 1e6:.0f} ms)") from e
            t_got = time.monotonic_ns()
            first_tok = int(msg.split(b":")[1])
            with torch.inference_mode():
                kvs = pool.gather(blocks, seq)
                cache = make_cache(kvs)
                logits = step(model, cache, first_tok)
                tok = int(logits.argmax())  # .item(): the first decoded token is on the host
                t_tok = time.monotonic_ns()
                toks, dg = [tok], None
                if full:
                    dg = digest(kvs)
                    for _ in range(a.new_tokens - 1):
                        toks.append(int(step(model, cache, toks[-1]).argmax()))
            del kvs, cache
            pool.release(blocks)
            results.put(("decode", req, toks, logits.view(torch.int16).cpu().numpy().tobytes(), t_got, t_tok, dg))
        side.close()
    except Exception as e:  # reported, never a silent hang of the other side
        results.put(("error", "decode", f"{type(e).__name__}: {e}"))
        raise


def prefill_main(a, conn, results, transports):
    """Runs each prompt, writes its cache into decode's blocks, notifies."""
    import random
    import torch
    try:
        model, checksum = build_model(a)
        pool = Pool(a, pool_blocks(a))
        side = transports[a.transport][0](pool, a)
        _, hello, dec_sum, reg_s = conn.recv()
        if dec_sum != checksum:
            raise RuntimeError(f"weights differ between the processes ({checksum} != {dec_sum})")
        conn.send(side.connect(hello))
        rng = random.Random(a.seed + 2)
        for i, seq in enumerate(a.prompt_lens):
            g = torch.Generator().manual_seed(a.seed * 1000 + i)
            prompt = torch.randint(0, a.vocab, (1, seq), generator=g).cuda()
            with torch.inference_mode():
                out = model(input_ids=prompt, use_cache=True, logits_to_keep=1)
                first = int(out.logits[0, -1].argmax())  # prefill emits the first token
                blocks = pool.alloc(-(-seq // pool.bs), rng)
                pool.scatter(cache_layers(out.past_key_values), blocks)
                del out
                ref = None
                if a.check:  # prefill's own continuation, from the same paged cache
                    dg = digest(pool.gather(blocks, seq))
                    lg, toks = generate(model, make_cache(pool.gather(blocks, seq)), first, a.new_tokens)
                    local = []
                    for _ in range(3):  # what the first decode step costs here, warm
                        t0 = time.perf_counter()
                        int(step(model, make_cache(pool.gather(blocks, seq)), first).argmax())
                        local.append(time.perf_counter() - t0)
                    local_s = sorted(local)[1]
                    ref = (toks, lg.view(torch.int16).cpu().numpy().tobytes(), local_s, dg)
            torch.cuda.synchronize()
            for r in range(a.repeat):
                req = f"req{i}.{r}"
                conn.send(("req", req, seq, r == 0))
                dst = conn.recv()
                t_ready = time.monotonic_ns()
                if a.kill == "prefill":  # the test: die with the write in flight
                    threading.Timer(0.005, os.kill, (os.getpid(), signal.SIGKILL)).start()
                try:
                    side.send(req, blocks, dst, f"{req}:{first}".encode(), timeout_s())
                except Exception as e:
                    raise RuntimeError(f"{e} (after {(time.monotonic_ns() - t_ready) / 1e6:.0f} ms)") from e
                t_done = time.monotonic_ns()
                results.put(("prefill", req, seq, pool.bytes_for(len(blocks)), t_ready, t_done, ref if r == 0 else None))
            pool.release(blocks)
        conn.send(("quit",))
        side.close()
        results.put(("prefill_done", reg_s))
    except Exception as e:
        results.put(("error", "prefill", f"{type(e).__name__}: {e}"))
        raise


def spawn(ctx, target, gpu, args):
    """A child process on one GPU (CUDA_VISIBLE_DEVICES: it sees it as cuda:0)."""
    old = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    try:
        p = ctx.Process(target=target, args=args, daemon=True)
        p.start()
    finally:
        if old is None:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = old
    return p


def run(a, transports=TRANSPORTS, report=print):
    """Start both processes, collect and check; returns (ok, rows, errors)."""
    ctx = mp.get_context("spawn")
    pc, dc = ctx.Pipe()
    results = ctx.Queue()
    gpus = a.gpus
    dec = spawn(ctx, decode_main, gpus[1], (a, dc, results, transports))
    pre = spawn(ctx, prefill_main, gpus[0], (a, pc, results, transports))
    pending, rows, errors, ok = {}, [], [], True
    deadline = time.monotonic() + a.wait
    expected = len(a.prompt_lens) * a.repeat
    done = False
    while time.monotonic() < deadline and not (done and len(rows) == expected) and len(errors) < 2:
        try:
            m = results.get(timeout=0.5)
        except Exception:
            if not pre.is_alive() and not dec.is_alive():
                break
            if errors and not (pre.is_alive() and dec.is_alive()):
                break
            continue
        if m[0] == "error":
            errors.append(f"{m[1]}: {m[2]}")
            report(f"{m[1]} failed: {m[2]}")
            continue
        if m[0] == "prefill_done":
            done = True
            continue
        pending.setdefault(m[1], {})[m[0]] = m
        if len(pending[m[1]]) == 2:
            row = check_row(a, pending.pop(m[1]), report)
            ok &= row["ok"]
            rows.append(row)
    for name, p in (("prefill", pre), ("decode", dec)):
        p.join(10)
        if p.is_alive():
            p.kill()
            p.join(5)
        elif p.exitcode and not any(e.startswith(name) for e in errors):
            errors.append(f"{name}: exited with status {p.exitcode}")
    ok = ok and not errors and len(rows) == expected
    return ok, rows, errors


def check_row(a, d, report):
    _, req, seq, nb, t_ready, t_done, ref = d["prefill"]
    _, _, toks, logits, t_got, t_tok, dg = d["decode"]
    row = {"req": req, "seq": seq, "bytes": nb, "xfer_ms": (t_done - t_ready) / 1e6,
           "notif_ms": (t_got - t_ready) / 1e6, "first_tok_ms": (t_tok - t_ready) / 1e6, "ok": True}
    line = (f"{req}: {seq} tokens, {nb / 1e6:.1f} MB in {row['xfer_ms']:.2f} ms "
            f"({nb / (t_done - t_ready):.2f} GB/s), first decoded token {row['first_tok_ms']:.2f} ms after the cache was ready")
    if ref is not None:
        rtoks, rlogits, local_s, rdg = ref
        row["local_ms"] = local_s * 1e3
        same = sum(x == y for x, y in zip(toks, rtoks)) if len(toks) == len(rtoks) else 0
        row["ok"] = toks == rtoks and logits == rlogits and dg == rdg
        line += (f"; cache bytes {'equal' if dg == rdg else 'DIFFER'}, tokens {same}/{len(rtoks)} equal, first-step logits "
                 f"{'bitwise equal' if logits == rlogits else 'DIFFER'}")
        if not row["ok"]:
            import numpy as np
            x, y = (np.frombuffer(b, np.int16) for b in (logits, rlogits))
            line += f" (decode {toks} prefill {rtoks}; {int((x != y).sum())} logits differ)"
    report(line)
    return row


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--transport", choices=sorted(TRANSPORTS), default="tpx")
    ap.add_argument("--nixl-backend", choices=["TPX", "UCX"], default="TPX",
                    help="the NIXL backend of --transport nixl")
    ap.add_argument("--layout", choices=["blocks", "layers"], default="blocks")
    ap.add_argument("--prompt-lens", default="100,256,1000", help="comma-separated prompt lengths (tokens)")
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--ffn", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--pool-blocks", type=int, default=0, help="decode pool size (default: 1.25x the longest)")
    ap.add_argument("--repeat", type=int, default=1, help="transfers per prompt (the first one is checked)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--gpus", default="", help="prefill,decode GPU (default 0,1 with two GPUs, else 0,0)")
    ap.add_argument("--no-check", dest="check", action="store_false")
    ap.add_argument("--kill", choices=["", "prefill", "decode"], default="", help=argparse.SUPPRESS)
    ap.add_argument("--wait", type=float, default=600, help="seconds the whole run may take")
    a = ap.parse_args(argv)
    a.prompt_lens = [int(x) for x in a.prompt_lens.split(",")]
    if not a.gpus:
        import torch
        a.gpus = "0,1" if torch.cuda.device_count() > 1 else "0,0"
    a.gpus = [int(g) for g in a.gpus.split(",")]
    return a


if __name__ == "__main__":
    args = parse()
    good, _, errs = run(args)
    print(DONE if good else FAILED)
    sys.exit(0 if good else 1)
