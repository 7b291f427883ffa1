#!/usr/bin/env python3
"""`make test-demo-fleet`: starts `demo_fleet.py` on free ports and checks its contract — a request
sent to Envoy A and its retry sent to Envoy B behave as if there were one Envoy (one order, the
retry is the replay, byte for byte; a claimed request re-enters Envoy through its internal
listener), a one-time token issued by A is used once across both, a signed payment event (its
key taken from the body), a Standard Webhooks delivery (keyed by `webhook-id`) and a CloudEvent
(keyed by source and id) delivered to A and B are each applied once, the order table holds across
the fleet (an `order.shipped` sent to A before the payment is refused as early, the payment and the
shipment's redelivery to B apply, a second payment to A is acknowledged and not applied: one state
per order in the shared store), and the store service refuses
a TLS client without a certificate (the Envoys reach it over mutual TLS) — then stops it and checks that
it exited, that every process it started is gone and that it removed its work dir. Bounded: fails
after 90 s.

    python3 examples/checkout/demo_fleet_test.py [--engine redis|postgres|redis+postgres]

On `--engine` (default $ENGINE, else redis; `make test-demo-fleet` runs each): with `postgres` no
redis-server runs, with `redis` no PostgreSQL. The Redis demo is stopped with SIGTERM, the others
with SIGINT (what Ctrl-C sends).
"""
import argparse
import base64
import glob
import hashlib
import hmac
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def request(method, url, headers=None, body=None):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            return res.status, dict(res.headers), res.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def refuses_anonymous_tls(url):
    """Whether the store at https://host:port closes a TLS connection that presents no client
    certificate before answering anything (TLS 1.3 refuses it after the client's last flight)."""
    host, port = url.removeprefix("https://").rsplit(":", 1)
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with socket.create_connection((host, int(port)), timeout=5) as raw:
            with context.wrap_socket(raw) as tls:
                tls.sendall(b"GET /healthz HTTP/1.1\r\nhost: store\r\n\r\n")
                return tls.recv(64) == b""
    except (ssl.SSLError, ConnectionError):
        return True


def reentered(admin):
    """Requests the Envoy at `admin` received on its re-entry listener `idemgate_reentry`."""
    _, _, text = request("GET", admin + "/stats?filter=^http.idemgate_reentry.downstream_rq_total$")
    values = [int(line.rsplit(": ", 1)[1]) for line in text.decode().splitlines() if ": " in line]
    return values[0] if len(values) == 1 else None


def processes_under(pid):
    """{pid: command name} of every process descending from `pid` (read from /proc)."""
    parents, names = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            head, rest = stat.rsplit(")", 1)
            parents[int(entry)] = int(rest.split()[1])
            names[int(entry)] = head.split("(", 1)[1]
    found, frontier = {}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, ppid in parents.items():
            if ppid == parent and child not in found:
                found[child] = names[child]
                frontier.append(child)
    return found


def alive(pid):
    """Whether `pid` runs (a zombie not yet reaped by whoever adopted it does not)."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def standard_delivery(url, key, msg_id, kind, order_id):
    """A Standard Webhooks delivery of `kind` for `order_id`, signed afresh with `key` on every
    attempt and delivered again, as a sender does, while the answer is 409 `order_resource_busy`:
    on the remote store an event's settle travels with its upstream answer, so the next event for
    the same order may meet that claim for a moment. Returns the last answer."""
    body = json.dumps({"type": kind, "data": {"order": order_id}}).encode()
    for _ in range(50):
        t = str(int(time.time()))
        mac = hmac.new(key, f"{msg_id}.{t}.".encode() + body, hashlib.sha256).digest()
        got = request("POST", url + "/api/webhooks/standard",
                      {"content-type": "application/json", "webhook-id": msg_id, "webhook-timestamp": t,
                       "webhook-signature": "v1," + base64.b64encode(mac).decode()}, body)
        if got[0] != 409 or b"order_resource_busy" not in got[2]:
            return got
        time.sleep(0.1)
    return got


def out_of_order_across_envoys(a, b, key, order):
    """The order table across the fleet: an early `order.shipped` sent to A (409, not
    applied), the payment to B, the shipment's redelivery to B (applied), a second payment to A
    (acknowledged, not applied). Returns what each answered, as text."""
    status, _, created = request("POST", a + "/api/orders",
                                 {"authorization": "Bearer fleet-order", "idempotency-key": f"fleet-order-{time.time()}",
                                  "content-type": "application/json"}, order)
    check(status == 201, f"order: {status} {created!r}")
    order_id = json.loads(created)["id"]
    stamp = f"{order_id}_{int(time.time())}"

    def applied():
        _, _, listing = request("GET", a + "/api/orders")
        found = [o for o in json.loads(listing)["orders"] if o["id"] == order_id]
        return found[0]["status"], found[0]["events_applied"]

    answers = []
    for url, msg, kind, want_status, want_order in (
            (a, "ship", "order.shipped", 409, "early"),
            (b, "pay", "payment.succeeded", 200, "applied"),
            (b, "ship", "order.shipped", 200, "applied"),
            (a, "pay2", "payment.succeeded", 200, "already-applied")):
        got, headers, body = standard_delivery(url, key, f"msg_fleet_{msg}_{stamp}", kind, order_id)
        told = headers.get("idemgate-order")
        check((got, told) == (want_status, want_order), f"{kind} to {url}: {got} {told} {body!r}")
        if got == 409:
            check(headers.get("retry-after", "").isdigit(), f"an early event says when to come back: {headers}")
            check(applied() == ("unpaid", 0), f"the early event was not applied: {applied()}")
        answers.append(f"{got} {told}")
    check(applied() == ("shipped", 2), f"payment and shipment applied once each: {applied()}")
    return ", ".join(answers)


def main():
    ap = argparse.ArgumentParser(description="demo-fleet's contract")
    ap.add_argument("--engine", choices=("redis", "postgres", "redis+postgres"),
                    default=os.environ.get("ENGINE") or "redis")
    engine = ap.parse_args().engine
    ready_dir = tempfile.mkdtemp(prefix="idemgate-demo-fleet-test-")
    ready = os.path.join(ready_dir, "ready.json")
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "idemgate-demo-fleet-*")))
    started = {}
    demo = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "demo_fleet.py"), "--engine", engine,
         "--port", "0", "--admin-port", "0",
         "--port-b", "0", "--admin-port-b", "0", "--ready-file", ready, "--quiet"]
        + (["--pkg", os.environ["IDEMGATE_WEB_PKG"]] if os.environ.get("IDEMGATE_WEB_PKG") else []))
    try:
        deadline = time.monotonic() + 90
        while not os.path.exists(ready):
            check(demo.poll() is None, f"demo_fleet.py exited with {demo.returncode}")
            check(time.monotonic() < deadline, "demo_fleet.py not ready after 90 s")
            time.sleep(0.2)
        info = json.load(open(ready))
        a, b = info["url"], info["url_b"]
        check(a != b, "two Envoys")
        check(info["engine"] == engine, f"engine {info['engine']}")
        started = processes_under(demo.pid)
        names = set(started.values())
        check(("redis-server" in names) == (engine != "postgres"), f"{engine}: processes {names}")
        check(("postgres" in names) == (engine != "redis"), f"{engine}: processes {names}")
        check((info["redis"] is None) == (engine == "postgres") and
              (info["postgres"] is None) == (engine == "redis"), f"{engine}: {info}")
        check(info["store"].startswith("https://") and refuses_anonymous_tls(info["store"]),
              f"the store service serves mutual TLS only: {info['store']}")

        order = json.dumps({"items": [{"sku": "beans", "qty": 1, "price_cents": 2400}]}).encode()
        headers = {"authorization": "Bearer fleet-test", "idempotency-key": "fleet-test-1",
                   "content-type": "application/json"}
        s1, h1, b1 = request("POST", a + "/api/orders", headers, order)
        check(s1 == 201, f"A: {s1} {b1!r}")
        # The claimed order came back into A through its re-entry listener (same routes, the
        # filters after idemgate), once.
        check(reentered(info["admin"]) == 1, f"A's re-entry listener: {reentered(info['admin'])}")
        # The record is written once A's client has its answer: retry as a client would on 409.
        for _ in range(50):
            s2, h2, b2 = request("POST", b + "/api/orders", headers, order)
            if s2 != 409:
                break
            time.sleep(0.1)
        check(s2 == 201 and h2.get("idempotent-replayed") == "true", f"B: {s2} {h2} {b2!r}")
        check(b2 == b1, "B's replay is A's answer, byte for byte")
        _, _, listing = request("GET", a + "/api/orders", {"authorization": "Bearer fleet-test"})
        received = json.loads(listing)["received"]
        check(received == 1, f"one order reached the service: {listing!r}")

        # A token issued by A, used through B, then refused through A.
        who = {"authorization": "Bearer fleet-test"}
        st, _, tb = request("POST", a + "/.idemgate/token?method=POST&path=/api/vouchers/redeem", who)
        check(st == 200, f"token: {st} {tb!r}")
        token = json.loads(tb)
        redeem = dict(who, **{token["header"]: token["token"], "content-type": "application/json"})
        voucher = json.dumps({"code": "WELCOME"}).encode()
        r1 = request("POST", b + "/api/vouchers/redeem", redeem, voucher)
        check(r1[0] != 409 and r1[0] < 500, f"first use through B: {r1[0]} {r1[2]!r}")
        r2 = request("POST", a + "/api/vouchers/redeem", redeem, voucher)
        check(r2[0] == 409 and b"token_used" in r2[2], f"reuse through A: {r2[0]} {r2[2]!r}")

        # A payment event (a callback route: the key is the event's `id`, from the body) delivered
        # to A, then again to B: applied once, B's delivery is the replay.
        order_id = json.loads(b1)["id"]
        event = json.dumps({"id": f"evt_fleet_{order_id}_{int(time.time())}",
                            "type": "payment_succeeded", "data": {"order": order_id}}).encode()

        def deliver(url):
            t = str(int(time.time()))
            v1 = hmac.new(info["webhook_secret"].encode(), f"{t}.".encode() + event,
                          hashlib.sha256).hexdigest()
            for _ in range(50):
                got = request("POST", url + "/api/webhooks/payments",
                              {"content-type": "application/json",
                               "stripe-signature": f"t={t},v1={v1}"}, event)
                if got[0] != 409:
                    return got
                time.sleep(0.1)
            return got

        _, _, listed = request("GET", a + "/api/orders", {"authorization": "Bearer fleet-test"})
        e1 = deliver(a)
        check(reentered(info["admin"]) == 2, f"A's re-entry listener: {reentered(info['admin'])}")
        e2 = deliver(b)
        check(e1[0] == 200 and e2[0] == 200, f"deliveries: {e1[0]} {e1[2]!r} / {e2[0]} {e2[2]!r}")
        check(e2[1].get("idempotent-replayed") == "true", f"B's delivery is the replay: {e2[1]}")
        _, _, after = request("GET", a + "/api/orders", {"authorization": "Bearer fleet-test"})
        applied = json.loads(after)["events_applied"] - json.loads(listed)["events_applied"]
        check(applied == 1, f"the event was applied {applied} times")
        applied_each = [applied]

        # The same event from a Standard Webhooks sender (key: `webhook-id`) and as a CloudEvent
        # (key: source and id), each delivered to A, then to B: each applied once.
        key = base64.b64decode(info["standard_webhook_secret"][len("whsec_"):])
        standard = json.dumps({"type": "payment.succeeded", "data": {"order": order_id}}).encode()
        msg_id = f"msg_fleet_{order_id}_{int(time.time())}"

        def standard_headers():
            t = str(int(time.time()))
            mac = hmac.new(key, f"{msg_id}.{t}.".encode() + standard, hashlib.sha256).digest()
            return {"content-type": "application/json", "webhook-id": msg_id, "webhook-timestamp": t,
                    "webhook-signature": "v1," + base64.b64encode(mac).decode()}

        cloud = {"content-type": "application/json", "ce-specversion": "1.0", "ce-id": msg_id,
                 "ce-source": "/fleet-test", "ce-type": "payment.succeeded"}
        for what, path, headers, body in (
                ("Standard Webhooks", "/api/webhooks/standard", standard_headers, standard),
                ("CloudEvents", "/api/events", lambda: cloud,
                 json.dumps({"order": order_id}).encode())):
            _, _, listed = request("GET", a + "/api/orders")
            got = []
            for url in (a, b):
                for _ in range(50):
                    reply = request("POST", url + path, headers(), body)
                    if reply[0] != 409:
                        break
                    time.sleep(0.1)
                got.append(reply)
            check([g[0] for g in got] == [200, 200], f"{what}: {[(g[0], g[2]) for g in got]}")
            check(got[1][1].get("idempotent-replayed") == "true", f"{what}: B's is the replay: {got[1][1]}")
            _, _, after = request("GET", a + "/api/orders")
            applied = json.loads(after)["events_applied"] - json.loads(listed)["events_applied"]
            check(applied == 1, f"{what}: the event was applied {applied} times")
            applied_each.append(applied)
        ordered = out_of_order_across_envoys(a, b, key, order)
        # What was measured above, not what the checks expect.
        print(f"demo-fleet ({engine}): A→B retry replayed, {received} order(s) reached the service (through "
              f"A's re-entry listener); token: first use {r1[0]}, reuse {r2[0]}; a payment event "
              f"(Stripe-style, Standard Webhooks, CloudEvents) delivered to A and B applied "
              f"{'/'.join(map(str, applied_each))} time(s); order table across A and B: {ordered}; "
              f"the store refuses a TLS client without a certificate")
    finally:
        how = signal.SIGTERM if engine == "redis" else signal.SIGINT
        started = started or processes_under(demo.pid)
        if demo.poll() is None:
            demo.send_signal(how)
        try:
            code = demo.wait(timeout=20)
        except subprocess.TimeoutExpired:
            demo.kill()
            raise AssertionError(f"demo_fleet.py did not stop on {how.name}")
        shutil.rmtree(ready_dir, ignore_errors=True)
    check(code == 0, f"demo_fleet.py exit status {code}")
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = {pid: name for pid, name in started.items() if alive(pid)}
    check(not left, f"processes left running: {left}")
    left = set(glob.glob(os.path.join(tempfile.gettempdir(), "idemgate-demo-fleet-*"))) - before
    left = {d for d in left if "-test-" not in d}
    check(not left, f"work dirs left behind: {left}")


if __name__ == "__main__":
    main()
