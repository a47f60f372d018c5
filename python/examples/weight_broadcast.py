#!/usr/bin/env python3
"""RL-style weight sync: a trainer process pushes a model's named tensors
to two inference processes after every training step.

Each inference process keeps its weights in one registered buffer and sends
the trainer its descriptor and its layout (name -> offset). The trainer
writes every tensor with one vectored write per receiver and attaches the
version as the notification; the receivers swap in the new version when it
arrives, and acknowledge it so that the trainer does not overwrite weights
still being loaded (a real engine would double-buffer instead). Host
memory (numpy), or CUDA with --cuda (torch).

    python3 weight_broadcast.py [--cuda] [--steps 3] [--receivers 2]
"""
import argparse
import multiprocessing as mp

import numpy as np

import tpx

SHAPES = {"embed": (512, 64), "layer0.attn": (64, 192), "layer0.mlp": (64, 256), "head": (64, 512)}


def layout():
    offs, off = {}, 0
    for name, shape in SHAPES.items():
        offs[name] = off
        off += int(np.prod(shape)) * 4  # float32
    return offs, off


def weights(step: int):
    rng = np.random.default_rng(step)
    return {n: rng.standard_normal(s).astype(np.float32) for n, s in SHAPES.items()}


def buffer(nbytes: int, cuda: bool):
    if cuda:
        import torch
        return torch.zeros(nbytes, dtype=torch.uint8, device="cuda")
    return np.zeros(nbytes, np.uint8)


def inference(conn, rank: int, steps: int, cuda: bool) -> None:
    offs, total = layout()
    with tpx.Endpoint(port=None, listen_host="127.0.0.1", name=f"infer{rank}") as ep:
        buf = buffer(total, cuda)
        mem = ep.register(buf, access="w")
        conn.send((ep.conn_info, mem.descriptor, offs))
        trainer_peer = ep.accept(30)
        ok = True
        for _ in range(steps):
            version = int(ep.wait_notif(30).msg)  # all tensors of this version landed
            host = buf.cpu().numpy() if cuda else buf
            for name, want in weights(version).items():
                got = host[offs[name]:offs[name] + want.nbytes].view(np.float32).reshape(want.shape)
                ok &= bool(np.array_equal(got, want))
            trainer_peer.notify(b"loaded %d" % version)  # the buffer may be overwritten now
        conn.send(ok)


def trainer(args) -> None:
    ctx = mp.get_context("spawn")
    pipes, procs = [], []
    for r in range(args.receivers):
        a, b = ctx.Pipe()
        procs.append(ctx.Process(target=inference, args=(b, r, args.steps, args.cuda)))
        procs[-1].start()
        pipes.append(a)
    with tpx.Endpoint(port=None, listen_host="127.0.0.1", name="trainer") as ep:
        offs, total = layout()
        staging = buffer(total, args.cuda)  # the trainer's packed copy of the weights
        mem = ep.register(staging, access="")
        targets = []
        for p in pipes:
            conn_info, desc, their_offs = p.recv()
            targets.append((ep.connect(conn_info), desc, their_offs))
        for step in range(args.steps):
            for name, w in weights(step).items():  # "training" produced new weights
                raw = w.view(np.uint8).ravel()
                if args.cuda:
                    import torch
                    staging[offs[name]:offs[name] + raw.size] = torch.from_numpy(raw).cuda()
                else:
                    staging[offs[name]:offs[name] + raw.size] = raw
            names = list(SHAPES)
            sizes = [int(np.prod(SHAPES[n])) * 4 for n in names]
            xfers = [peer.writev(mem, desc, [offs[n] for n in names], [their[n] for n in names], sizes,
                                 notif=str(step).encode()) for peer, desc, their in targets]
            for x in xfers:  # both receivers are fed at once
                x.wait(30)
            acks = sorted(ep.wait_notif(30).peer_name for _ in targets)
            assert acks == sorted(f"infer{r}" for r in range(args.receivers))
        results = [p.recv() for p in pipes]
    for pr in procs:
        pr.join(30)
    ok = all(results) and all(pr.exitcode == 0 for pr in procs)
    print(f"{args.steps} versions of {len(SHAPES)} tensors ({total} bytes) -> {args.receivers} receivers: "
          f"{'ok' if ok else 'MISMATCH'}")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cuda", action="store_true")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--receivers", type=int, default=2)
    trainer(ap.parse_args())
