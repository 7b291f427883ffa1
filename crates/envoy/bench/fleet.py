#!/usr/bin/env python3
"""Fleet bench: the filter with the remote store — `idemgate-store` on each of
its engines, `redis` (one `redis-server`), `postgres` (one PostgreSQL) and `redis+postgres` (both)
— against the local store, in the same run, variants alternating in every repetition. `make
bench-fleet` writes its section of BENCHMARKS.md; `--smoke` runs it for seconds into another file.

Measured with wrk (crates/envoy/bench/fresh.lua), POST 1 KB JSON, router path (the example's
`upstream` section removed, as bench.py's (c) rows):
  * fresh keys at 1 connection (claim, forward, store: the added latency per keyed request);
  * fresh keys at 8 connections (throughput ratio fleet / local);
  * replays of completed keys: the local store (same Envoy) against the fleet, where the keys were
    completed through Envoy A and are replayed through Envoy B.
Envoy reaches the service over mutual TLS, as deployed, with certificates made at start
(examples/store/certs.py), over HTTP/2 (`--store-http 1`: HTTP/1.1, for the A/B in BENCHMARKS.md).
Everything runs on 127.0.0.1; every process started here is killed by its PID at exit.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench
import postgres
from bench import (Envoy, HoldServer, children, cluster, http, idemgate_config, json_body, kill, load,
                   log, machine, med, upstream_config, wasm_config, wrk)
from sections import write_section

sys.path.insert(0, str(bench.ROOT / "examples" / "store"))
import certs  # noqa: E402  (examples/store/certs.py: the mutual TLS certificates)

BEGIN, END = "<!-- fleet:begin (written by make bench-fleet) -->", "<!-- fleet:end -->"
STORE_BIN = Path(os.environ.get("IDEMGATE_STORE_BIN", bench.TARGET / "release/idemgate-store"))
REPLAY_KEYS = 200
ENGINES = ("redis", "postgres", "redis+postgres")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_says(port, command, reply, timeout=1):
    """Sends one inline command to the `redis-server` on `port`; whether its reply starts with
    `reply`."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(command + b"\r\n")
        return s.recv(16).startswith(reply)


def start_redis(work):
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--protected-mode", "no", "--dir", str(work)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=bench._die_with_parent)
    children.append(proc)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            if redis_says(port, b"PING", b"+PONG"):
                return proc, port
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit("redis-server did not start")


def empty(redis_port=None, postgres_url=None):
    """Empties an engine's records (Redis FLUSHALL; PostgreSQL TRUNCATE of the one table, the
    shares' ledgers included): each fleet variant starts from an empty store, as each local
    variant does (its Envoy is new). Without it the records of earlier variants stay for their
    24 h TTL, and by the third repetition the bench client (one address, one identity) holds its
    whole share of the store: the rest of the run measured 429 `scope_quota_exceeded` answers."""
    if redis_port and not redis_says(redis_port, b"FLUSHALL", b"+OK", timeout=10):
        raise SystemExit("redis-server did not flush")
    if postgres_url:
        out = subprocess.run([postgres.binary("psql"), postgres_url, "-qc", "TRUNCATE idemgate_records"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"could not empty PostgreSQL: {out.stderr.strip()}")


def start_store(engine, tls, redis_port=None, postgres_url=None, workers=1):
    """One service. `workers`: its `--workers` (0: its default, one per core). 1 by default: on
    this machine the service shares 2 cores with both Envoys, wrk and the engines, as a service
    co-located with its Envoys would be deployed (its README says so)."""
    port = free_port()
    proc = subprocess.Popen(
        [str(STORE_BIN), "--listen", f"127.0.0.1:{port}", "--engine", engine]
        + (["--redis", f"redis://127.0.0.1:{redis_port}"] if redis_port else [])
        + (["--postgres", postgres_url] if postgres_url else [])
        + (["--workers", str(workers)] if workers else [])
        + certs.store_args(tls),
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, preexec_fn=bench._die_with_parent)
    children.append(proc)
    line = proc.stdout.readline()
    if "https://" not in line:
        raise SystemExit(f"idemgate-store did not start: {line!r}")
    return proc, port


# The service's cluster by HTTP version (`--store-http`): its protocol options, the ALPN it offers.
STORE_HTTP = {2: ({"http2_protocol_options": {"max_concurrent_streams": 100}}, ("h2",)),
              1: ({"http_protocol_options": {}}, ("http/1.1",))}


def fleet_config(up, hold, store_port, tls, http=2):
    """bench.py's idemgate configuration (router path) with `store: remote` and the service's
    cluster (HTTP/2 inside mutual TLS, at most 100 streams per connection, as docs/deploy/fleet-store.md says; or,
    with `http=1`, HTTP/1.1 inside the same mutual TLS, ALPN `http/1.1`)."""
    config = idemgate_config(up, hold)
    wasm = wasm_config(config)
    core = json.loads(wasm["configuration"]["value"])
    core["store"] = {"kind": "remote", "cluster": "idemgate_store", "timeout": "1s",
                     "record_secret_env": "IDEMGATE_RECORD_SECRET"}
    wasm["configuration"]["value"] = json.dumps(core)
    # The secret that seals the stored answers: the same for both Envoys, from the
    # environment every Envoy started here inherits.
    keys = wasm["vm_config"].setdefault("environment_variables", {}).setdefault("host_env_keys", [])
    if "IDEMGATE_RECORD_SECRET" not in keys:
        keys.append("IDEMGATE_RECORD_SECRET")
    os.environ.setdefault("IDEMGATE_RECORD_SECRET", "bench-record-secret-0123456789abcdef")
    options, alpn = STORE_HTTP[http]
    store = cluster("idemgate_store", store_port)
    store["typed_extension_protocol_options"] = {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
        "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
        "explicit_http_config": options}}
    store["transport_socket"] = certs.transport_socket(tls, alpn=alpn)
    config["static_resources"]["clusters"].append(store)
    return config


# name, store (None: local, else the remote store's engine), description, key mode, connections
VARIANTS = [("local_c1", None, "local store, fresh keys, 1 connection", "fresh", 1)]
VARIANTS += [(f"fleet_c1_{e}", e, f"remote store `{e}`, fresh keys, 1 connection", "fresh", 1) for e in ENGINES]
VARIANTS += [("local_c8", None, "local store, fresh keys, 8 connections", "fresh", 8)]
VARIANTS += [(f"fleet_c8_{e}", e, f"remote store `{e}`, fresh keys, 8 connections", "fresh", 8) for e in ENGINES]
VARIANTS += [("local_replay", None, "local store, replays (same Envoy), 8 connections", "cycle", 8)]
VARIANTS += [(f"fleet_replay_{e}", e, f"remote store `{e}`, replays through Envoy B of keys completed through A, "
              "8 connections", "cycle", 8) for e in ENGINES]


def prime(url, body, prefix):
    """Completes REPLAY_KEYS keys. A 503 (the store did not answer in time: nothing was claimed, the
    filter's failure mode) is retried after its Retry-After, at most 3 times per key, and logged
    with its problem type, so a store that fails shows in the log instead of only as a count."""
    headers = {"content-type": "application/json"}
    for i in range(REPLAY_KEYS):
        key = dict(headers, **{"idempotency-key": f"{prefix}{i}"})
        for attempt in range(4):
            status, answer = http(url + "/orders", "POST", body, key)
            if status != 503 or attempt == 3:
                break
            log(f"priming {prefix}{i}: 503 {problem_type(answer)}, retried")
            time.sleep(1)
        if status != 201:
            raise SystemExit(f"priming {prefix}{i} got {status}: {answer[:300]!r}")


def problem_type(body):
    """The problem+json `type` of an answer, or its first bytes."""
    try:
        return json.loads(body)["type"]
    except (ValueError, KeyError, TypeError):
        return repr(body[:80])


def replay_ready(url, body, prefix):
    """The last primed key replays (its completion has landed), within 5 s."""
    headers = {"content-type": "application/json", "idempotency-key": f"{prefix}{REPLAY_KEYS - 1}"}
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        status, _ = http(url + "/orders", "POST", body, headers)
        if status == 201:
            return
        time.sleep(0.05)
    raise SystemExit("primed keys never replayed")


def run(args, up, hold, store_ports, backends, tls, body_file):
    body = body_file.read_bytes()
    variants = [v for v in VARIANTS if v[1] is None or v[1] in store_ports]
    results = {v[0]: [] for v in variants}
    for rep in range(args.reps):
        log(f"fleet repetition {rep + 1}/{args.reps}")
        for name, store, _, key_mode, conns in variants:
            config = (lambda: fleet_config(up, hold, store_ports[store], tls, args.store_http)) if store else (
                lambda: idemgate_config(up, hold))
            if store:
                empty(*backends[store])
            envoys = [Envoy(config(), name=name)]
            if key_mode == "cycle" and store:
                envoys.append(Envoy(config(), name=name + "-b"))
            try:
                prefix = f"r{rep}-{name}-{os.getpid()}-"
                mode = "fresh"
                if key_mode == "cycle":
                    prime(envoys[0].url, body, prefix)
                    replay_ready(envoys[-1].url, body, prefix)
                    mode = f"cycle:{REPLAY_KEYS}"
                target = envoys[-1]
                shape = {"threads": 1, "conns": 1} if conns == 1 else {"threads": 2, "conns": 8}
                if args.warmup:
                    wrk(target.url, "POST", "/orders", body_file, mode, prefix + "w", args.warmup, **shape)
                r = wrk(target.url, "POST", "/orders", body_file, mode, prefix, args.duration, **shape)
                r["counters"] = {c: target.counter(c) for c in ("claimed", "replayed", "conflict", "store_error")}
                results[name].append(r)
                log(f"  {name:27s} {r['rps']:9.0f} req/s p50 {r['p50']:.3f} ms p99 {r['p99']:.3f} ms "
                    f"non2xx {r['non2xx']} {r['counters']}")
            finally:
                for envoy in envoys:
                    envoy.stop()
    return results


def render(args, mach, load0, load1, results):
    engines = [e for e in ENGINES if e in args.engines]
    variants = [v for v in VARIANTS if v[1] is None or v[1] in engines]
    m = {name: {k: med([r[k] for r in rs]) for k in ("rps", "p50", "p99")} for name, rs in results.items()}
    non2xx = {name: sum(r["non2xx"] for r in rs) for name, rs in results.items()}
    lines = [BEGIN, "",
             f"`make bench-fleet` ({mach['date']}; {mach['cpu']}, {mach['cores']} cores, Envoy {mach['envoy']}; "
             f"load average {load0[0]:.1f} before, {load1[0]:.1f} after; {args.reps} repetition(s) × "
             f"{args.duration} s per variant, variants alternating; medians). POST 1 KB JSON through the "
             "filter (router path) to a direct-response upstream Envoy; the remote store is "
             "`idemgate-store` (release build, "
             + (f"`--workers {args.store_workers}`" if args.store_workers else "one worker thread per core")
             + f", reached over HTTP/{'2' if args.store_http == 2 else '1.1'} inside mutual TLS), one service per engine, each on backends of its own: "
             + ", ".join({"redis": "`redis` on a `redis-server` (no persistence)",
                          "postgres": f"`postgres` on a PostgreSQL {postgres.version()} (its defaults: "
                                      "fsync and synchronous_commit on)",
                          "redis+postgres": "`redis+postgres` on both"}[e] for e in engines)
             + "; all on this machine.", "",
             "| variant | req/s | p50 | p99 | non-2xx |", "|---|---|---|---|---|"]
    for name, _, desc, _, _ in variants:
        lines.append(f"| {desc} | {m[name]['rps']:.0f} | {m[name]['p50']:.3f} ms | {m[name]['p99']:.3f} ms | "
                     f"{non2xx[name]} |")
    lines += ["", "| engine | added p50 per keyed request, 1 connection (fleet − local; goal ≤ 0.3 ms) | "
              "throughput at 8 connections, fleet / local (goal ≥ 0.6) | replay from the other Envoy |",
              "|---|---|---|---|"]
    for e in engines:
        added = m[f"fleet_c1_{e}"]["p50"] - m["local_c1"]["p50"]
        ratio = m[f"fleet_c8_{e}"]["rps"] / m["local_c8"]["rps"] if m["local_c8"]["rps"] else 0.0
        rep_ = m[f"fleet_replay_{e}"]
        lines.append(f"| `{e}` | **{added:.3f} ms** | **{ratio:.2f}** | {rep_['rps']:.0f} req/s, p50 "
                     f"{rep_['p50']:.3f} ms |")
    lines += ["", f"Local replay (same Envoy): {m['local_replay']['rps']:.0f} req/s, p50 "
              f"{m['local_replay']['p50']:.3f} ms.", "",
              "Each fleet request makes one callout to the service for its claim; its completion, "
              "after the answer, travels with its worker's others in one batched callout (sent 10 ms "
              "after the first, at once at 64). Each operation is, on `redis`, one Redis script call (a compare-and-set "
              "decided without a read; two when it is refused and the new decision writes), on `postgres` "
              "one or two statements (each its own commit), on `redis+postgres` the PostgreSQL write "
              "first, then Redis.", "", END]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", default=str(bench.ROOT / "BENCHMARKS.md"))
    ap.add_argument("--smoke", action="store_true", help="1 repetition of 2 s, no warm-up")
    ap.add_argument("--engines", default=",".join(ENGINES), help="the remote store's engines to measure")
    ap.add_argument("--store-workers", type=int, default=1,
                    help="each service's --workers (0: its default, one per core)")
    ap.add_argument("--store-http", type=int, choices=sorted(STORE_HTTP), default=2,
                    help="the HTTP version of Envoy's cluster to the service (2, as docs/deploy/fleet-store.md says)")
    args = ap.parse_args()
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = set(args.engines) - set(ENGINES)
    if unknown or not args.engines:
        raise SystemExit(f"--engines: {sorted(unknown)} not among {ENGINES}")
    if args.smoke:
        args.reps, args.duration, args.warmup = 1, 2, 0
    for path, make in ((bench.FILTER_WASM, "build-filter"), (STORE_BIN, "build-store")):
        if not Path(path).is_file():
            raise SystemExit(f"{path} is missing: run `make {make}`")
    work = Path(tempfile.mkdtemp(prefix="idemgate-bench-fleet-"))
    up = None
    servers = []  # PostgreSQL servers, stopped after the services that use them
    try:
        mach = machine()
        load0 = load()
        store_ports = {}
        backends = {}  # engine -> (redis port, PostgreSQL URL), to empty before each variant
        tls = certs.make(work / "certs")
        for engine in args.engines:
            redis_port = start_redis(work)[1] if engine != "postgres" else None
            postgres_url = None
            if engine != "redis":
                server = postgres.start()
                servers.append(server)
                postgres_url = server.url
            store_ports[engine] = start_store(engine, tls, redis_port, postgres_url, args.store_workers)[1]
            backends[engine] = (redis_port, postgres_url)
        up = Envoy(upstream_config(), name="upstream")
        hold = HoldServer()
        body_file = work / "body-1k.json"
        body_file.write_bytes(json_body(1024))
        results = run(args, up.port, hold.port, store_ports, backends, tls, body_file)
        load1 = load()
        section = render(args, mach, load0, load1, results)
        out = write_section(args.out, BEGIN, END, section,
                            heading="## Fleet: the remote store against the local store\n\n")
        print(section)
        log(f"wrote {out}")
    finally:
        if up is not None:
            up.stop()
        for proc in list(children):
            kill(proc)
        for server in servers:
            server.stop()
        import shutil
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
