#!/usr/bin/env python3
"""`make bench-work`: the filter's own work per request, counted rather than timed.

Runs host-tests' `work` example (the shipped filter .wasm under wasmtime, fuel and a call hook)
and rewrites the section of BENCHMARKS.md between the work markers: wasm operators executed and
host calls made per fresh keyed, replayed and 409 request, in raw and json mode, split by
callback and by import (which host calls), plus the detached figures (the shipped example's
`upstream.reentry` setup: the filter sends the request with an HTTP callout, which Envoy carries
back in through its re-entry listener; that second pass is Envoy's work, not the filter's, so it
is not counted here). Deterministic, so it shows what an optimisation changed even on a busy
machine.
Usage: work.py [--out BENCHMARKS.md] [--smoke]   (--smoke: run and check, write nothing)
"""
import argparse
import re
import subprocess
import sys
from pathlib import Path

from sections import write_section

ROOT = Path(__file__).resolve().parents[3]
BEGIN, END = "<!-- work:begin (written by make bench-work) -->", "<!-- work:end -->"
FIGURES = ["raw_fresh_key", "raw_fresh_key_new_client", "raw_replay", "raw_409", "json_fresh_key", "json_replay", "json_409",
           "detached_fresh_key", "detached_replay", "detached_409"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    cmd = ["cargo", "run", "-q", "-p", "idemgate-host-tests", "--example", "work"]
    text = subprocess.run(cmd, cwd=ROOT, check=True, text=True, capture_output=True).stdout
    figures, split, imports, current = {}, {}, {}, None
    for line in text.splitlines():
        m = re.match(r"^WORK (\S+) (\d+) ([\d.]+)$", line)
        if m:
            current = m.group(1)
            figures[current] = (int(m.group(2)), float(m.group(3)))
            split[current] = []
            continue
        m = re.match(r"^\s+imports: (.*)$", line)
        if m and current:
            imports[current] = m.group(1)
            continue
        m = re.match(r"^\s+(\S+)\s+([\d.]+) calls\s+(\d+) ops\s+([\d.]+) host calls(?:\s+\[.*\])?$", line)
        if m and current:
            split[current].append((m.group(1), int(m.group(3)), float(m.group(4))))
    missing = [f for f in FIGURES if f not in figures or figures[f][0] <= 0]
    if missing:
        raise SystemExit(f"work example gave no figure for: {', '.join(missing)}\n{text}")
    if args.smoke:
        print(" ".join(f"{f}={figures[f][0]}/{figures[f][1]:g}" for f in FIGURES))
        return
    lines = [BEGIN, "",
             "Counted by `make bench-work` (`cargo run -p idemgate-host-tests --example work`): the shipped filter "
             ".wasm under wasmtime; 200 requests per figure with the bench's 1 KB order body, a 35-byte 201 "
             "answer, one worker. *Wasm operators* is wasmtime fuel (operators executed), *host calls* are the "
             "filter's proxy-wasm and WASI imports; both are per request and do not depend on the machine's load.",
             "", "| request | wasm operators | host calls | by callback (operators / host calls) |", "|---|---|---|---|"]
    for f in FIGURES:
        ops, host = figures[f]
        parts = ", ".join(f"{name.removeprefix('proxy_on_')} {o:,} / {h:g}" for name, o, h in split[f] if o > 1000 or h)
        lines.append(f"| {f.replace('_', ' ')} | {ops:,} | {host:g} | {parts} |")
    lines += ["", "Host calls per request by import (`proxy_` left off; *detached* is the shipped example's setup, "
              "`upstream.reentry` set, json fingerprints: the filter sends the request with `proxy_http_call`, "
              "which Envoy carries back in through its re-entry listener, not counted here):", "",
              "| request | host calls by import |", "|---|---|"]
    for f in FIGURES:
        lines.append(f"| {f.replace('_', ' ')} | {imports.get(f, '').replace('proxy_', '')} |")
    lines += ["", END]
    section = "\n".join(lines)
    out = write_section(args.out, BEGIN, END, section, heading="## Work per request (counted)\n\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
