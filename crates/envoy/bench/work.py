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
Then it prints (to its output, never into a file) where the operators go: a table per figure of
the functions that executed the most operators themselves, from a profiling copy of the filter
(the same build with its name section kept, `wasm-opt -O3 -g`, each function counting its own
operators: host-tests' `profile` module, the work example's `--profile`).
Usage: work.py [--out BENCHMARKS.md] [--smoke] [--top N] [--no-profile]
       (--smoke: run and check, write nothing, no profile)
"""
import os
import argparse
import re
import subprocess
import sys
from pathlib import Path

from sections import write_section

ROOT = Path(__file__).resolve().parents[3]
BEGIN, END = "<!-- work:begin (written by make bench-work) -->", "<!-- work:end -->"
WASM_OPT = ROOT / "crates/web/node_modules/.bin/wasm-opt"
# The flags of crates/envoy/scripts/optimize.sh, plus -g: the profiling copy is the shipped code.
WASM_OPT_FLAGS = ["-O3", "--low-memory-unused", "--enable-bulk-memory", "--enable-sign-ext", "--enable-mutable-globals",
                  "--enable-nontrapping-float-to-int", "--enable-multivalue", "--enable-reference-types", "-g"]
FIGURES = ["raw_fresh_key", "raw_fresh_key_new_client", "raw_replay", "raw_409", "json_fresh_key", "json_replay", "json_409",
           "detached_fresh_key", "detached_replay", "detached_409"]


def profile(top):
    """Builds the filter with its names kept (own target dir) and prints the work example's profile."""
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "profile-names"
    subprocess.run([os.environ.get("CARGO", "cargo"), "build", "-q", "-p", "idemgate-envoy", "--release",
                    "--target", "wasm32-wasip1", "--target-dir", str(target)],
                   cwd=ROOT, check=True, env={**os.environ, "IDEMGATE_KEEP_NAMES": "1"})
    named = target / "idemgate_envoy.named.wasm"
    subprocess.run([str(WASM_OPT), *WASM_OPT_FLAGS, str(target / "wasm32-wasip1/release/idemgate_envoy.wasm"),
                    "-o", str(named)], check=True)
    cmd = ["cargo", "run", "-q", "-p", "idemgate-host-tests", "--example", "work", "--", "--profile", str(top)]
    text = subprocess.run(cmd, cwd=ROOT, check=True, text=True, capture_output=True,
                          env={**os.environ, "IDEMGATE_FILTER_WASM": str(named)}).stdout
    print("Operators per request by function (self, not callees), top", top,
          "per figure; the total is the profiling copy's, within 1 % of the figure above:")
    print(text, end="")


def count():
    """Runs the work example; per figure: (operators, host calls), the split by callback
    [(callback, operators, host calls)], and the host calls by import (`name n, ...` as printed).
    Also used by envoy_cpu.py (`make bench-profile`), which prices the host calls."""
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
    return figures, split, imports, text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--no-profile", action="store_true")
    args = ap.parse_args()
    figures, split, imports, text = count()
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
    print(" ".join(f"{f}={figures[f][0]}/{figures[f][1]:g}" for f in FIGURES))
    if not args.no_profile:
        profile(args.top)


if __name__ == "__main__":
    sys.exit(main())
