"""GPU-side completion times of the unpacker's launches, from the events an
experiment build recorded (TPX_X_GPUTS, not in the tree): see ../README.md.
usage: gpu_done_times.py SENDER_FILE RECEIVER_FILE [WRITE_INDEX]"""
import collections, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../../bench"))
import timeline as T
procs = T.load(sys.argv[1:3])
xs = T.transfers(procs)[2:]
durs = sorted(xs, key=lambda x: x[4]-x[3])
op, ini, tgt, t0, t1 = durs[len(durs)//2] if len(sys.argv) < 4 else xs[int(sys.argv[3])]
ms = lambda t: (t - t0) / 1e6
print("dur %.3f" % ms(t1))
for name, ev in (("sender", ini), ("receiver", tgt)):
    sub = {}; done = {}; ret = {}
    for e in ev:
        if e[1] != "sock_kick" or e[3] >= 0: continue
        if e[3] <= -100: sub[e[4]] = (e[0], -100 - e[3])
        else: done[e[4]] = e[5]; ret[e[4]] = e[0]
    ts = sorted(t for t in sub if t0 - 2e5 <= sub[t][0] <= t1)
    print(name, len(ts), "launches: ticket stream submit gpu_done retired(seen)")
    print("  " + " ".join("%d/s%d:%.2f>%.2f(%.2f)" % (t, sub[t][1], ms(sub[t][0]), ms(done[t]) if t in done else -1, ms(ret[t]) if t in ret else -1) for t in ts))
