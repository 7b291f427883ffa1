#!/usr/bin/env python3
"""`make demo`: the order service behind a real Envoy with the idemgate filter, in the foreground.

    python3 examples/checkout/demo.py [--port 10000] [--admin-port 9901] [--ready-file F]

Ports default to $DEMO_PORT / $DEMO_ADMIN_PORT (10000 / 9901); 0 picks free ones. Prints the URL and
what to try, runs until Ctrl-C (or SIGTERM), and stops what it started. Tests start it with
`--ready-file`: once everything answers, it writes {"url", "admin", "orders", "webhook_secret",
"standard_webhook_secret"} there as JSON.

Secrets come from the environment, else the demo makes them: IDEMGATE_TOKEN_SECRET,
IDEMGATE_WEBHOOK_SECRET (Stripe-style) and DEMO_STANDARD_WEBHOOK_SECRET (Standard Webhooks,
`whsec_` + base64 of 32 random bytes); it prints the webhook secrets with a signed `curl` each.
"""
import argparse
import base64
import binascii
import json
import os
import secrets
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
DEFAULT_WASM = os.path.join(ROOT, "target", "wasm32-wasip1", "release", "idemgate_envoy.wasm")
DEFAULT_PKG = os.path.join(ROOT, "crates", "web", "pkg")


def fail(message):
    print(f"demo: {message}", file=sys.stderr)
    sys.exit(1)


def wait_for(what, check, proc, timeout=30.0):
    """Polls `check` until it returns a value; fails early if `proc` died. Bounded by `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            fail(f"{what}: the process exited with {proc.returncode}")
        try:
            value = check()
            if value:
                return value
        except OSError:
            pass
        time.sleep(0.05)
    fail(f"{what}: not ready after {timeout:.0f} s")


def get(url):
    with urllib.request.urlopen(url, timeout=2) as res:
        return res.read().decode()


def listener_port(admin):
    """The demo listener's bound port, from Envoy's admin (needed when it was asked for port 0)."""
    doc = json.loads(get(f"http://127.0.0.1:{admin}/listeners?format=json"))
    for listener in doc.get("listener_statuses", []):
        port = listener.get("local_address", {}).get("socket_address", {}).get("port_value")
        if port:
            return int(port)
    return None


def standard_webhook_secret(env):
    """DEMO_STANDARD_WEBHOOK_SECRET from `env`, or a new one set there (`whsec_` + base64 of 32
    random bytes); fails unless it is `whsec_` + valid base64 of at least 24 bytes. Returns it
    and its HMAC key (the decoded bytes)."""
    if not env.get("DEMO_STANDARD_WEBHOOK_SECRET"):
        env["DEMO_STANDARD_WEBHOOK_SECRET"] = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    secret = env["DEMO_STANDARD_WEBHOOK_SECRET"]
    try:
        if not secret.startswith("whsec_"):
            raise ValueError("no `whsec_` prefix")
        key = base64.b64decode(secret[len("whsec_"):], validate=True)
    except (ValueError, binascii.Error) as err:
        fail(f"DEMO_STANDARD_WEBHOOK_SECRET is not `whsec_` + base64: {err}")
    if len(key) < 24:
        fail(f"DEMO_STANDARD_WEBHOOK_SECRET is {len(key)} bytes; it needs at least 24")
    return secret, key


def standard_webhook_curl(url, key, order=1, msg_id="msg_demo_1"):
    """One line a person can paste into a shell: signs a `payment.succeeded` for `order` at paste
    time (openssl, the key as hex) and delivers it to the Standard Webhooks route."""
    body = json.dumps({"type": "payment.succeeded", "data": {"order": order}}, separators=(",", ":"))
    return (f"id={msg_id}; t=$(date +%s); body='{body}'; "
            f"sig=$(printf '%s' \"$id.$t.$body\" | openssl dgst -sha256 -mac HMAC -macopt hexkey:{key.hex()} -binary | base64); "
            f"curl -si -X POST {url}/api/webhooks/standard -H \"webhook-id: $id\" -H \"webhook-timestamp: $t\" "
            f"-H \"webhook-signature: v1,$sig\" -H 'content-type: application/json' -d \"$body\"")


def standard_webhook_deliver(url, key):
    """A shell function a person can paste: `deliver ID TYPE ORDER` signs a Standard Webhooks
    event `{"type": TYPE, "data": {"order": ORDER}}` with message id ID at call time (openssl, the
    key as hex) and delivers it, to try the order table (`deliver msg_ship_1 order.shipped 1`)."""
    return ("deliver() { t=$(date +%s); "
            "body=$(printf '{\"type\":\"%s\",\"data\":{\"order\":%s}}' \"$2\" \"$3\"); "
            f"sig=$(printf '%s' \"$1.$t.$body\" | openssl dgst -sha256 -mac HMAC -macopt hexkey:{key.hex()} -binary | base64); "
            f"curl -si -X POST {url}/api/webhooks/standard -H \"webhook-id: $1\" -H \"webhook-timestamp: $t\" "
            "-H \"webhook-signature: v1,$sig\" -H 'content-type: application/json' -d \"$body\"; }")


def keeper(work):
    """The processes a demo starts (append them to the list) and a `stop` that ends them in
    reverse order (terminate, then kill after 5 s) and removes the demo's temp dir `work`."""
    children = []

    def stop(*_):
        for proc in reversed(children):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(children):
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)

    return children, stop


def main():
    ap = argparse.ArgumentParser(description="idemgate checkout demo")
    ap.add_argument("--port", type=int, default=int(os.environ.get("DEMO_PORT", 10000)))
    ap.add_argument("--admin-port", type=int, default=int(os.environ.get("DEMO_ADMIN_PORT", 9901)))
    ap.add_argument("--wasm", default=os.environ.get("IDEMGATE_FILTER_WASM", DEFAULT_WASM))
    ap.add_argument("--pkg", default=DEFAULT_PKG)
    ap.add_argument("--ready-file")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()

    if not os.path.isfile(args.wasm):
        fail(f"the filter is not built at {args.wasm}: run `make build-filter`")
    if not os.path.isfile(os.path.join(args.pkg, "index.js")):
        fail(f"the npm package is not built at {args.pkg}: run `make build-web`")
    envoy = shutil.which("envoy") or fail("`envoy` is not installed: run `make setup-envoy`")

    env = dict(os.environ)
    env.setdefault("IDEMGATE_TOKEN_SECRET", secrets.token_hex(32))
    # The payment provider's webhook signing secret (Stripe-style `whsec_…`).
    env.setdefault("IDEMGATE_WEBHOOK_SECRET", "whsec_" + secrets.token_hex(16))
    webhook_secret = env["IDEMGATE_WEBHOOK_SECRET"]
    # The Standard Webhooks sender's secret: the edge verifies with it, the service again.
    standard_secret, standard_key = standard_webhook_secret(env)

    work = tempfile.mkdtemp(prefix="idemgate-demo-")
    children, stop = keeper(work)

    signal.signal(signal.SIGTERM, lambda *_: (stop(), sys.exit(0)))
    # Ctrl-C stops the demo even when it was started with SIGINT ignored (a shell without job
    # control ignores it in everything it starts in the background, and children inherit that).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        orders = subprocess.Popen(
            [sys.executable, "-u", os.path.join(HERE, "order_service.py"), "--port", "0", "--pkg", args.pkg],
            stdout=subprocess.PIPE, text=True, env=env)
        children.append(orders)
        line = orders.stdout.readline()
        if "listening on" not in line:
            fail(f"order service did not start: {line!r}")
        orders_port = int(line.rsplit(":", 1)[1])

        config = string.Template(open(os.path.join(HERE, "envoy.yaml")).read()).substitute(
            PORT=args.port, ADMIN_PORT=args.admin_port, ORDERS_PORT=orders_port, FILTER_WASM=args.wasm)
        config_path = os.path.join(work, "envoy.yaml")
        with open(config_path, "w") as f:
            f.write(config)
        admin_file = os.path.join(work, "admin-address")
        log = open(os.path.join(work, "envoy.log"), "w")
        proxy = subprocess.Popen(
            [envoy, "-c", config_path, "--concurrency", "2", "--admin-address-path", admin_file,
             "--log-level", "warn", "--base-id", str(os.getpid() % 60000 + 1000)],
            stdout=log, stderr=subprocess.STDOUT, env=env)
        children.append(proxy)

        def admin_port():
            text = open(admin_file).read().strip() if os.path.exists(admin_file) else ""
            return int(text.rsplit(":", 1)[1]) if ":" in text else None

        admin = wait_for("envoy admin", admin_port, proxy)
        wait_for("envoy ready", lambda: get(f"http://127.0.0.1:{admin}/ready").strip() == "LIVE", proxy)
        port = args.port or wait_for("envoy listener", lambda: listener_port(admin), proxy)
        url = f"http://127.0.0.1:{port}"
        wait_for("the page through envoy", lambda: "Checkout" in get(url + "/"), proxy)

        if args.ready_file:
            with open(args.ready_file + ".tmp", "w") as f:
                json.dump({"url": url, "admin": f"http://127.0.0.1:{admin}", "orders": orders_port,
                           "pid": os.getpid(), "webhook_secret": webhook_secret,
                           "standard_webhook_secret": standard_secret}, f)
            os.replace(args.ready_file + ".tmp", args.ready_file)
        if not args.quiet:
            print(f"""
  idemgate demo is running:  {url}
  Envoy admin (stats):       http://127.0.0.1:{admin}/stats?filter=idemgate

  Try:
    * open {url}/ and double-click Pay: one order;
    * {url}/?delay=2500&timeout=1000 : the answer is later than the page's timeout; the page
      retries with the same key, held at the edge until the first's answer is stored (no 409),
      still one order;
    * a double submission while the first is still running (the service answers after 2 s):
        for i in 1 2; do curl -s -X POST {url}/api/orders -H 'authorization: Bearer me' \\
          -H 'idempotency-key: k2' -H 'x-demo-delay-ms: 2000' -H 'content-type: application/json' \\
          -d '{{"items":[{{"sku":"beans","qty":1,"price_cents":2400}}]}}' -w ' %{{http_code}}\n' & done; wait
      one order, two identical answers (the second replayed), no 409 in between;
    * curl -si -X POST {url}/api/orders -H 'authorization: Bearer me' \\
        -H 'idempotency-key: k1' -H 'content-type: application/json' \\
        -d '{{"items":[{{"sku":"beans","qty":1,"price_cents":2400}}]}}'   (run it twice: the
      second answer carries Idempotent-Replayed: true)
    * curl -s {url}/api/orders
    * a payment provider's event, signed Stripe-style, marks order 1 paid; deliver it as often
      as you like: every delivery gets 200, the order service applies it once
      (`events_applied` in /api/orders):
        body='{{"id":"evt_1","type":"payment_succeeded","data":{{"order":1}}}}'; t=$(date +%s)
        sig=$(printf '%s' "$t.$body" | openssl dgst -sha256 -hmac '{webhook_secret}' | sed 's/.* //')
        curl -si -X POST {url}/api/webhooks/payments -H "stripe-signature: t=$t,v1=$sig" \\
          -H 'content-type: application/json' -d "$body"
    * the same event from a Standard Webhooks sender, signed with
        DEMO_STANDARD_WEBHOOK_SECRET={standard_secret}
      applied once per `webhook-id` (paste the line again: 200, replayed; change `id=` for a new
      event; a wrong signature or a timestamp older than 5 minutes gets 403):
        {standard_webhook_curl(url, standard_key)}
    * the order table: the edge keeps each order's events in order (unpaid → paid →
      shipped; cancelled from unpaid or paid). Define `deliver ID TYPE ORDER` by pasting
        {standard_webhook_deliver(url, standard_key)}
      then, for a new order N: `deliver s1 order.shipped N` (409 early, Retry-After: 10, not
      applied), `deliver p1 payment.succeeded N` (applied), `deliver s1 order.shipped N` again
      (applied now), `deliver p2 payment.succeeded N` (200 already-applied, not forwarded),
      `deliver c1 order.cancelled N` (200 illegal, not forwarded); header `idemgate-order`
    * an update names the version it read: curl -si {url}/api/orders/1 (see its ETag), then
        curl -si -X PATCH {url}/api/orders/1 -H 'if-match: "v1"' \\
          -H 'content-type: application/json' -d '{{"note":"leave at the door"}}'
      (200 and a new ETag; again with the same tag: 412; without If-Match: 428 from the edge)
    * a CloudEvent (binary mode), applied once per (ce-source, ce-id); the same id from another
      source is another event:
        curl -si -X POST {url}/api/events -H 'ce-specversion: 1.0' -H 'ce-id: pay-1' \\
          -H 'ce-source: /demo/payments' -H 'ce-type: payment.succeeded' \\
          -H 'content-type: application/json' -d '{{"order":1}}'

  Ctrl-C stops it.
""", flush=True)
        while all(proc.poll() is None for proc in children):
            try:
                children[-1].wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        fail("a demo process exited unexpectedly (see above)")
    except KeyboardInterrupt:
        pass
    finally:
        stop()


if __name__ == "__main__":
    main()
