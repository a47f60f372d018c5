#!/usr/bin/env python3
"""Validate a tpx-bench --json document against the schema in
docs/API.md ("tpx-bench/1"), with the json module only.

usage: check_bench_json.py FILE [--runs N] [--ops write,read] [--clean] [--pairs N] [--cpus N]
  --runs N   exactly N runs
  --ops L    every op in L appears
  --pairs N  every run has N pairs (tpx-bench --gpus)
  --cpus N   the chunk of every run is what the automatic size gives on N
             CPUs (docs/CONFIG.md, TPX_CHUNK_BYTES; config chunk_bytes 0)
  --clean    no errors anywhere, every iteration ok, and (with --check in the
             document's config) every iteration verified
"""
import json
import sys

NUM = (int, float)


def fail(msg):
    print(f"check_bench_json: {msg}", file=sys.stderr)
    sys.exit(1)


def need(obj, key, types, where, nullable=False):
    if key not in obj:
        fail(f"{where}: missing '{key}'")
    v = obj[key]
    if v is None and nullable:
        return v
    if isinstance(v, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        fail(f"{where}: '{key}' is a boolean")
    if not isinstance(v, types):
        fail(f"{where}: '{key}' = {v!r} is not {types}")
    return v


def check_run(r, i, cfg, cpus):
    w = f"runs[{i}]"
    op = need(r, "op", str, w)
    if op not in ("write", "read", "send"):
        fail(f"{w}: op {op!r}")
    for k in ("block_bytes", "batch", "bytes", "iters", "ok", "errors", "checked"):
        if need(r, k, int, w) < 0:
            fail(f"{w}: negative {k}")
    if r["bytes"] != r["block_bytes"] * r["batch"]:
        fail(f"{w}: bytes != block_bytes x batch")
    chunk = need(r, "chunk_bytes", int, w)
    if not 1 <= chunk <= 4 << 20 or (cfg["chunk_bytes"] and chunk != cfg["chunk_bytes"]):
        fail(f"{w}: chunk_bytes {chunk} (configured {cfg['chunk_bytes']})")
    if cpus is not None and chunk != auto_chunk(r["bytes"], cfg["channels"], cpus):
        fail(f"{w}: chunk_bytes {chunk}, the automatic size on {cpus} CPUs is "
             f"{auto_chunk(r['bytes'], cfg['channels'], cpus)}")
    if r["ok"] + r["errors"] > r["iters"] or r["checked"] > r["ok"]:
        fail(f"{w}: ok {r['ok']} + errors {r['errors']} vs iters {r['iters']}, checked {r['checked']}")
    ok = r["ok"] > 0
    for k in ("time_us", "gbps_per_gpu", "gbps_total"):
        v = need(r, k, NUM, w, nullable=True)
        if ok and v is None and not (cfg["latency"] and k != "time_us"):
            fail(f"{w}: {k} null with {r['ok']} good iterations")
        if v is not None and v < 0:
            fail(f"{w}: {k} negative")
    lat = need(r, "latency_us", dict, w, nullable=True)
    if ok:
        if lat is None:
            fail(f"{w}: latency_us null")
        keys = ["min", "p50", "p99", "p99.9", "max"]
        vals = [need(lat, k, NUM, w + ".latency_us") for k in keys]
        if vals != sorted(vals):
            fail(f"{w}: latency percentiles out of order {vals}")
        if not vals[0] <= r["time_us"] <= vals[-1] * 1.0001:
            fail(f"{w}: mean time {r['time_us']} outside [min, max]")
    if r["gbps_total"] is not None and r["gbps_per_gpu"] is not None:
        if abs(r["gbps_total"] - r["gbps_per_gpu"] * cfg["gpus"]) > 1e-3 * max(1.0, r["gbps_total"]):
            fail(f"{w}: gbps_total != gbps_per_gpu x gpus")
    need(r, "error", str, w, nullable=True)
    if "pairs" in r:
        check_pairs(r, w, cfg)


def auto_chunk(nbytes, channels, cpus):
    """TPX_CHUNK_BYTES=auto: 512 KiB; below 4 CPUs the largest power of two
    up to 2 MiB that every channel gets whole."""
    c = 512 << 10
    each = nbytes // max(channels, 1)
    while cpus < 4 and c < 2 << 20 and each >= 2 * c:
        c *= 2
    return c


def check_pairs(r, w, cfg):
    """--gpus: one entry per pair; their iterations add up to the run's, their
    rates to its total."""
    pairs = need(r, "pairs", list, w)
    if len(pairs) != cfg["gpus"]:
        fail(f"{w}: {len(pairs)} pairs, config says {cfg['gpus']} GPUs")
    for i, p in enumerate(pairs):
        for k in ("gpu", "ok", "errors"):
            if need(p, k, int, f"{w}.pairs[{i}]") < 0:
                fail(f"{w}.pairs[{i}]: negative {k}")
        v = need(p, "gbps", NUM, f"{w}.pairs[{i}]", nullable=True)
        if v is not None and v < 0:
            fail(f"{w}.pairs[{i}]: negative gbps")
    if sum(p["ok"] for p in pairs) != r["ok"] or sum(p["errors"] for p in pairs) != r["errors"]:
        fail(f"{w}: the pairs' ok/errors do not add up to the run's")
    if r["gbps_total"] is not None:
        s = sum(p["gbps"] or 0 for p in pairs)
        if abs(s - r["gbps_total"]) > 1e-3 * max(1.0, s):
            fail(f"{w}: the pairs' GB/s add up to {s}, not gbps_total {r['gbps_total']}")


def main():
    args = sys.argv[1:]
    if not args:
        fail(__doc__)
    path, want_runs, want_ops, clean, want_pairs, cpus = args[0], None, [], False, None, None
    i = 1
    while i < len(args):
        if args[i] == "--runs":
            want_runs, i = int(args[i + 1]), i + 2
        elif args[i] == "--ops":
            want_ops, i = args[i + 1].split(","), i + 2
        elif args[i] == "--pairs":
            want_pairs, i = int(args[i + 1]), i + 2
        elif args[i] == "--cpus":
            cpus, i = int(args[i + 1]), i + 2
        elif args[i] == "--clean":
            clean, i = True, i + 1
        else:
            fail(f"unknown argument {args[i]}")
    with open(path) as f:
        doc = json.load(f)
    if need(doc, "schema", str, "top") != "tpx-bench/1":
        fail(f"schema {doc['schema']!r}")
    need(doc, "date", str, "top")
    need(doc, "host", str, "top")
    cmd = need(doc, "command", list, "top")
    if not cmd or not all(isinstance(a, str) for a in cmd):
        fail("command is not a list of strings")
    cfg = need(doc, "config", dict, "top")
    for k, t in (("mode", str), ("transport", str), ("mem", str), ("gpu", int), ("gpus", int), ("channels", int),
                 ("chunk_bytes", int), ("iters", int), ("warmup", int), ("inflight", int), ("regions", int), ("check", bool),
                 ("latency", bool), ("cpus", int)):
        need(cfg, k, t, "config")
    if cfg["mode"] not in ("loopback", "client") or cfg["mem"] not in ("host", "cuda") or cfg["gpus"] < 1:
        fail(f"config {cfg}")
    err = need(doc, "error", str, "top", nullable=True)
    runs = need(doc, "runs", list, "top")
    for i, r in enumerate(runs):
        if not isinstance(r, dict):
            fail(f"runs[{i}] is not an object")
        check_run(r, i, cfg, cpus)
    if want_pairs is not None and any(len(r.get("pairs", [])) != want_pairs for r in runs):
        fail(f"not every run has {want_pairs} pairs")
    if want_runs is not None and len(runs) != want_runs:
        fail(f"{len(runs)} runs, expected {want_runs}")
    for op in want_ops:
        if not any(r["op"] == op for r in runs):
            fail(f"no {op} run")
    if clean:
        if err is not None:
            fail(f"error: {err}")
        for i, r in enumerate(runs):
            if r["errors"] or r["error"] is not None or r["ok"] != r["iters"]:
                fail(f"runs[{i}] not clean: {r}")
            if cfg["check"] and r["checked"] != r["iters"]:
                fail(f"runs[{i}]: {r['checked']} of {r['iters']} iterations verified")
    print(f"check_bench_json: {path}: {len(runs)} runs, schema ok{', clean' if clean else ''}")


main()
