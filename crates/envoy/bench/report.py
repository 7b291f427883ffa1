"""How `make bench` writes its section of BENCHMARKS.md from a run's results: medians over
repetitions, ratios paired within each repetition, and the tables. Used by bench.py."""

import statistics
from pathlib import Path

from configs import ROOT
from variants import VARIANTS

BENCH = Path(__file__).resolve().parent
BEGIN, END = "<!-- bench:begin (written by make bench) -->", "<!-- bench:end -->"


def med(xs):
    return statistics.median(xs) if xs else 0.0


def spread(xs):
    return (min(xs), max(xs)) if xs else (0.0, 0.0)


def fmt_ms(x):
    return f"{x * 1000:.0f} µs" if x < 1 else f"{x:.2f} ms"


def paired(results, name, ref, field="rps", op=lambda x, y: x / y if y else 0.0):
    """Median over repetitions of `op(variant, reference)` taken within each repetition: variants
    alternate inside a repetition, so pairing cancels the machine's drift between repetitions."""
    pairs = [op(a[field], b[field]) for a, b in zip(results.get(name, []), results.get(ref, []))]
    return med(pairs) if pairs else 0.0


def render(args, mach, load0, load1, results, startups, mem, core_r, size_r):
    L = []
    w = L.append
    w(BEGIN)
    w("")
    w(f"Measured {mach['date']} with `{'make test-bench (smoke)' if args.smoke else 'make bench'}`. "
      f"Machine: {mach['cores']} cores ({mach['cpu']}), {mach['mem_gib']:.1f} GiB, Linux {mach['kernel']}; "
      f"Envoy {mach['envoy']} (V8), {mach['rustc']}, Node {mach['node']}, wrk (Debian). "
      f"Load average (1/5/15 min) before: {load0[0]:.2f} / {load0[1]:.2f} / {load0[2]:.2f}, after: "
      f"{load1[0]:.2f} / {load1[1]:.2f} / {load1[2]:.2f}" + (" — **other work shared the 2 cores: absolute figures are "
      "noisy, compare ratios**" if max(load0[0], load1[0]) > 1.5 else "") + ".")
    w("")
    # Envoy end to end.
    base_rps = {k: med([r["rps"] for r in results[k]]) for k in results}
    w(f"### Envoy end to end ({args.reps} alternating repetitions × {args.duration} s per variant)")
    w("")
    w(f"Each run starts a fresh main Envoy (`--concurrency 2`) and measures with "
      f"`wrk -t2 -c20 -d{args.duration}s --latency -s crates/envoy/bench/fresh.lua` after a {args.warmup} s warm-up; "
      "the upstream is one Envoy (`--concurrency 1`, buffer + `direct_response` 201 with a 35-byte JSON body). "
      "Median over the repetitions, [min–max] in brackets. Ratio = the median over the repetitions of "
      "(req/s ÷ req/s of the matching (a) in the same repetition; GET to GET, POST to POST of the same "
      "size): the variants alternate within a repetition, so pairing them cancels the machine's drift "
      "between repetitions. The `1 connection` rows (`wrk -t1 -c1`: unloaded latency, what a request "
      "pays) are compared to the no-op filter at 1 connection.")
    w("")
    w("| variant | req/s | p50 | p99 | ratio to (a) | non-2xx |")
    w("|---|---|---|---|---|---|")
    for name, shape, desc, method, path, size, key_mode, _ in VARIANTS:
        rs = results[name]
        rps = [r["rps"] for r in rs]
        p50 = [r["p50"] for r in rs]
        p99 = [r["p99"] for r in rs]
        ref = "a_get" if method == "GET" else ("a_post64k" if size == 65536 else "a_post1k")
        if name.endswith("_c1"):
            ref = "n_post1k_c1"
        lo, hi = spread(rps)
        if not base_rps.get(ref):
            continue
        w(f"| {desc} | {med(rps):.0f} [{lo:.0f}–{hi:.0f}] | {fmt_ms(med(p50))} [{fmt_ms(min(p50))}–{fmt_ms(max(p50))}] "
          f"| {fmt_ms(med(p99))} [{fmt_ms(min(p99))}–{fmt_ms(max(p99))}] | {paired(results, name, ref):.3f} "
          f"| {sum(r['non2xx'] for r in rs)} of {sum(r['requests'] for r in rs)} |")
    w("")
    minus = lambda x, y: x - y  # noqa: E731
    if results.get("f_json1k") and results.get("c_json1k") and results.get("n_post1k"):
        det = paired(results, "f_json1k", "n_post1k")
        rtr = paired(results, "c_json1k", "n_post1k")
        line = (f"Detached execution straight to the cluster (the first detached path, now "
                f"`upstream.cluster_skipping_routes_and_filters`), same run, as ratios to the no-op floor (a′): "
                f"1 KB throughput detached {det:.3f} vs router path {rtr:.3f} (detached ÷ router "
                f"{paired(results, 'f_json1k', 'c_json1k'):.3f})")
        if results.get("f_json64k") and results.get("c_json64k"):
            line += (f"; 64 KB {paired(results, 'f_json64k', 'n_post64k'):.3f} vs "
                     f"{paired(results, 'c_json64k', 'n_post64k'):.3f}")
        if results.get("f_json1k_c1") and results.get("c_json1k_c1"):
            line += (f"; p50 added over (a′) at 1 connection: detached "
                     f"{paired(results, 'f_json1k_c1', 'n_post1k_c1', 'p50', minus) * 1000:+.0f} µs, router "
                     f"{paired(results, 'c_json1k_c1', 'n_post1k_c1', 'p50', minus) * 1000:+.0f} µs; p99 ratio "
                     f"detached {paired(results, 'f_json1k_c1', 'n_post1k_c1', 'p99'):.2f}, router "
                     f"{paired(results, 'c_json1k_c1', 'n_post1k_c1', 'p99'):.2f}")
        w(line + ".")
        w("")
    if results.get("r_json1k") and results.get("f_json1k") and results.get("n_post1k"):
        line = (f"Re-entry (the detached exchange goes back into Envoy through the internal listener "
                f"`idemgate_reentry`, its routes and the filters after idemgate, as shipped), same run: 1 KB "
                f"throughput at 20 connections as a ratio to the no-op floor (a′): re-entry "
                f"{paired(results, 'r_json1k', 'n_post1k'):.3f}, straight to the cluster "
                f"{paired(results, 'f_json1k', 'n_post1k'):.3f} (re-entry ÷ straight "
                f"{paired(results, 'r_json1k', 'f_json1k'):.3f}, re-entry ÷ router path "
                f"{paired(results, 'r_json1k', 'c_json1k'):.3f})")
        if results.get("r_json64k") and results.get("f_json64k"):
            line += (f"; 64 KB {paired(results, 'r_json64k', 'n_post64k'):.3f} vs "
                     f"{paired(results, 'f_json64k', 'n_post64k'):.3f}")
        if results.get("r_json1k_c1") and results.get("f_json1k_c1"):
            line += (f"; p50 added over (a′) at 1 connection: re-entry "
                     f"{paired(results, 'r_json1k_c1', 'n_post1k_c1', 'p50', minus) * 1000:+.0f} µs, straight "
                     f"{paired(results, 'f_json1k_c1', 'n_post1k_c1', 'p50', minus) * 1000:+.0f} µs (the second "
                     f"pass: {paired(results, 'r_json1k_c1', 'f_json1k_c1', 'p50', minus) * 1000:+.0f} µs)")
        w(line + ".")
        w("")
    w("Startup (spawn → `/ready` LIVE), median: " + ", ".join(
        f"{shape} {med(v):.2f} s" for shape, v in startups.items()) + ".")
    w("")
    if mem:
        w("### Envoy memory (RSS of the Envoy process, 2 workers)")
        w("")
        w(f"At rest: plain {mem['plain'] / 1024:.0f} MiB, no-op wasm {mem['noop'] / 1024:.0f} MiB, idemgate "
          f"{mem['idemgate'] / 1024:.0f} MiB. idemgate as shipped (capacity 10000): {mem['rest'] / 1024:.0f} MiB at rest, "
          f"{mem['after'] / 1024:.0f} MiB after {args.mem_duration} s of fresh keys (1 KB POST): {mem['claimed']} claimed, "
          f"{mem['quota']} answered 429 once the one load client held its share (`shares.peer`, 10% of the capacity), "
          f"{mem['store_full']} answered `store_full` (503) — memory is bounded by `capacity`, one client's part by its share.")
        w("")
        inf = mem.get("inflight", {})
        if inf:
            names = {"router": "router path", "direct": "detached straight to the cluster",
                     "reentry": "detached through re-entry"}
            n = next(iter(inf.values()))["n"]
            w(f"Per in-flight claimed request (1 KB body, {n} held at once on an upstream that never answers; "
              "RSS delta ÷ requests): " + ", ".join(
                  f"{names.get(label, label)} {v['per_request_kib']:.1f} KiB ({v['held']} reached the upstream)"
                  for label, v in inf.items())
              + ". The detached path keeps the request in the filter (and the buffer filter) and an async-client "
              "stream instead of the router's upstream request; re-entry adds the internal connection and the "
              "second pass's stream (its buffer filter and router).")
            w("")
    # Core.
    w("### The core (`crates/envoy/bench/core_bench.rs`): native, and wasm32-wasip1 in V8 and in wasmtime")
    w("")
    w("The same program four ways: natively; natively with SHA-256 in portable code (`--features "
      "bench-portable-sha256`: the native build otherwise runs on the CPU's SHA extensions, which wasm "
      "does not have, so this is the like-for-like comparison of the compiled code); as wasm32-wasip1 in "
      "V8 through Node's WASI (V8 is the engine Envoy runs the filter in); and in wasmtime 48 with "
      "Cranelift's optimising settings (host-tests' `wasi_run` example). Best of 40 batches of ≈2 ms each "
      "(the batch no other process interrupted). Ratios are time ÷ native time.")
    w("")
    w("| figure | native | native, portable SHA-256 | V8 | wasmtime | V8 ÷ native | wasmtime ÷ native "
      "| V8 ÷ portable | wasmtime ÷ portable |")
    w("|---|---|---|---|---|---|---|---|---|")

    def slower(engine, base, k):
        unit = core_r["native_units"][k]
        b, e = core_r[base].get(k, 0.0), core_r[engine].get(k, 0.0)
        return (b / e if unit == "MB/s" else e / b) if b and e else 0.0

    for k, v in core_r["native"].items():
        unit = core_r["native_units"][k]
        cells = [f"{core_r[label].get(k, 0.0):,.1f} {unit}" for label in ("native", "portable", "wasm", "wasmtime")]
        ratios = [f"{slower(e, b, k):.2f}×" for b in ("native", "portable") for e in ("wasm", "wasmtime")]
        w(f"| {k} | " + " | ".join(cells + ratios) + " |")
    w("")
    w("### Artifacts")
    w("")
    w("| artifact | raw | gzip -9 |")
    w("|---|---|---|")
    for label, (raw, gz) in size_r.items():
        w(f"| {label} | {raw / 1024:.1f} KiB ({raw} B) | {gz / 1024:.1f} KiB |")
    w("")
    # Goals.
    def ratio(k, ref):
        return paired(results, k, ref)
    w("### Goals (the first speed goals; the filter's size and speed work set (c), (d) and the filter's size)")
    w("")
    w("| goal | measured | met |")
    w("|---|---|---|")
    goals = []
    b = ratio("b_get", "a_get")
    goals.append(("(b) unguarded route ≥ 0.97 × (a)", f"{b:.3f}", b >= 0.97))
    c1 = ratio("c_json1k", "n_post1k")
    c1r = ratio("c_raw1k", "n_post1k")
    goals.append(("(c) 1 KB ≥ 0.85 × (a′)", f"json {c1:.3f}, raw {c1r:.3f}", min(c1, c1r) >= 0.85))
    minus = lambda x, y: x - y  # noqa: E731
    add = paired(results, "c_json1k_c1", "n_post1k_c1", "p50", minus) * 1000
    addr = paired(results, "c_raw1k_c1", "n_post1k_c1", "p50", minus) * 1000
    goals.append(("(c) 1 KB ≤ 50 µs added p50 over (a′) (1 connection, unloaded)",
                  f"json {add:+.0f} µs, raw {addr:+.0f} µs", max(add, addr) <= 50))
    rp = ratio("d_replay1k", "c_json1k")
    goals.append(("(d) replay ≥ 2 × the upstream POST path (c json 1 KB)", f"{rp:.2f}×", rp >= 2.0))
    raw_w = core_r["wasm"].get("fingerprint_raw_64k", 0.0)
    raw_t = core_r["wasmtime"].get("fingerprint_raw_64k", 0.0)
    goals.append(("raw fingerprint ≥ 400 MB/s in wasm (64 KB)", f"V8 {raw_w:.0f} MB/s, wasmtime {raw_t:.0f} MB/s",
                  max(raw_w, raw_t) >= 400))
    def worst(engine, base):
        rs = [slower(engine, base, k) for k in core_r["native"]]
        return max(rs) if rs else 0.0

    goals.append(("core in wasm within 1.5× of native (worst figure)",
                  f"V8 {worst('wasm', 'native'):.2f}×, wasmtime {worst('wasmtime', 'native'):.2f}× "
                  f"(against portable SHA-256: V8 {worst('wasm', 'portable'):.2f}×, wasmtime "
                  f"{worst('wasmtime', 'portable'):.2f}×)",
                  max(worst("wasm", "native"), worst("wasmtime", "native")) <= 1.5))
    fw = size_r.get("filter .wasm (idemgate_envoy.wasm)", (0, 0))[0]
    goals.append(("filter .wasm ≤ 150 KB", f"{fw} B", 0 < fw <= 150_000))
    for g, m, ok in goals:
        w(f"| {g} | {m} | {'yes' if ok else '**no**'} |")
    w("")
    w("Commands: `make bench` = `make setup build` then `python3 crates/envoy/bench/bench.py` (builds the "
      "no-op filter and the core bench: `make bench-tools`). Per run: `" + next(iter(results.values()))[0]["cmd"].replace(str(ROOT) + "/", "")
      .replace(str(BENCH) + "/", "") + "` (and likewise per variant).")
    w("")
    w(END)
    return "\n".join(L)
