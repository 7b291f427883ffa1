"""The order service's records: orders in SQLite, each with a status and a version.

The version is what makes an update safe: `GET /api/orders/N` hands it out as a strong
`ETag`, an update names the version it read in `If-Match`, and the write is a compare-and-set on
that version (`UPDATE … WHERE version = ?`), so a writer that read an older version gets 412 instead
of overwriting what it never saw. Every change of an order (an event applied, a note stored) bumps
its version, so two different representations never share a tag.

Events are applied naively on purpose: whatever arrives moves the order to the event's status and
is counted (`events_applied`, per order and overall), so an event that slipped past the edge —
a duplicate, an early `order.shipped`, a late `payment.succeeded` — shows in the counts.
"""
import json
import re
import sqlite3
import threading
import time

# The Standard Webhooks event types the service knows, and the status each one sets.
EVENT_STATUS = {"payment.succeeded": "paid", "order.shipped": "shipped", "order.cancelled": "cancelled"}

# RFC 9110 §8.8.3: entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE, etagc = %x21 / %x23-7E / obs-text.
_ENTITY_TAG = re.compile(r'(W/)?"([\x21\x23-\x7e\x80-\xff]*)"')


def etag(order):
    """The order's strong entity tag: its version, quoted (`"v3"`)."""
    return f'"v{order["version"]}"'


def parse_if_match(value):
    """An `If-Match` field value as `"*"` or a list of (weak, opaque-tag) pairs; None when it is
    not `*` or a comma-separated list of entity tags (RFC 9110 §13.1.1)."""
    value = value.strip()
    if value == "*":
        return "*"
    tags = []
    for member in value.split(","):
        member = member.strip()
        if not member:
            continue  # the list syntax allows empty elements
        found = _ENTITY_TAG.fullmatch(member)
        if found is None:
            return None
        tags.append((found.group(1) is not None, found.group(2)))
    return tags or None


def if_match_holds(parsed, current):
    """Whether the parsed `If-Match` matches the current strong tag `current`. If-Match uses the
    strong comparison: a weak tag never matches."""
    if parsed == "*":
        return True
    return any(not weak and f'"{opaque}"' == current for weak, opaque in parsed)


class Orders:
    """Orders in SQLite; one lock because sqlite3 connections are not shared across threads."""

    def __init__(self, path):
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY AUTOINCREMENT, "
            "created_ms INTEGER NOT NULL, cart TEXT NOT NULL, total_cents INTEGER NOT NULL, "
            "client TEXT, idempotency_key TEXT, status TEXT NOT NULL DEFAULT 'unpaid', "
            "version INTEGER NOT NULL DEFAULT 1, note TEXT, events_applied INTEGER NOT NULL DEFAULT 0, "
            "UNIQUE (client, idempotency_key))"
        )
        self.lock = threading.Lock()
        self.received = 0
        self.events_applied = 0
        self.updates_received = 0

    def apply_event(self, order_id, status):
        """Moves an order to `status` whatever its status was (naive on purpose) and counts the
        event; False when there is no such order."""
        with self.lock:
            cur = self.db.execute(
                "UPDATE orders SET status = ?, version = version + 1, events_applied = events_applied + 1 "
                "WHERE id = ?", (status, order_id))
            self.db.commit()
            if cur.rowcount == 0:
                return False
            self.events_applied += 1
            return True

    def count_request(self):
        with self.lock:
            self.received += 1

    def count_update(self):
        with self.lock:
            self.updates_received += 1

    def create(self, cart, total_cents, client, key):
        """Returns (order, created): an existing order for the same (client, key) is returned as is."""
        with self.lock:
            if key is not None:
                row = self.db.execute(
                    "SELECT id FROM orders WHERE client = ? AND idempotency_key = ?", (client, key)
                ).fetchone()
                if row is not None:
                    return self.get(row[0]), False
            cur = self.db.execute(
                "INSERT INTO orders (created_ms, cart, total_cents, client, idempotency_key) VALUES (?, ?, ?, ?, ?)",
                (int(time.time() * 1000), json.dumps(cart, sort_keys=True), total_cents, client, key),
            )
            self.db.commit()
            return self.get(cur.lastrowid), True

    def update_note(self, order_id, note, if_match):
        """Stores `note` on the order if `if_match` (parsed) matches its current tag: a
        compare-and-set on the version read here. Returns ("updated", order), ("stale", order)
        or ("missing", None)."""
        with self.lock:
            order = self.get(order_id)
            if order is None:
                return "missing", None
            if not if_match_holds(if_match, etag(order)):
                return "stale", order
            cur = self.db.execute(
                "UPDATE orders SET note = ?, version = version + 1 WHERE id = ? AND version = ?",
                (note, order["id"], order["version"]))
            self.db.commit()
            # The lock makes a concurrent change impossible here; the `version = ?` says what the
            # write relies on, as it would with several service processes on one database.
            if cur.rowcount == 0:
                return "stale", order
            return "updated", self.get(order["id"])

    def get(self, order_id):
        row = self.db.execute(
            "SELECT id, created_ms, cart, total_cents, status, version, note, events_applied "
            "FROM orders WHERE id = ?", (order_id,)
        ).fetchone()
        if row is None:
            return None
        return {"id": row[0], "created_ms": row[1], "cart": json.loads(row[2]), "total_cents": row[3],
                "status": row[4], "version": row[5], "note": row[6], "events_applied": row[7]}

    def all(self):
        with self.lock:
            ids = [r[0] for r in self.db.execute("SELECT id FROM orders ORDER BY id")]
            return [self.get(i) for i in ids]
