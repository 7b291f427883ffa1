#!/usr/bin/env python3
"""Observability, for real: examples/envoy/envoy.yaml itself, run in a real Envoy.

Its access log prints each request's decision from the filter state the filter writes
(`%FILTER_STATE(wasm.idemgate.decision:PLAIN)%`, `...outcome...`). This drives one request per
decision through it — claimed/stored, replayed, 409 conflict, 422 mismatch, 400 invalid and
missing key, released (upstream 503), in doubt (upstream closed the connection), an unguarded
request — and checks the access log line of each. Then it reads Envoy's `/stats/prometheus` and
checks the Prometheus names of the counters that the README's stats table lists.

It runs twice: the example as written (claimed requests take the filter's own detached exchange,
back into Envoy through its re-entry listener `idemgate_reentry`: checked from that listener's
request count), and without its `upstream` line (Envoy's router carries them, nothing re-enters).
Only that line, ports, the listen address and the .wasm path of the example are changed. Envoy is
killed by PID, also on failure. Prints `N passed, N failed`.

    access_log_test.py --wasm FILTER.wasm
"""

import argparse
import http.server
import json
import re
import shutil
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
from deploy_test import (  # noqa: E402  (process and HTTP helpers of the deploy test)
    ROOT,
    Served,
    children,
    envoy_binary,
    free_port,
    kill,
    request,
    start,
    wait_for,
)

SECRET = "access-log-test-secret-0123456789"


class Upstream:
    """The application: what it does depends on the key (201, 503, hang up, hold)."""

    def __init__(self):
        self.hits = 0
        self.release = threading.Event()
        self.arrived = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", "0")))
                outer.hits += 1
                key = self.headers.get("idempotency-key", "")
                if key.startswith("hangup"):
                    self.close_connection = True
                    self.connection.close()  # no answer at all: the outcome is in doubt
                    return
                if key.startswith("hold"):
                    outer.arrived.set()
                    outer.release.wait(20)
                status = 503 if key.startswith("unavailable") else 201
                self.reply(status)

            def do_GET(self):
                self.reply(200)

            def reply(self, status):
                body = json.dumps({"status": status}).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.served = Served(Handler)
        self.port = self.served.port


def example_config(tmp, wasm, port, admin_port, upstream_port):
    """examples/envoy/envoy.yaml with this test's ports, 127.0.0.1 and the built .wasm."""
    text = (ROOT / "examples/envoy/envoy.yaml").read_text()
    for old, new in [
        ("port_value: 8080", f"port_value: {port}"),
        ("port_value: 9901", f"port_value: {admin_port}"),
        ("port_value: 3000", f"port_value: {upstream_port}"),
        ("address: 0.0.0.0", "address: 127.0.0.1"),
        ("target/wasm32-wasip1/release/idemgate_envoy.wasm", str(wasm)),
    ]:
        assert old in text, f"examples/envoy/envoy.yaml has no `{old}` any more"
        text = text.replace(old, new)
    path = tmp / "envoy.yaml"
    path.write_text(text)
    return path


def post(url, key, body=b'{"sku":"book","qty":1}', headers=None):
    h = {"content-type": "application/json", "authorization": "Bearer access-log"}
    if key is not None:
        h["idempotency-key"] = key
    h.update(headers or {})
    return request(url + "/orders", "POST", body, h)[0]


class Tally:
    def __init__(self):
        self.passed = self.failed = 0

    def ok(self, name):
        self.passed += 1
        print(f"test {name} ... ok", flush=True)

    def fail(self, name, why=""):
        self.failed += 1
        print(f"test {name} ... FAILED{': ' + why if why else ''}", flush=True)


def run(mode, wasm, tmp, tally):
    """One Envoy with the example configuration: as written (`detached`: keyed requests take the
    filter's own upstream exchange), or without its `upstream` line (`router`: Envoy's router)."""
    upstream = Upstream()
    proc = None
    try:
        port, admin_port = free_port(), free_port()
        config = example_config(tmp, wasm, port, admin_port, upstream.port)
        if mode == "router":
            text, n = re.subn(r'^\s*"upstream": \{[^\n]*\},\n', "", config.read_text(), flags=re.M)
            assert n == 1, "examples/envoy/envoy.yaml has no one-line `upstream` setting any more"
            config.write_text(text)
        out = tmp / "stdout.log"
        proc = start(
            [envoy_binary(), "-c", str(config), "--concurrency", "2", "--disable-hot-restart"],
            tmp / "envoy.log",
            env={"IDEMGATE_TOKEN_SECRET": SECRET, "PATH": "/usr/bin:/bin"},
            stdout_path=out,
        )
        admin = f"http://127.0.0.1:{admin_port}"
        url = f"http://127.0.0.1:{port}"
        wait_for("envoy", lambda: request(admin + "/ready", timeout=1)[0] == 200, proc,
                 tmp / "envoy.log")

        post(url, "claimed-1")
        post(url, "claimed-1")
        post(url, "claimed-1", body=b'{"sku":"pen","qty":2}')
        post(url, None)
        post(url, "x" * 300)
        post(url, "unavailable-1")
        post(url, "hangup-1")
        t = threading.Thread(target=lambda: post(url, "hold-1"))
        t.start()
        assert upstream.arrived.wait(10), "the held request never reached the upstream"
        post(url, "hold-1")
        upstream.release.set()
        t.join(15)
        request(url + "/static/app.js")

        # key in the log → (status, decision, outcome) expected, in request order.
        expected = [
            ("claimed-1", 201, "claimed", "stored"),
            ("claimed-1", 201, "replayed", "-"),
            ("claimed-1", 422, "mismatch", "-"),
            ("-", 400, "missing_key", "-"),
            ("x" * 300, 400, "invalid_key", "-"),
            ("unavailable-1", 503, "claimed", "released"),
            # No answer from the upstream: the key stays in flight. The detached exchange answers
            # the edge's 504 problem; on the router path Envoy answers 503 itself.
            ("hangup-1", 504 if mode == "detached" else 503, "claimed", "in_doubt"),
            ("hold-1", 409, "conflict", "-"),
            ("hold-1", 201, "claimed", "stored"),
            ("-", 200, "-", "-"),
        ]
        pattern = re.compile(
            r'"(\S+) (\S+)" (\d+) key=(\S+) decision=(\S+) outcome=(\S+) \d+ms$'
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            lines = [m for m in map(pattern.search, out.read_text().splitlines()) if m]
            if len(lines) >= len(expected):
                break
            time.sleep(0.1)
        shown = "\n".join(m.group(0) for m in lines)
        for key, status, decision, outcome in expected:
            name = f"{mode}_access_log_{decision}_{outcome}_{status}"
            found = [
                m for m in lines
                if m.group(4) == key and m.group(3) == str(status) and m.group(5) == decision
            ]
            if not found:
                tally.fail(name, f"no line key={key[:20]} {status} decision={decision} in:\n{shown}")
            elif found[0].group(6) != outcome:
                tally.fail(name, f"{found[0].group(0)}: outcome should be {outcome}")
            else:
                tally.ok(name)

        # The stats table in crates/envoy/README.md: these Prometheus names, as Envoy exports them
        # (custom Wasm stats lose their `wasmcustom.` namespace and get no `envoy_` prefix).
        prom = request(admin + "/stats/prometheus")[2].decode()
        for metric, value in [
            ("idemgate_claimed", 4),
            ("idemgate_replayed", 1),
            ("idemgate_conflict", 1),
            ("idemgate_mismatch", 1),
            ("idemgate_invalid_key", 1),
            ("idemgate_missing_key", 1),
            ("idemgate_stored", 2),
            ("idemgate_released", 1),
            ("idemgate_in_doubt", 1),
        ]:
            m = re.search(rf"^{metric}\{{\}} (\d+)$", prom, re.M)
            if m and int(m.group(1)) == value:
                tally.ok(f"{mode}_prometheus_{metric}")
            else:
                tally.fail(f"{mode}_prometheus_{metric}",
                           f"want {value}, got {m.group(0) if m else 'no such metric'}")
        # As written, every claimed request (4) came back in through the re-entry listener, once;
        # without the `upstream` line none did.
        stats = request(admin + "/stats?filter=^http.idemgate_reentry.downstream_rq_total$")[2].decode()
        want = 4 if mode == "detached" else 0
        if stats.strip() == f"http.idemgate_reentry.downstream_rq_total: {want}":
            tally.ok(f"{mode}_reentry_listener_requests_{want}")
        else:
            tally.fail(f"{mode}_reentry_listener_requests_{want}", f"got {stats.strip() or 'no such stat'}")
        # Every row of that table names a stat Envoy really has, under both names.
        readme = (ROOT / "crates/envoy/README.md").read_text()
        rows = re.findall(r"^\| `(wasmcustom\.idemgate\.[\w.]+)` \| `(idemgate_\w+)` \|", readme, re.M)
        stats = request(admin + "/stats")[2].decode()
        missing = [
            f"{plain} / {prom_name}"
            for plain, prom_name in rows
            if not re.search(rf"^{re.escape(plain)}: \d+$", stats, re.M)
            or not re.search(rf"^{prom_name}\{{\}} \d+$", prom, re.M)
        ]
        if rows and not missing:
            tally.ok(f"{mode}_readme_stats_table_names_exist ({len(rows)} rows)")
        else:
            tally.fail(f"{mode}_readme_stats_table_names_exist", f"not in Envoy: {missing or 'no rows'}")
    finally:
        upstream.release.set()
        if proc is not None:
            kill(proc)
        upstream.served.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wasm", required=True)
    args = ap.parse_args()
    wasm = Path(args.wasm).resolve()
    tally = Tally()
    root = Path(tempfile.mkdtemp(prefix="idemgate-access-log-"))
    try:
        for mode in ["detached", "router"]:
            tmp = root / mode
            tmp.mkdir()
            try:
                run(mode, wasm, tmp, tally)
            except Exception:
                traceback.print_exc()
                tally.fail(f"{mode}_run")
    finally:
        for proc in children:
            kill(proc)
    if tally.failed:
        print(f"kept {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{tally.passed} passed, {tally.failed} failed")
    sys.exit(1 if tally.failed else 0)


if __name__ == "__main__":
    main()
