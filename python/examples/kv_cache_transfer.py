#!/usr/bin/env python3
"""Prefill -> decode: a request's KV-cache blocks move from the prefill
process's paged cache into free, non-contiguous pages of the decode
process's cache with ONE vectored write and ONE notification.

Each cache is [num_pages, layers, 2 (K and V), block_bytes] in one
registered buffer; a request owns a list of pages. The control plane (who
sends which request where, and the descriptors) is a multiprocessing pipe
here; in a server it is the scheduler's RPC. Host memory (numpy), or CUDA
with --cuda (torch).

    python3 kv_cache_transfer.py [--cuda] [--pages 64] [--blocks 12]
"""
import argparse
import multiprocessing as mp

import numpy as np

import tpx

LAYERS, BLOCK = 4, 4096  # bytes of K (or V) of one layer for one page


def cache(pages: int, cuda: bool):
    if cuda:
        import torch
        return torch.zeros((pages, LAYERS, 2, BLOCK), dtype=torch.uint8, device="cuda")
    return np.zeros((pages, LAYERS, 2, BLOCK), np.uint8)


def page_bytes() -> int:
    return LAYERS * 2 * BLOCK


def decode(conn, pages: int, nblocks: int, cuda: bool) -> None:
    with tpx.Endpoint(port=None, listen_host="127.0.0.1", name="decode") as ep:
        kv = cache(pages, cuda)
        mem = ep.register(kv, access="w")  # prefill may write into it
        free = list(np.random.default_rng(1).permutation(pages)[:nblocks])  # scattered free pages
        conn.send((ep.conn_info, mem.descriptor, [int(p) for p in free]))
        ep.accept(30)
        n = ep.wait_notif(30)  # the data landed before the notification
        req, expect = n.msg.decode().split(":")
        got = kv[free].cpu().numpy() if cuda else kv[free]
        conn.send((req, int(got.sum()) == int(expect)))


def prefill(args) -> None:
    ctx = mp.get_context("spawn")
    conn, child = ctx.Pipe()
    dec = ctx.Process(target=decode, args=(child, args.pages, args.blocks, args.cuda))
    dec.start()
    conn_info, desc, dst_pages = conn.recv()
    with tpx.Endpoint(port=None, listen_host="127.0.0.1", name="prefill") as ep:
        kv = cache(args.pages, args.cuda)
        src_pages = list(range(5, 5 + args.blocks))  # the request's pages here
        filled = np.random.default_rng(0).integers(0, 256, (args.blocks, LAYERS, 2, BLOCK), dtype=np.uint8)
        if args.cuda:
            import torch
            kv[src_pages] = torch.from_numpy(filled).cuda()
        else:
            kv[src_pages] = filled
        mem = ep.register(kv, access="")
        peer = ep.connect(conn_info)
        # One entry per page: a page is contiguous in both caches (all layers,
        # K and V), so blocks x 1 entries; a per-layer layout would use
        # blocks x layers x 2 entries in the same single call.
        pb = page_bytes()
        peer.writev(mem, desc, [p * pb for p in src_pages], [p * pb for p in dst_pages], pb,
                    notif=f"req-42:{int(filled.sum())}".encode()).wait(30)
        req, ok = conn.recv()
    dec.join(30)
    print(f"{req}: {args.blocks} blocks of {pb} bytes -> decode pages {dst_pages[:4]}...: "
          f"{'ok' if ok and dec.exitcode == 0 else 'MISMATCH'}")
    raise SystemExit(0 if ok and dec.exitcode == 0 else 1)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cuda", action="store_true")
    ap.add_argument("--pages", type=int, default=64)
    ap.add_argument("--blocks", type=int, default=12)
    prefill(ap.parse_args())
