#!/usr/bin/env python3
"""The demo's upstream: a small order service that keeps orders in SQLite (in memory by default).

It counts every order request it receives (`received` in `GET /api/orders`), so a duplicate that
slips past idemgate is visible. Its one defence of its own is the one `docs/semantics.md` §5 recommends for
outcomes in doubt: a unique constraint on (client, Idempotency-Key). When a client gave up on a slow
answer, Envoy reset the upstream request, so no answer could be stored; after the lease a retry
reaches the service again and finds the order it already created. It also serves the checkout page
and the `idemgate` npm package build, so page and API share one origin behind Envoy.

Test hooks (used by the end-to-end tests to play a slow or a failing backend):
  * header `x-demo-delay-ms: N` — answer N ms after committing a new order (a "lost response" when
    the page's timeout is shorter);
  * header `x-demo-fail: 503` — answer 503 without creating an order (the upstream did not act).
These are read only from requests that reach the service, which Envoy forwards unchanged.

Payment events: `POST /api/webhooks/payments` takes a Stripe-style event
`{"id": "evt_…", "type": "payment_succeeded", "data": {"order": N}}` and marks order N paid. The
handler is deliberately naive — every event it receives is applied and counted (`events_applied`
in `GET /api/orders`) — so a duplicate delivery that slipped past idemgate would show. Envoy's
callback route keys deliveries by the event's `id` and checks its signature before this service
sees it.

Two more kinds of event, just as naive (applied and counted every time they arrive):
  * `POST /api/webhooks/standard`: a Standard Webhooks delivery (`webhook-id`, `webhook-timestamp`,
    `webhook-signature: v1,<base64 HMAC-SHA256>`), body `{"type": T, "data": {"order": N}}` with T
    one of `payment.succeeded` (→ paid), `order.shipped` (→ shipped), `order.cancelled` (→
    cancelled); other types are acknowledged and ignored. Whatever arrives is applied, whatever the
    order's status (an `order.shipped` for an unpaid order ships it), and counted
    (`events_applied`, overall in `GET /api/orders` and per order): the edge keys it by
    `webhook-id`, verifies it and keeps the events of one order in order (its `order` table), so
    anything in the counts that should not be there slipped past the edge. This service
    verifies the signature again (defence in depth, secret `DEMO_STANDARD_WEBHOOK_SECRET` when set:
    401 when it does not hold) but never dedupes.
  * `POST /api/events`: a CloudEvent over HTTP, binary mode (`ce-specversion`, `ce-id`, `ce-source`,
    `ce-type` headers, the body is the event's data `{"order": N}`) or structured mode
    (`content-type: application/cloudevents+json`, the whole event as JSON); type
    `payment.succeeded` marks the order paid. Batched mode is refused (415). The edge keys it by
    (source, id).

Orders and versions (orders.py): each order has a `status` (`unpaid` when created) and a `version`
that every change bumps. `GET /api/orders/N` answers the order with a strong `ETag` made from its
version; `PATCH /api/orders/N` with `{"note": "..."}` stores a note if `If-Match` names the current
tag: the service compares it itself (412 problem+json on a stale tag, 428 without `If-Match`,
though the edge already answers that, 400 when malformed), then bumps the version and answers 200
with the new `ETag`. Every PATCH that reaches the service is counted (`updates_received` in
`GET /api/orders`), so a retry of a 412 would show.

    python3 order_service.py --port 8081 [--db orders.sqlite] [--static DIR] [--pkg DIR]
"""
import argparse
import base64
import binascii
import hashlib
import hmac
import json
import mimetypes
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from orders import EVENT_STATUS, Orders, etag, parse_if_match

MAX_BODY = 64 * 1024
# Standard Webhooks: a delivery whose timestamp is further than this from now is refused.
STANDARD_TOLERANCE_S = 5 * 60


def standard_webhook_key(secret):
    """The HMAC key of a Standard Webhooks secret: the base64 after its `whsec_` prefix, decoded."""
    if not secret.startswith("whsec_"):
        raise ValueError("a Standard Webhooks secret starts with `whsec_`")
    return base64.b64decode(secret[len("whsec_"):], validate=True)


def standard_webhook_signature(key, msg_id, timestamp, body):
    """`v1,` + base64 of HMAC-SHA256(key, "{id}.{timestamp}.{body}")."""
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def verify_standard_webhook(key, headers, body, now=None):
    """None when the delivery is signed with `key` and fresh, else why not (the edge's codes)."""
    msg_id, timestamp = headers.get("webhook-id"), headers.get("webhook-timestamp")
    signatures = headers.get("webhook-signature")
    if not msg_id or not timestamp or not signatures:
        return "signature_missing"
    if not timestamp.isdigit():
        return "signature_malformed"
    now = time.time() if now is None else now
    if abs(now - int(timestamp)) > STANDARD_TOLERANCE_S:
        return "signature_stale"
    expected = standard_webhook_signature(key, msg_id, timestamp, body)
    # A space-separated list of `version,signature`; any v1 that matches will do.
    if any(hmac.compare_digest(expected.encode(), sig.encode()) for sig in signatures.split()):
        return None
    return "signature_mismatch"


def validate_cart(doc):
    """A cart is {"items": [{"sku": str, "qty": int>0, "price_cents": int>=0}, ...]}; returns total."""
    items = doc.get("items") if isinstance(doc, dict) else None
    if not isinstance(items, list) or not items:
        raise ValueError("`items` must be a non-empty list")
    total = 0
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("sku"), str):
            raise ValueError("each item needs a string `sku`")
        qty, price = item.get("qty"), item.get("price_cents")
        if not isinstance(qty, int) or qty <= 0 or not isinstance(price, int) or price < 0:
            raise ValueError("each item needs `qty` > 0 and `price_cents` >= 0 (integers)")
        total += qty * price
    return total


class Handler(BaseHTTPRequestHandler):
    server_version = "idemgate-demo-orders/1"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet unless asked
        if self.server.verbose:
            sys.stderr.write("orders: " + fmt % args + "\n")

    def send_json(self, status, doc, extra=()):
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def problem(self, status, code, detail):
        body = json.dumps({"type": f"urn:idemgate-demo:problem:{code}", "title": code, "status": status,
                           "detail": detail}).encode()
        self.send_response(status)
        self.send_header("content-type", "application/problem+json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/api/orders":
            orders = self.server.orders.all()
            received = self.server.orders.received
            return self.send_json(200, {"count": len(orders), "orders": orders, "received": received,
                                        "events_applied": self.server.orders.events_applied,
                                        "updates_received": self.server.orders.updates_received})
        if path.startswith("/api/orders/"):
            order = self.server.orders.get(path[len("/api/orders/"):])
            if order is None:
                return self.problem(404, "not_found", "no such order")
            return self.send_json(200, order, [("etag", etag(order))])
        if path == "/healthz":
            return self.send_json(200, {"ok": True})
        return self.static(path)

    def do_POST(self):
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_BODY:
            return self.problem(413, "too_large", "body too large")
        raw = self.rfile.read(length) if length else b""
        if path == "/api/orders":
            return self.create_order(raw)
        if path == "/api/webhooks/payments":
            return self.payment_event(raw)
        if path == "/api/webhooks/standard":
            return self.standard_webhook(raw)
        if path == "/api/events":
            return self.cloud_event(raw)
        if path == "/api/vouchers/redeem":
            return self.send_json(200, {"redeemed": True})
        return self.problem(404, "not_found", "no such endpoint")

    def do_PATCH(self):
        """`PATCH /api/orders/N` with `{"note": "..."}`: an update that names the version it read.
        The service compares `If-Match` itself (the edge only checks that there is one): 412 on a
        stale tag, 428 without one (defence in depth), else 200 with the new `ETag`."""
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_BODY:
            return self.problem(413, "too_large", "body too large")
        raw = self.rfile.read(length) if length else b""
        if not path.startswith("/api/orders/"):
            return self.problem(404, "not_found", "no such endpoint")
        self.server.orders.count_update()
        condition = self.headers.get("if-match")
        if condition is None:
            return self.problem(428, "precondition_required",
                                "send the order's ETag in If-Match (read it with GET first)")
        parsed = parse_if_match(condition)
        if parsed is None:
            return self.problem(400, "precondition_malformed", "If-Match is `*` or a list of entity tags")
        try:
            doc = json.loads(raw or b"null")
            note = doc["note"] if isinstance(doc, dict) else None
            if not isinstance(note, str) or len(note) > 500 or set(doc) != {"note"}:
                raise ValueError('the body is {"note": "..."} (a string of at most 500 characters)')
        except (ValueError, json.JSONDecodeError) as err:
            return self.problem(400, "bad_update", str(err))
        outcome, order = self.server.orders.update_note(path[len("/api/orders/"):], note, parsed)
        if outcome == "missing":
            return self.problem(404, "not_found", "no such order")
        if outcome == "stale":
            return self.problem(412, "precondition_failed",
                                "the order changed since that ETag was read: read it again")
        self.send_json(200, order, [("etag", etag(order))])

    def create_order(self, raw):
        self.server.orders.count_request()
        fail = self.headers.get("x-demo-fail")
        if fail and fail.isdigit():
            return self.problem(int(fail), "demo_failure", "the demo was asked to fail without acting")
        try:
            doc = json.loads(raw or b"null")
            total = validate_cart(doc)
        except (ValueError, json.JSONDecodeError) as err:
            return self.problem(400, "bad_cart", str(err))
        client = self.headers.get("authorization")
        order, created = self.server.orders.create(doc["items"], total, client, self.headers.get("idempotency-key"))
        delay = self.headers.get("x-demo-delay-ms")
        if created and delay and delay.isdigit():
            time.sleep(min(int(delay), 30_000) / 1000)
        self.send_json(201, order, [("location", f"/api/orders/{order['id']}")])

    def payment_event(self, raw):
        """A payment provider's event. Any non-2xx answer tells the provider to deliver it again."""
        try:
            event = json.loads(raw or b"null")
            order_id = event["data"]["order"]
            kind = event["type"]
            if not isinstance(event["id"], str) or not isinstance(order_id, int):
                raise ValueError("`id` must be a string and `data.order` an integer")
        except (ValueError, KeyError, TypeError, json.JSONDecodeError) as err:
            return self.problem(400, "bad_event", f"not a payment event: {err}")
        if kind != "payment_succeeded":
            return self.send_json(200, {"received": True, "event": event["id"], "ignored": kind})
        if not self.server.orders.apply_event(order_id, "paid"):
            return self.problem(404, "no_such_order", f"order {order_id} does not exist")
        self.send_json(200, {"received": True, "event": event["id"], "order": order_id, "status": "paid"})

    def apply(self, order_id, status, answer):
        """Moves order `order_id` to `status` whatever its status was, counted every time: no
        dedup and no order check here, so whatever slips past the edge shows."""
        if not isinstance(order_id, int) or isinstance(order_id, bool):
            return self.problem(400, "bad_event", "`data.order` must be an integer")
        if not self.server.orders.apply_event(order_id, status):
            return self.problem(404, "no_such_order", f"order {order_id} does not exist")
        self.send_json(200, dict(answer, received=True, order=order_id, status=status))

    def standard_webhook(self, raw):
        """A Standard Webhooks delivery. Any non-2xx answer tells the sender to deliver it again."""
        key = self.server.standard_key
        if key is not None:
            refused = verify_standard_webhook(key, self.headers, raw)
            if refused:
                return self.problem(401, refused, "the order service's own signature check failed")
        try:
            event = json.loads(raw or b"null")
            kind, data = event["type"], event["data"]
            if not isinstance(kind, str) or not isinstance(data, dict):
                raise ValueError("`type` must be a string and `data` an object")
        except (ValueError, KeyError, TypeError, json.JSONDecodeError) as err:
            return self.problem(400, "bad_event", f"not a Standard Webhooks event: {err}")
        answer = {"webhook_id": self.headers.get("webhook-id"), "type": kind}
        if kind not in EVENT_STATUS:
            return self.send_json(200, dict(answer, received=True, ignored=kind))
        return self.apply(data.get("order"), EVENT_STATUS[kind], answer)

    def cloud_event(self, raw):
        """A CloudEvent over HTTP (binary or structured mode; batched mode is not taken)."""
        ctype = (self.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
        if ctype == "application/cloudevents-batch+json":
            return self.problem(415, "batch_not_supported", "deliver one event per request")
        try:
            if ctype == "application/cloudevents+json":
                event = json.loads(raw or b"null")
                if not isinstance(event, dict):
                    raise ValueError("a structured event is a JSON object")
                attrs = {name: event.get(name) for name in ("specversion", "id", "source", "type")}
                data = event.get("data")
            else:
                attrs = {name: self.headers.get(f"ce-{name}") for name in ("specversion", "id", "source", "type")}
                data = json.loads(raw) if raw else None
            missing = [name for name, value in attrs.items() if not isinstance(value, str) or not value]
            if missing:
                raise ValueError(f"missing attributes: {', '.join(missing)}")
            if attrs["specversion"] != "1.0":
                raise ValueError(f"specversion {attrs['specversion']!r} is not 1.0")
        except (ValueError, json.JSONDecodeError) as err:
            return self.problem(400, "bad_event", f"not a CloudEvent: {err}")
        answer = {"id": attrs["id"], "source": attrs["source"], "type": attrs["type"]}
        if attrs["type"] != "payment.succeeded":
            return self.send_json(200, dict(answer, received=True, ignored=attrs["type"]))
        if not isinstance(data, dict):
            return self.problem(400, "bad_event", "a payment.succeeded event's data is {\"order\": N}")
        return self.apply(data.get("order"), "paid", answer)

    def static(self, path):
        if path in ("/", "/index.html"):
            root, rel = self.server.static_dir, "index.html"
        elif path.startswith("/pkg/") and self.server.pkg_dir:
            root, rel = self.server.pkg_dir, path[len("/pkg/"):]
        else:
            root, rel = self.server.static_dir, path.lstrip("/")
        full = os.path.realpath(os.path.join(root, rel))
        if not full.startswith(os.path.realpath(root) + os.sep) or not os.path.isfile(full):
            return self.problem(404, "not_found", "no such file")
        with open(full, "rb") as f:
            body = f.read()
        ctype = "application/wasm" if full.endswith(".wasm") else (
            "text/javascript" if full.endswith((".js", ".mjs")) else mimetypes.guess_type(full)[0] or "application/octet-stream")
        self.send_response(200)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        self.wfile.write(body)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8081)
    ap.add_argument("--db", default=":memory:")
    ap.add_argument("--static", default=os.path.join(here, "static"))
    ap.add_argument("--pkg", default=os.path.join(here, "..", "..", "crates", "web", "pkg"))
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    server.orders = Orders(args.db)
    server.static_dir = args.static
    server.pkg_dir = args.pkg if os.path.isdir(args.pkg) else None
    server.verbose = args.verbose
    secret = os.environ.get("DEMO_STANDARD_WEBHOOK_SECRET")
    try:
        server.standard_key = standard_webhook_key(secret) if secret else None
    except (ValueError, binascii.Error) as err:
        sys.exit(f"orders: DEMO_STANDARD_WEBHOOK_SECRET: {err}")
    print(f"orders: listening on http://{args.host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
