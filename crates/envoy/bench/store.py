#!/usr/bin/env python3
"""Store bench: what one store operation costs on each engine of the store
service — `redis`, `postgres` and `redis+postgres` in one run. `make bench-store` builds the
service and its load generator (crates/store/examples/load.rs) and writes its section of
BENCHMARKS.md; `--out` writes elsewhere.

For each engine, the load generator starts its redis-server and the service (release build) and
measures over HTTP/2 inside mutual TLS, as an Envoy cluster talks to it: claim latency at one
connection, one operation at a time (p50, p99), then claim + finish pairs per second at 8 connections × 8 in flight. The
engine is chosen through the service's environment (IDEMGATE_STORE_ENGINE, IDEMGATE_STORE_POSTGRES:
the load generator's `--redis` is then unused on `postgres`); each PostgreSQL engine gets a fresh
PostgreSQL of its own (crates/envoy/bench/postgres.py: defaults, fsync on). Counts are LOAD_OPS
(default 5000). Everything runs on 127.0.0.1; every process started here is stopped by its PID.
"""
import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import bench
import postgres
from bench import load, log, machine
from sections import write_section

BEGIN, END = "<!-- store:begin (written by make bench-store) -->", "<!-- store:end -->"
ENGINES = ("redis", "postgres", "redis+postgres")
UNITS = {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1e3}


def millis(text):
    """A Rust Duration's Debug spelling (`312.4µs`, `1.2ms`, `2s`) in milliseconds."""
    m = re.fullmatch(r"([0-9.]+)(ns|µs|us|ms|s)", text)
    if not m:
        raise SystemExit(f"not a duration: {text!r}")
    return float(m.group(1)) * UNITS[m.group(2)]


def parse(out):
    claim = re.search(r"claim, 1 connection, sequential: n=(\d+) p50=(\S+) p99=(\S+)", out)
    pairs = re.search(r"claim\+finish, .*: (\d+) pairs in (\S+) = ([0-9.]+) pairs/s", out)
    if not claim or not pairs:
        raise SystemExit(f"the load generator printed no figures:\n{out}")
    return {"n": int(claim.group(1)), "p50": millis(claim.group(2)), "p99": millis(claim.group(3)),
            "pairs": int(pairs.group(1)), "pairs_s": float(pairs.group(3))}


def run(engine, load_bin, ops):
    env = dict(os.environ, IDEMGATE_STORE_ENGINE=engine, LOAD_OPS=str(ops))
    env.pop("IDEMGATE_STORE_POSTGRES", None)
    server = None
    try:
        if engine != "redis":
            server = postgres.start()
            env["IDEMGATE_STORE_POSTGRES"] = server.url
        started = time.monotonic()
        proc = subprocess.Popen([str(load_bin)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, preexec_fn=bench._die_with_parent)
        bench.children.append(proc)
        out, err = proc.communicate(timeout=1800)
        bench.children.remove(proc)
        if proc.returncode != 0:
            raise SystemExit(f"{engine}: the load generator failed ({proc.returncode}):\n{out}\n{err[-3000:]}")
        result = parse(out)
        result["took"] = time.monotonic() - started
        log(f"{engine:15s} claim p50 {result['p50']:.3f} ms p99 {result['p99']:.3f} ms, "
            f"{result['pairs_s']:.0f} claim+finish pairs/s ({result['took']:.0f} s)")
        return result
    finally:
        for proc in list(bench.children):
            bench.kill(proc)
            bench.children.remove(proc)
        if server is not None:
            server.stop()


def render(mach, load0, load1, ops, results):
    lines = [BEGIN, "",
             f"`make bench-store` ({mach['date']}; {mach['cpu']}, {mach['cores']} cores; PostgreSQL "
             f"{postgres.version()}; load average {load0[0]:.1f} before, {load1[0]:.1f} after; "
             f"LOAD_OPS={ops}). The service (release build) over HTTP/2 inside mutual TLS, as an Envoy cluster talks to it, "
             "on one `redis-server` (no persistence), one PostgreSQL (its defaults: fsync and "
             "synchronous_commit on), or both, all on this machine; engines one after the other.", "",
             "| engine | claim p50 (1 connection, sequential) | claim p99 | claim + finish pairs/s (8 connections × 8 in flight) |",
             "|---|---|---|---|"]
    for engine in ENGINES:
        r = results[engine]
        lines.append(f"| `{engine}` | {r['p50']:.3f} ms | {r['p99']:.3f} ms | {r['pairs_s']:.0f} |")
    base = results["redis"]["pairs_s"]
    ratios = ", ".join(f"`{e}` {results[e]['pairs_s'] / base:.2f}" for e in ENGINES[1:]) if base else "?"
    lines += ["", f"- Pairs/s against `redis`: {ratios}.",
              "- A claim on `postgres` is one `INSERT … ON CONFLICT (key) DO UPDATE … WHERE` the old row has expired (one commit); on "
              "`redis+postgres` the PostgreSQL write decides and is then written through to Redis, so a "
              "fresh claim costs both (Redis answers replays and in-flight duplicates first).", "", END]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--load", required=True, help="the built load generator (examples/load)")
    ap.add_argument("--ops", type=int, default=int(os.environ.get("LOAD_OPS", 5000)))
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--out", default=str(bench.ROOT / "BENCHMARKS.md"))
    args = ap.parse_args()
    load_bin = Path(args.load)
    if not load_bin.is_file():
        raise SystemExit(f"{load_bin} is missing: run `make bench-store`")
    mach = machine()
    load0 = load()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    results = {engine: run(engine, load_bin, args.ops) for engine in engines}
    load1 = load()
    if set(engines) != set(ENGINES):
        print(results)
        log("not every engine measured: BENCHMARKS.md left as it is")
        return 0
    section = render(mach, load0, load1, args.ops, results)
    out = write_section(args.out, BEGIN, END, section,
                        heading="## Store service: one operation on each engine\n\n")
    print(section)
    log(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
