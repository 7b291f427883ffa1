#!/usr/bin/env python3
"""`make bench-profile`: where a keyed request's time goes in Envoy, not only in the filter.

`make bench-work` counts the filter's own work (wasm operators, host calls) and `make bench`
times whole requests; neither says what a host call costs Envoy, nor how much of a keyed
request's cost is outside the wasm. This measures Envoy's CPU per request (user + system time of
the Envoy process from /proc, over a wrk run, divided by the requests answered):

  1. Floors and idemgate, alternating within each repetition: plain Envoy, the no-op filter
     (`make bench`'s floor), the no-op filter in idemgate's own configuration (examples/envoy
     as shipped: its connection manager settings, access log and re-entry listener, with the
     no-op .wasm: what the configuration costs before the filter does anything), then idemgate
     (json and raw fresh keys, replays, detached straight to the cluster and through re-entry).
  2. The price of each host call: the probe filter (bench/probe_filter.rs) makes N calls of one
     kind per request; (CPU with them − CPU without) ÷ N. Priced with the work example's counts of
     idemgate's calls per request (host-tests `work`), they give what the calls cost a request.
  3. With perf (Linux `perf record`, the Envoy process only): a fresh json request's samples split
     into the wasm code V8 compiled, Envoy's code running inside a host call (a wasm frame up the
     stack), and Envoy's code outside the filter.

Everything runs on 127.0.0.1, bounded in time; every process started here is killed by its PID.
Usage: envoy_cpu.py [--out BENCHMARKS.md] [--reps N] [--duration S] [--smoke]
       (--smoke: one short repetition, no perf, written to --out, which must then be elsewhere)
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import REPLAY_KEYS, Envoy, HoldServer, children, json_body, kill, log, machine, prime, wrk
from configs import (NOOP_WASM, ROOT, TARGET, hcm_config, idemgate_config, noop_config, plain_config,
                     upstream_config, wasm_config)
from report import med
from sections import write_section
import work

BEGIN, END = "<!-- profile:begin (written by make bench-profile) -->", "<!-- profile:end -->"
PROBE_WASM = TARGET / "wasm32-wasip1/release/examples/probe_filter.wasm"

# (id, what the report calls it, configuration shape, key mode)
SHAPES = [
    ("plain", "plain Envoy", "plain", "fresh"),
    ("noop", "no-op filter + buffer (`make bench`'s floor)", "noop", "fresh"),
    ("noop_in_example", "no-op filter in idemgate's configuration (as shipped, access log on)", "noop-example", "fresh"),
    ("noop_in_example_nolog", "the same without the access log", "noop-example-nolog", "fresh"),
    ("json", "idemgate json, fresh key, router path", "json", "fresh"),
    ("json_nolog", "idemgate json, fresh key, router path, no access log", "json-nolog", "fresh"),
    ("raw", "idemgate raw, fresh key, router path", "raw", "fresh"),
    ("replay", "idemgate json, replay of a completed key", "json", "cycle"),
    ("direct", "idemgate json, fresh key, detached straight to the cluster", "json-direct", "fresh"),
    ("reentry", "idemgate json, fresh key, detached through re-entry (as shipped)", "json-reentry", "fresh"),
]

# (id, probe configuration, what one unit is, the host calls of `make bench-work` it prices)
PROBES = [
    ("shared_data", "shared_data={n},bytes=200", "`get_shared_data` + `set_shared_data` (CAS) of 200 B",
     ("proxy_get_shared_data",)),
    ("shared_data_4k", "shared_data={n},bytes=4096", "the same of 4 KiB", ()),
    ("property", "property={n}", "`get_property` source.address", ("proxy_get_property",)),
    ("set_property", "set_property={n}", "`set_property` of 7 bytes", ("proxy_set_property",)),
    ("headers", "headers={n}", "`get_header_map_pairs` of the request's headers", ("proxy_get_header_map_pairs",)),
    ("body", "body={n}", "`get_buffer_bytes` of the 1 KB body", ("proxy_get_buffer_bytes",)),
    ("time", "time={n}", "`get_current_time_nanoseconds`", ("proxy_get_current_time_nanoseconds",)),
    ("add_header", "add_header={n}", "`add_header_map_value` on the response", ("proxy_add_header_map_value",)),
]
PROBE_CALLS = 40  # enough that a call of a fraction of a µs stands out of the run-to-run spread


def cpu_seconds(pid):
    """User + system CPU of a process (all its threads), from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drop_access_log(config):
    for lst in config["static_resources"]["listeners"]:
        hcm_config(lst).pop("access_log", None)
    return config


def shape_config(shape, up, hold, probe=None):
    if shape == "plain":
        return plain_config(up)
    if shape in ("noop", "probe"):
        config = noop_config(up)
        if probe is not None:
            wasm = wasm_config(config)
            wasm["vm_config"]["code"]["local"]["filename"] = str(PROBE_WASM)
            wasm["configuration"] = {"@type": "type.googleapis.com/google.protobuf.StringValue", "value": probe}
        return config
    if shape.startswith("noop-example"):
        config = idemgate_config(up, hold, forward="reentry")
        wasm = wasm_config(config)
        wasm["vm_config"]["code"]["local"]["filename"] = str(NOOP_WASM)
        wasm["configuration"]["value"] = ""
    else:
        forward = "reentry" if "reentry" in shape else "direct" if "direct" in shape else "router"
        config = idemgate_config(up, hold, mode="raw" if shape.startswith("raw") else "json", forward=forward)
    return drop_access_log(config) if shape.endswith("nolog") else config


def measure(config, body_file, key_mode, prefix, args, perf_to=None):
    """Envoy's CPU µs per request over one wrk run (after a warm-up), and its req/s."""
    envoy = Envoy(config, name="profile")
    try:
        if key_mode == "cycle":
            prime(envoy, ("d_replay", None, None, "POST", "/orders"), body_file.read_bytes(), prefix)
            key_mode = f"cycle:{REPLAY_KEYS}"
        if args.warmup:
            wrk(envoy.url, "POST", "/orders", body_file, key_mode, prefix + "w", args.warmup)
        recorder = None
        if perf_to:
            recorder = subprocess.Popen(
                ["perf", "record", "-q", "-F", "999", "-g", "-p", str(envoy.proc.pid), "-o", str(perf_to),
                 "--", "sleep", str(max(1, args.duration - 1))],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            children.append(recorder)
        before = cpu_seconds(envoy.proc.pid)
        r = wrk(envoy.url, "POST", "/orders", body_file, key_mode, prefix, args.duration)
        after = cpu_seconds(envoy.proc.pid)
        if recorder:
            recorder.wait(30)
        if r["non2xx"] or not r["requests"]:
            raise SystemExit(f"profile: {r['non2xx']} non-2xx of {r['requests']} requests ({r['cmd']})")
        return {"us": (after - before) / r["requests"] * 1e6, "rps": r["rps"]}
    finally:
        envoy.stop()


def host_calls():
    """idemgate's host calls per request by import, per figure, from host-tests' `work` example."""
    _, _, imports, _ = work.count()
    return {figure: {name: float(n) for name, n in re.findall(r"(\w+) ([\d.]+)", text)}
            for figure, text in imports.items()}


def perf_split(data):
    """Shares of the samples: wasm code (V8's JIT), Envoy inside a host call, Envoy outside."""
    out = subprocess.run(["perf", "script", "-i", str(data), "-F", "ip,dso"], check=True, text=True,
                         capture_output=True).stdout
    counts = {"wasm": 0, "host call": 0, "outside": 0}
    for sample in out.split("\n\n"):
        frames = [line for line in sample.strip().splitlines() if line.strip()]
        if not frames:
            continue
        if "[JIT]" in frames[0] or "perf-" in frames[0]:
            counts["wasm"] += 1
        elif any("[JIT]" in f or "perf-" in f for f in frames[1:]):
            counts["host call"] += 1
        else:
            counts["outside"] += 1
    total = sum(counts.values()) or 1
    return {k: v / total for k, v in counts.items()}


def perf_usable():
    if not shutil.which("perf"):
        return "perf is not installed (`make bench-profile` installs it)"
    probe = subprocess.run(["perf", "record", "-q", "-o", "/dev/null", "--", "true"], capture_output=True, text=True)
    return None if probe.returncode == 0 else f"perf cannot record here: {probe.stderr.strip()[:200]}"


def render(args, mach, cpu, prices, calls, split, perf_note):
    us = {k: med([r["us"] for r in v]) for k, v in cpu.items()}
    rps = {k: med([r["rps"] for r in v]) for k, v in cpu.items()}
    cmd = f"python3 crates/envoy/bench/envoy_cpu.py --reps {args.reps} --duration {args.duration}"
    lines = [BEGIN, "", f"Measured {mach['date']} with `make bench-profile` (`{cmd}`). Machine: {mach['cores']} cores "
             f"({mach['cpu']}), Envoy {mach['envoy']} (V8), `--concurrency 2`, 1 KB JSON bodies, wrk -t2 -c20. "
             "Envoy's CPU per request is the Envoy process's user + system time over the run ÷ the requests "
             f"answered; median of {args.reps} alternating repetitions.", "",
             "| configuration | Envoy CPU per request | over the no-op floor | req/s |", "|---|---|---|---|"]
    floor = us["noop"]
    for key, label, _, _ in SHAPES:
        lines.append(f"| {label} | {us[key]:.1f} µs | {us[key] - floor:+.1f} µs | {rps[key]:.0f} |")
    lines += ["", f"What one host call costs Envoy (the probe filter, {PROBE_CALLS} calls a request, "
              "alternating with the probe making none):", "",
              "| host call | Envoy CPU per call | idemgate json fresh key: calls | that many cost |", "|---|---|---|---|"]
    fresh = calls.get("json_fresh_key", {})
    priced_total, priced = 0.0, set()
    for key, _, label, imports in PROBES:
        n = sum(fresh.get(i, 0) for i in imports)
        priced.update(imports)
        cost = n * prices[key]
        priced_total += cost
        lines.append(f"| {label} | {prices[key]:.2f} µs | {n:g} | {cost:.1f} µs |" if imports else
                     f"| {label} | {prices[key]:.2f} µs | | |")
    # A shared-data step is a get and a set: the sets are priced with their gets.
    priced.add("proxy_set_shared_data")
    unpriced = {i: n for i, n in fresh.items() if i not in priced}
    lines += ["", f"Priced this way, a fresh json request's host calls cost Envoy about **{priced_total:.0f} µs** "
              f"of the {us['json'] - floor:.0f} µs it adds over the floor"
              + (f" (not priced: {', '.join(f'{i} {n:g}' for i, n in sorted(unpriced.items()))})." if unpriced else ".")]
    if split:
        idem = us["json"]
        lines += ["", "Where a fresh json request's Envoy CPU goes (perf, the Envoy process, 999 Hz, with call stacks): "
                  f"the wasm code V8 compiled **{split['wasm'] * 100:.0f} %** ({split['wasm'] * idem:.0f} µs), Envoy "
                  f"inside a host call **{split['host call'] * 100:.0f} %** ({split['host call'] * idem:.0f} µs), "
                  f"Envoy outside the filter **{split['outside'] * 100:.0f} %** ({split['outside'] * idem:.0f} µs; "
                  f"the no-op floor's whole request is {floor:.0f} µs). A sample counts as inside a host call when "
                  "a wasm frame is up its stack; where Envoy's frames lack frame pointers the stack stops early, "
                  "so that share is a lower bound and the last an upper one."]
        added = idem - floor
        rest = added - priced_total - split["wasm"] * idem
        lines += ["", f"So of the {added:.0f} µs a fresh json request adds over the no-op floor: its host calls "
                  f"about {priced_total:.0f} µs (priced), its wasm code about {split['wasm'] * idem:.0f} µs (perf), "
                  f"and about {rest:.0f} µs of Envoy's own work around them (more of the event loop, the kernel "
                  "and the configuration per request: a slower request is answered in smaller batches)."]
    else:
        lines += ["", f"No perf split in this run: {perf_note}."]
    lines += ["", END]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    if args.smoke:
        args.reps, args.duration, args.warmup = 1, 1, 0
        if Path(args.out).resolve() == (ROOT / "BENCHMARKS.md").resolve():
            raise SystemExit("profile: --smoke writes elsewhere (--out target/...)")
    for path, how in ((NOOP_WASM, "make bench-tools"), (PROBE_WASM, "make bench-tools")):
        if not path.is_file():
            raise SystemExit(f"{path} is missing ({how})")
    perf_note = "--smoke" if args.smoke else perf_usable()
    mach = machine()
    tmp = Path(tempfile.mkdtemp(prefix="idemgate-profile-"))
    body = tmp / "body.json"
    body.write_bytes(json_body(1024))
    hold = HoldServer()
    up = Envoy(upstream_config(), concurrency=1, name="upstream")
    cpu = {key: [] for key, _, _, _ in SHAPES}
    probe_cpu = {key: [] for key, _, _, _ in PROBES}
    probe_floor = []
    split = None
    try:
        for rep in range(args.reps):
            log(f"profile repetition {rep + 1}/{args.reps}")
            for key, _, shape, key_mode in SHAPES:
                r = measure(shape_config(shape, up.port, hold.port), body, key_mode, f"p{rep}-{key}-{os.getpid()}-", args)
                cpu[key].append(r)
                log(f"  {key:22s} {r['us']:7.1f} µs/request {r['rps']:8.0f} req/s")
            probe_floor.append(measure(shape_config("probe", up.port, hold.port, probe=""), body, "fresh",
                                       f"q{rep}-floor-", args)["us"])
            for key, spec, _, _ in PROBES:
                r = measure(shape_config("probe", up.port, hold.port, probe=spec.format(n=PROBE_CALLS)), body,
                            "fresh", f"q{rep}-{key}-", args)
                probe_cpu[key].append((r["us"] - probe_floor[-1]) / PROBE_CALLS)
                log(f"  probe {key:16s} {probe_cpu[key][-1]:6.2f} µs/call")
        if perf_note is None:
            data = tmp / "perf.data"
            measure(shape_config("json", up.port, hold.port), body, "fresh", f"perf-{os.getpid()}-", args, perf_to=data)
            split = perf_split(data)
    finally:
        up.stop()
        for p in children:
            kill(p)
        shutil.rmtree(tmp, ignore_errors=True)
    prices = {k: med(v) for k, v in probe_cpu.items()}
    calls = host_calls()
    if "json_fresh_key" not in calls:
        raise SystemExit("profile: the work example printed no json_fresh_key figure")
    section = render(args, mach, cpu, prices, calls, split, perf_note)
    out = write_section(args.out, BEGIN, END, section, heading="## Where a keyed request's time goes in Envoy\n\n")
    log(f"wrote {out}")
    print(section)


if __name__ == "__main__":
    sys.exit(main())
