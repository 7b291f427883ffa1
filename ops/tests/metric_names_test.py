#!/usr/bin/env python3
"""Every metric the dashboard and the alert rules name exists, in a real Envoy and store service.

Starts redis-server, the store service (`idemgate-store --engine redis`, mutual TLS with
certificates made by examples/store/certs.py), a small upstream and a real Envoy with the filter
on the remote store (`on_store_error: "pass_through"`), all on free ports of 127.0.0.1. Drives a
fresh request, its replay, a 409 (the first held in flight), a 422 (the key reused), a request
without a key; scrapes the store's `/metrics`; then stops the store service and sends a keyed
request, which passes degraded (`Idempotent-Degraded: store_unavailable`). Then it scrapes
Envoy's `/stats/prometheus` and checks that every metric name each PromQL expression of
ops/grafana/idemgate.json and ops/prometheus/idemgate.rules.yaml names is in one of the two
outputs. Each alert's `runbook_url` must name a section of docs/operate/runbooks.md.

The check refuses a wrong name: it is run once with a deliberately misspelt query, which must be
reported. Every process is killed by PID, also on failure. Prints `N passed, N failed`.

    metric_names_test.py --wasm FILTER.wasm --store STORE-BINARY
"""

import argparse
import json
import re
import shutil
import ssl
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "crates/envoy/tests/deploy"))
sys.path.insert(0, str(ROOT / "examples/store"))
import certs  # noqa: E402  (examples/store/certs.py: the mutual TLS certificates)
from deploy_test import (  # noqa: E402  (process and HTTP helpers of the deploy test)
    Served,
    children,
    envoy_binary,
    free_port,
    kill,
    request,
    start,
    wait_for,
)

DASHBOARD = ROOT / "ops/grafana/idemgate.json"
RULES = ROOT / "ops/prometheus/idemgate.rules.yaml"
RUNBOOKS = ROOT / "docs/operate/runbooks.md"
SECRET = "metric-names-test-record-secret-0123456789"

FILTER_CONFIG = {
    "routes": [{"prefix": "/orders"}],
    "store": {"kind": "remote", "cluster": "idemgate_store", "timeout": "1s",
              "record_secret_env": "IDEMGATE_RECORD_SECRET"},
    "on_store_error": "pass_through",
}

# ------------------------------------------------------------------------------------------------
# PromQL: the metric names an expression names


# Words of PromQL that are not metric names where they stand outside `{}`, `[]` and strings.
KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or",
    "unless", "inf", "nan", "atan2",
}


def metric_names(expr):
    """The metric names in a PromQL expression: identifiers not followed by `(` (functions,
    aggregations), outside label matchers, ranges, strings and grouping lists. Grafana's
    variables (`$__rate_interval`) are taken out first."""
    text = re.sub(r"\$\{?\w+\}?", "1m", expr)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    text = re.sub(r"'(?:\\.|[^'\\])*'", "''", text)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = m.group(0)
        rest = text[m.end():].lstrip()
        if rest.startswith("(") or word.lower() in KEYWORDS:
            continue
        if m.start() > 0 and (text[m.start() - 1].isdigit() or text[m.start() - 1] == "."):
            continue  # the exponent or unit of a number (1e-9)
        names.add(word)
    return names


def exposed_names(text):
    """The sample names of a Prometheus text exposition."""
    names = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            names.add(re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line).group(0))
    return names


def dashboard_queries(dashboard):
    out = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            out.append((f"panel {panel['title']!r} {target['refId']}", target["expr"]))
    return out


def load_rules():
    import yaml  # pyyaml: setup-ops installs it where it lacks
    return yaml.safe_load(RULES.read_text())


def rule_queries(rules):
    return [(f"alert {r['alert']}", r["expr"]) for g in rules["groups"] for r in g["rules"]]


def unknown(queries, exposed):
    """[(where, name)] of every name a query names that the scrapes lack."""
    return [(where, name) for where, expr in queries for name in sorted(metric_names(expr))
            if name not in exposed]


def runbook_anchors():
    """GitHub's anchors of the runbooks' headings."""
    anchors = set()
    for line in RUNBOOKS.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^a-z0-9 _-]", "", title).replace(" ", "-"))
    return anchors


# ------------------------------------------------------------------------------------------------
# the stack


class Upstream:
    """The application: 201 for every POST; a key starting with `hold` waits for `release`."""

    def __init__(self):
        import http.server
        self.arrived, self.release = threading.Event(), threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", "0")))
                if self.headers.get("idempotency-key", "").startswith("hold"):
                    outer.arrived.set()
                    outer.release.wait(20)
                body = b'{"ok":true}'
                self.send_response(201)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.served = Served(Handler)
        self.port = self.served.port


def envoy_yaml(admin_port, port, upstream_port, store_port, wasm, tls):
    def addr(p):
        return {"socket_address": {"address": "127.0.0.1", "port_value": p}}

    def cluster(name, p, **extra):
        return {"name": name, "connect_timeout": "1s", "type": "STATIC",
                "load_assignment": {"cluster_name": name, "endpoints": [
                    {"lb_endpoints": [{"endpoint": {"address": addr(p)}}]}]}, **extra}

    wasm_filter = {
        "name": "envoy.filters.http.wasm",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
            "config": {
                "name": "idemgate", "root_id": "idemgate", "failure_policy": "FAIL_CLOSED",
                "vm_config": {"vm_id": "idemgate", "runtime": "envoy.wasm.runtime.v8",
                              "code": {"local": {"filename": str(wasm)}},
                              "environment_variables": {"host_env_keys": ["IDEMGATE_RECORD_SECRET"]}},
                "configuration": {"@type": "type.googleapis.com/google.protobuf.StringValue",
                                  "value": json.dumps(FILTER_CONFIG)},
            },
        },
    }
    hcm = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager."
                 "v3.HttpConnectionManager",
        "stat_prefix": "ingress",
        "route_config": {"virtual_hosts": [{"name": "app", "domains": ["*"], "routes": [
            {"match": {"prefix": "/"}, "route": {"cluster": "app", "timeout": "15s"}}]}]},
        "http_filters": [
            wasm_filter,
            {"name": "envoy.filters.http.buffer", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer",
                "max_request_bytes": 1048576}},
            {"name": "envoy.filters.http.router", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}},
        ],
    }
    h2 = {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
        "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
        "explicit_http_config": {"http2_protocol_options": {"max_concurrent_streams": 100}}}}
    return {
        "admin": {"address": addr(admin_port)},
        "static_resources": {
            "listeners": [{"name": "main", "address": addr(port), "filter_chains": [{"filters": [
                {"name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}]}]}],
            "clusters": [
                cluster("app", upstream_port),
                cluster("idemgate_store", store_port, typed_extension_protocol_options=h2,
                        transport_socket=certs.transport_socket(tls)),
            ],
        },
    }


def post(url, key, body=b'{"sku":"book","qty":1}'):
    headers = {"content-type": "application/json"}
    if key is not None:
        headers["idempotency-key"] = key
    return request(url + "/orders", "POST", body, headers)


def store_metrics(store_port, tls):
    context = ssl.create_default_context(cafile=tls["ca"])
    context.load_cert_chain(tls["envoy_cert"], tls["envoy_key"])
    url = f"https://localhost:{store_port}/metrics"
    with urllib.request.urlopen(url, context=context, timeout=5) as r:
        return r.read().decode()


class Tally:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, name, ok, why=""):
        if ok:
            self.passed += 1
            print(f"test {name} ... ok", flush=True)
        else:
            self.failed += 1
            print(f"test {name} ... FAILED{': ' + why if why else ''}", flush=True)


def run(args, tmp, tally):
    dashboard = json.loads(DASHBOARD.read_text())
    rules = load_rules()
    queries = dashboard_queries(dashboard) + rule_queries(rules)

    # The parser itself, on what it must and must not take for a name.
    tally.check("promql_names_are_parsed", metric_names(
        'histogram_quantile(0.99, sum by (le) (rate(a_bucket{outcome=~"remote_.*"}[$__rate_interval])))'
        ' / clamp_min(sum(rate(b_total[5m])) + c, 1e-9) > bool 0') == {"a_bucket", "b_total", "c"},
        "metric_names() misreads PromQL")

    anchors = runbook_anchors()
    missing = [r["alert"] for g in rules["groups"] for r in g["rules"]
               if not r.get("annotations", {}).get("runbook_url", "").startswith(
                   "docs/operate/runbooks.md#")
               or r["annotations"]["runbook_url"].split("#", 1)[1] not in anchors
               or not r.get("for") or not r.get("labels", {}).get("severity")]
    tally.check("each_alert_has_for_severity_and_a_runbook_section", not missing,
                f"{missing}")

    redis_port = free_port()
    redis = start([shutil.which("redis-server") or "redis-server", "--port", str(redis_port),
                   "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                   "--protected-mode", "no"], tmp / "redis.log")
    wait_for("redis-server", lambda: request_redis_ping(redis_port), redis, tmp / "redis.log")

    tls = certs.make(str(tmp / "certs"))
    store_port = free_port()
    store = start([args.store, "--listen", f"127.0.0.1:{store_port}", "--engine", "redis",
                   "--redis", f"redis://127.0.0.1:{redis_port}"] + certs.store_args(tls),
                  tmp / "store.log")
    wait_for("the store service", lambda: store_metrics(store_port, tls) is not None, store,
             tmp / "store.log")

    upstream = Upstream()
    admin_port, port = free_port(), free_port()
    config = tmp / "envoy.json"
    config.write_text(json.dumps(envoy_yaml(admin_port, port, upstream.port, store_port,
                                            args.wasm, tls)))
    log = tmp / "envoy.log"
    import os
    env = dict(os.environ, IDEMGATE_RECORD_SECRET=SECRET)
    envoy = start([envoy_binary(), "-c", str(config), "--concurrency", "1",
                   "--disable-hot-restart", "-l", "warn"], log, env=env)
    admin = f"http://127.0.0.1:{admin_port}"
    wait_for("envoy", lambda: request(admin + "/ready", timeout=1)[2].strip() == b"LIVE", envoy,
             log)
    url = f"http://127.0.0.1:{port}"

    # Fresh, replay, 422, no key, 409 (the first held in flight).
    fresh = post(url, "fresh-1")
    # The finish travels after the answer, batched with its worker's others (at most 10 ms
    # later): a retry before it lands is rightly a 409, so the replay waits for it to land.
    deadline = time.monotonic() + 5
    while b"idemgate.stored: 1" not in request(admin + "/stats?filter=idemgate.stored$")[2]:
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    replay = post(url, "fresh-1")
    reused = post(url, "fresh-1", b'{"sku":"other","qty":2}')
    bare = post(url, None)
    held = {}
    first = threading.Thread(target=lambda: held.setdefault("first", post(url, "hold-1")))
    first.start()
    upstream.arrived.wait(10)
    conflict = post(url, "hold-1")
    upstream.release.set()
    first.join(20)
    seen = [(fresh[0], fresh[1].get("idempotent-replayed")),
            (replay[0], replay[1].get("idempotent-replayed")), reused[0], bare[0], conflict[0],
            held.get("first", (None,))[0]]
    tally.check("requests_drive_each_decision",
                seen == [(201, None), (201, "true"), 422, 201, 409, 201], f"{seen}")

    store_text = store_metrics(store_port, tls)
    kill(store)

    # The store is gone: a keyed request passes degraded.
    degraded = post(url, "down-1")
    tally.check("a_store_that_cannot_answer_passes_degraded",
                (degraded[0], degraded[1].get("idempotent-degraded")) == (201, "store_unavailable"),
                f"{degraded[0]} {dict(degraded[1])}")

    envoy_text = request(admin + "/stats/prometheus")[2].decode()
    stats = request(admin + "/stats?filter=idemgate")[2].decode()
    tally.check("the_degraded_counters_rose",
                "idemgate.degraded: 1" in stats and "idemgate.degraded.store_unavailable: 1" in stats,
                stats)

    exposed = exposed_names(envoy_text) | exposed_names(store_text)
    (tmp / "exposed.txt").write_text("\n".join(sorted(exposed)) + "\n")
    bad = unknown(dashboard_queries(dashboard), exposed)
    tally.check("every_dashboard_metric_is_exposed", not bad, f"{bad}")
    bad = unknown(rule_queries(rules), exposed)
    tally.check("every_alert_metric_is_exposed", not bad, f"{bad}")
    named = set().union(*(metric_names(e) for _, e in queries))
    tally.check("the_queries_name_the_new_counters",
                {"idemgate_degraded", "idemgate_degraded_store_full",
                 "idemgate_degraded_store_unavailable",
                 "idemgate_store_operation_seconds_bucket"} <= named, f"{sorted(named)}")

    # The check can fail: a misspelt name is reported.
    wrong = queries + [("deliberately wrong", "sum(rate(idemgate_claimd[5m]))")]
    tally.check("a_wrong_name_is_refused",
                unknown(wrong, exposed) == [("deliberately wrong", "idemgate_claimd")],
                f"{unknown(wrong, exposed)}")


def request_redis_ping(port):
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
        s.sendall(b"PING\r\n")
        return s.recv(16).startswith(b"+PONG")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wasm", required=True)
    ap.add_argument("--store", required=True)
    args = ap.parse_args()
    args.wasm = str(Path(args.wasm).resolve())
    tally = Tally()
    tmp = Path(tempfile.mkdtemp(prefix="idemgate-ops-"))
    started = time.monotonic()
    try:
        run(args, tmp, tally)
    except Exception:  # noqa: BLE001  (a crash is a failure, reported with its trace)
        traceback.print_exc()
        tally.check("run", False, f"crashed (logs in {tmp})")
    finally:
        for proc in reversed(children):
            kill(proc)
    print(f"{tally.passed} passed, {tally.failed} failed ({time.monotonic() - started:.0f}s)")
    if tally.failed == 0:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(1 if tally.failed else 0)


if __name__ == "__main__":
    main()
