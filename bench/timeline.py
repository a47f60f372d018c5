#!/usr/bin/python3
"""Where the time of a transfer goes: reads the TPX_TIMELINE files of both
processes (one clock: CLOCK_MONOTONIC of one host), prints per-stage times of
every write, and draws one of them.

usage: bench/timeline.py FILE... [--plot PNG] [--op N] [--label TEXT] [--sockets] [--wake]
  FILE     <TPX_TIMELINE>.<pid> files (initiator and target, any order; one
           file when both ends are in one process)
  --plot   a timeline picture of the transfer with the median duration (or
           --op N, the N-th write, from 0): chunks per channel (send post ->
           sent, receive post -> arrived -> landed, staging copies), sockets
           busy and bytes received per 50 us, requests in flight
  --label  title of the picture
  --sockets  per socket of that write (the median one, or --op N): bytes,
           first and last I/O, calls, busy (ms inside the calls: near
           last - first, the thread was copying; far below, it waited for
           bytes, room or a CPU), and each sendmsg's span on the sender:
           which sockets start late or drain last
  --wake   per process, over the whole run: time from a kick (work queued
           for a socket whose thread had none) to that socket's next I/O,
           i.e. how long an I/O thread takes to wake and run (quantiles, us)

Per write (times in ms from its post on the initiator):
  target    the write's control message reached the target
  tx0       first byte written to a socket (initiator), rx0 first read (target)
  allch     every channel has a chunk in the transport (the last channel's
            first isend): with GPU memory, when its first staging copy is done
  sposted   last chunk handed to the transport (isend) on the initiator
  rposted   last receive posted on the target
  d2h       last staging copy (device to host) done on the initiator
  rdone     last chunk's bytes arrived; landed: last chunk released (after
            its copy to the GPU)
  h2dq      median time from queueing a chunk's copy to the GPU to seeing it
            done (target; how far the copies to the GPU run behind)
  end       the initiator saw the write finished
  socks     sockets that read bytes for it (target), and the spread of their
            last reads (ms): how evenly the tail drains
  GB/s      size / end
Matplotlib from Debian (python3-matplotlib, scripts/deps.sh --bench) for --plot.
"""
import bisect
import collections
import statistics
import sys

K_WRITE = 1  # op kinds as recorded (engine op.h): only writes are reported


def load(paths):
    procs = []
    for path in paths:
        ev = []
        with open(path) as f:
            for line in f:
                if line.startswith("#"):
                    continue
                t, kind, tid, a, b, c, d = line.split()
                ev.append((int(t), kind, int(tid), int(a), int(b), int(c), int(d)))
        ev.sort()
        procs.append((path, ev))
    return procs


def transfers(procs):
    """[(op id, initiator events, target events, t_post, t_done)] of writes."""
    posts, owner = {}, {}
    for i, (_, ev) in enumerate(procs):
        for e in ev:
            if e[1] == "op_post" and e[3] == K_WRITE:
                posts[e[4]] = e[0]
                owner[e[4]] = i
    out = []
    for op, t0 in posts.items():
        ini = procs[owner[op]][1]
        tgt = [p[1] for j, p in enumerate(procs) if j != owner[op]]
        tgt = tgt[0] if tgt else ini  # one process (tpx-bench loopback): both sides in one file
        done = [e[0] for e in ini if e[1] == "op_done" and e[4] == op]
        if not done:
            continue
        out.append((op, ini, tgt, t0, done[0]))
    out.sort(key=lambda x: x[3])
    return out


def window(ev, t0, t1):
    return [e for e in ev if t0 <= e[0] <= t1]


def h2d_wait(ev):
    """Median time (ms) from queueing a staging copy to the GPU to seeing it done."""
    start, waits = {}, []
    for e in ev:
        if e[1] == "h2d_start":
            start.setdefault((e[3], e[4]), []).append(e[0])
        elif e[1] == "h2d_done" and start.get((e[3], e[4])):
            waits.append((e[0] - start[(e[3], e[4])].pop(0)) / 1e6)
    return statistics.median(waits) if waits else float("nan")


def stages(op, ini, tgt, t0, t1):
    ms = lambda t: (t - t0) / 1e6 if t is not None else float("nan")
    mine = lambda ev, kind: [e[0] for e in ev if e[1] == kind and e[4] == op]
    last = lambda xs: max(xs) if xs else None
    first = lambda xs: min(xs) if xs else None
    ti, tt = window(ini, t0, t1), window(tgt, t0, t1)
    rx = [e for e in tt if e[1] == "sock_rx"]
    lastrx = collections.defaultdict(int)
    for e in rx:
        lastrx[e[3]] = e[0]
    tail = sorted(lastrx.values())
    size = next((e[5] for e in ini if e[1] == "op_post" and e[4] == op), 0)
    # every channel with a chunk in the transport: the last channel's first send
    firsts = {}
    for e in ti:
        if e[1] == "send_post" and e[4] == op:
            firsts.setdefault(e[3], e[0])
    return {
        "target": ms(first(mine(tgt, "target"))),
        "tx0": ms(first([e[0] for e in ti if e[1] == "sock_tx"])),
        "rx0": ms(first([e[0] for e in rx])),
        "allch": ms(max(firsts.values())) if firsts else float("nan"),
        "sposted": ms(last(mine(ini, "send_post"))),
        "rposted": ms(last(mine(tgt, "recv_post"))),
        "d2h": ms(last(mine(ini, "d2h_done"))),
        "rdone": ms(last(mine(tgt, "recv_done"))),
        "landed": ms(last(mine(tgt, "landed"))),
        "h2dq": h2d_wait(tt),
        "end": ms(t1),
        "socks": len(lastrx),
        "spread": (tail[-1] - tail[0]) / 1e6 if tail else float("nan"),
        "GB/s": size / ((t1 - t0) / 1e9) / 1e9 if t1 > t0 else float("nan"),
    }


def report(rows):
    keys = ["target", "tx0", "rx0", "allch", "sposted", "rposted", "d2h", "rdone", "landed", "h2dq", "end", "socks",
            "spread", "GB/s"]
    print("write  " + " ".join(f"{k:>8s}" for k in keys))
    for i, r in enumerate(rows):
        print(f"{i:5d}  " + " ".join(f"{r[k]:8.3f}" if isinstance(r[k], float) else f"{r[k]:8d}" for k in keys))
    if len(rows) > 1:
        med = {k: statistics.median([r[k] for r in rows if r[k] == r[k]] or [float("nan")]) for k in keys}
        print("median " + " ".join(f"{med[k]:8.3f}" for k in keys))


def plot(path, label, op, ini, tgt, t0, t1):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ms = lambda t: (t - t0) / 1e6
    fig, (ax, ax2, ax3) = plt.subplots(3, 1, figsize=(11, 9), sharex=True,
                                       gridspec_kw={"height_ratios": [3, 1.2, 1.2]})
    lanes = {}

    def pairs(ev, start, end, key):
        open_ = {}
        for e in ev:
            if e[1] == start and (key is None or e[4] == op):
                open_[(e[3], e[5] if key else e[4])] = e[0]
            elif e[1] == end and (key is None or e[4] == op):
                k = (e[3], e[5] if key else e[4])
                if k in open_:
                    yield e[3], open_.pop(k), e[0]

    ti, tt = window(ini, t0 - 1, t1 + 1), window(tgt, t0 - 1, t1 + 1)
    spec = [  # (events, start, end, keyed by op, lane offset, colour, label)
        (ti, "d2h_start", "d2h_done", True, 0.0, "tab:purple", "staging copy (device to host)"),
        (ti, "send_post", "send_done", True, 0.2, "tab:blue", "send: posted -> sent"),
        (tt, "recv_post", "recv_done", True, 0.4, "tab:orange", "receive: posted -> arrived"),
        (tt, "recv_done", "landed", True, 0.6, "tab:green", "arrived -> landed"),
        (tt, "h2d_start", "h2d_done", False, 0.6, "tab:olive", "copy to GPU"),
    ]
    seen = set()
    for ev, s, e, keyed, off, col, lab in spec:
        for ch, a, b in pairs(ev, s, e, keyed):
            lanes[ch] = 1
            ax.plot([ms(a), ms(b)], [ch + off] * 2, color=col, lw=1.5, alpha=0.6,
                    label=lab if lab not in seen else None)
            seen.add(lab)
    ax.set_ylabel("channel")
    ax.set_yticks(sorted(lanes))
    ax.legend(loc="upper left", fontsize=7, ncol=2)
    ax.set_title(label or f"write {op}: {ms(t1):.2f} ms")
    # sockets: bytes read per 50 us bin (target) and sockets active in it
    bin_ns = 50_000
    nb = int((t1 - t0) // bin_ns) + 1
    rate, active = [0.0] * nb, [set() for _ in range(nb)]
    for e in tt:
        if e[1] == "sock_rx" and t0 <= e[0] <= t1:
            i = int((e[0] - t0) // bin_ns)
            rate[i] += e[5]
            active[i].add(e[3])
    xs = [i * bin_ns / 1e6 for i in range(nb)]
    ax2.step(xs, [r / bin_ns for r in rate], where="post", color="tab:red", label="GB/s read (target)")
    ax2.set_ylabel("GB/s")
    ax2b = ax2.twinx()
    ax2b.step(xs, [len(a) for a in active], where="post", color="gray", lw=0.8, label="sockets reading")
    ax2b.set_ylabel("sockets")
    ax2.legend(loc="upper left", fontsize=7)
    ax2b.legend(loc="upper right", fontsize=7)
    # requests in flight in the transport, both sides
    for ev, s, e, col, lab in ((ti, "send_post", "send_done", "tab:blue", "sends in flight"),
                               (tt, "recv_post", "recv_done", "tab:orange", "receives in flight")):
        pts = sorted([(x[0], 1) for x in ev if x[1] == s and x[4] == op] +
                     [(x[0], -1) for x in ev if x[1] == e and x[4] == op])
        n, xs3, ys3 = 0, [0.0], [0]
        for t, d in pts:
            n += d
            xs3.append(ms(t))
            ys3.append(n)
        ax3.step(xs3, ys3, where="post", color=col, label=lab)
    ax3.set_ylabel("requests")
    ax3.set_xlabel("ms from the post")
    ax3.legend(loc="upper right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"timeline: wrote {path}")


def sockets(op, ini, tgt, t0, t1):
    ms = lambda t: (t - t0) / 1e6
    print(f"sockets of write {op} (ms from its post; {ms(t1):.3f} ms):")
    print("  side  socket  thread     MiB   first    last  calls    busy  sendmsg spans (start-end/MiB)")
    for side, ev, kind in (("send", ini, "sock_tx"), ("recv", tgt, "sock_rx")):
        per = collections.defaultdict(list)
        for e in window(ev, t0, t1):
            if e[1] == kind:
                per[e[3]].append(e)
        start = lambda e: e[0] - e[6]  # events are recorded when the call returns, with its ns
        for fd in sorted(per, key=lambda f: start(per[f][0])):
            es = per[fd]
            spans = " ".join(f"{ms(start(e)):.2f}-{ms(e[0]):.2f}/{e[5] / 2**20:.1f}" for e in es) if kind == "sock_tx" else ""
            busy = sum(e[6] for e in es) / 1e6  # ms inside the calls (0: a trace that did not time receives)
            print(f"  {side:4s}  {fd:6d}  {es[0][2]:6d}  {sum(e[5] for e in es) / 2**20:6.2f}  {ms(start(es[0])):6.2f}"
                  f"  {ms(es[-1][0]):6.2f}  {len(es):5d}  {busy:6.2f}  {spans}")


def wakes(procs):
    print("kick -> the socket's next I/O (us), per process, after its first transfer started:")
    for path, ev in procs:
        first = next((e[0] for e in ev if e[1] in ("op_post", "target")), None)
        if first is None:
            continue
        io = collections.defaultdict(list)
        for e in ev:
            if e[1] in ("sock_tx", "sock_rx"):
                io[e[3]].append(e[0] - e[6])
        for ts in io.values():
            ts.sort()
        lat = []
        for e in ev:
            if e[1] == "sock_kick" and e[0] >= first and io.get(e[3]):
                j = bisect.bisect_left(io[e[3]], e[0])
                if j < len(io[e[3]]):
                    lat.append((io[e[3]][j] - e[0]) / 1e3)
        if not lat:
            print(f"  {path}: no kicks")
            continue
        lat.sort()
        q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))]
        posts = sum(1 for e in ev if e[1] == "op_post") or sum(1 for e in ev if e[1] == "target")
        print(f"  {path}: {len(lat)} kicks ({len(lat) / max(posts, 1):.1f} per transfer): p50 {q(.5):.0f}"
              f"  p90 {q(.9):.0f}  p99 {q(.99):.0f}  max {lat[-1]:.0f}")


def main(argv):
    files, out, pick, label, socks, wake = [], None, None, None, False, False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--plot", "--op", "--label"):
            if i + 1 >= len(argv):
                sys.exit(f"timeline: {a} needs a value")
            v = argv[i + 1]
            if a == "--plot":
                out = v
            elif a == "--label":
                label = v
            else:
                try:
                    pick = int(v)
                except ValueError:
                    sys.exit(f"timeline: --op {v}: not a number")
            i += 2
            continue
        if a in ("--sockets", "--wake"):
            socks, wake = socks or a == "--sockets", wake or a == "--wake"
            i += 1
            continue
        if a.startswith("-"):
            sys.exit(f"timeline: unknown option {a} (see --help)" if a != "--help" else __doc__)
        files.append(a)
        i += 1
    if not files:
        sys.exit(__doc__)
    procs = load(files)
    xs = transfers(procs)
    if not xs:
        sys.exit("timeline: no finished write in these files (record both sides with TPX_TIMELINE)")
    rows = [stages(*x) for x in xs]
    report(rows)
    if pick is None:
        order = sorted(range(len(rows)), key=lambda k: rows[k]["end"])
        pick = order[len(order) // 2]
    if not 0 <= pick < len(xs):
        sys.exit(f"timeline: --op {pick}: there are {len(xs)} writes")
    if socks:
        sockets(*xs[pick])
    if wake:
        wakes(procs)
    if out:
        plot(out, label, *xs[pick])


if __name__ == "__main__":
    main(sys.argv[1:])
