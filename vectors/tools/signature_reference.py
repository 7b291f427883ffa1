#!/usr/bin/env python3
"""Independent reference for vectors/signature.json (webhook signatures on callback routes).

Written from the providers' documented formats, not from the Rust code (stdlib hmac/hashlib/base64;
Ed25519 with the `cryptography` package, imported only when a case needs it):
- GitHub: header `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>`;
- Stripe: header `Stripe-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`,
  more `v1=` entries allowed (any may match), other schemes (`v0=`) ignored;
- Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`) and Svix (the same
  under `svix-*`): the signature header holds space-separated `<version>,<base64>` items over
  "<id>.<timestamp>.<body>", the timestamp written as its decimal value (as the `standardwebhooks`
  and `svix` libraries sign it); `v1` = HMAC-SHA256 keyed with the base64 decoding of the secret
  after an optional `whsec_`; `v1a` = Ed25519, checked against `whpk_<base64 of 32 bytes>` public
  keys; other versions ignored;
- Shopify: `X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256(secret, body)>`;
- Slack: `X-Slack-Signature: v0=<hex HMAC-SHA256(secret, "v0:<X-Slack-Request-Timestamp>:<body>")>`.
Timestamps (Stripe, Standard Webhooks, Svix, Slack) are ASCII digits fitting 64 bits. One more
than `tolerance` (default 5 minutes) ahead of now is refused; one more than `tolerance` behind now
is a late delivery (a redelivery with its original signature): checked like any other, and if it
verifies the answer is "late" instead of true (only the acknowledgement stored for it may answer
it). Base64 is standard with
padding and canonical (re-encoding gives the same text). A rule has one or more secrets (`secret`
or `secrets`); a delivery verifies when any secret matches any signature it carries.

Codes, checked in this order:
1. the secrets, in list order: signature_no_secret (empty list), signature_secret_too_short (under
   8 bytes; Standard Webhooks/Svix: decoded), signature_secret_not_base64 (Standard Webhooks/Svix
   secret not [whsec_]base64), signature_public_key_invalid (`whpk_` not base64 of 32 bytes, not a
   curve point, or of small order);
2. signature_missing: a header the scheme reads is absent (signature header first, then id,
   timestamp); signature_malformed if one is given twice;
3. signature_malformed: not the format (GitHub/Slack: no `sha256=`/`v0=` or hex not 64 digits;
   Stripe: an item without `=`, bad v1 hex, no `t`, `t` not digits; Standard Webhooks: empty id,
   timestamp not digits, an item without `,`, v1/v1a not base64 of 32/64 bytes; Shopify: not base64
   of 32 bytes), or no known signature at all, or more than 8 signatures;
4. signature_stale (ahead of now only); 5. signature_mismatch (also when late).

Usage:
  signature_reference.py --check vectors/signature.json   # exit 1 if any expect differs
  signature_reference.py --write vectors/signature.json   # (re)compute every expect from the inputs
  signature_reference.py --sign github|shopify SECRET BODY
  signature_reference.py --sign stripe|slack SECRET BODY T
  signature_reference.py --sign standard_webhooks SECRET BODY ID T   # v1 item
  signature_reference.py --sign v1a SEED_HEX BODY ID T               # whpk_ key and v1a item
"""

import argparse
import base64
import hashlib
import hmac
import json
import re
import sys

UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
MAX_SIGNATURES = 8
HEADERS = {
    "github": ["x-hub-signature-256"],
    "stripe": ["stripe-signature"],
    "standard_webhooks": ["webhook-signature", "webhook-id", "webhook-timestamp"],
    "svix": ["svix-signature", "svix-id", "svix-timestamp"],
    "shopify": ["x-shopify-hmac-sha256"],
    "slack": ["x-slack-signature", "x-slack-request-timestamp"],
}
STANDARD = ("standard_webhooks", "svix")
TIMESTAMPED = ("stripe", "standard_webhooks", "svix", "slack")


class Refused(Exception):
    def __init__(self, code):
        self.code = code


def millis(text):
    total = 0
    for number, unit in re.findall(r"(\d+)(ms|s|m|h)", text):
        total += int(number) * UNITS[unit]
    return total


def mac(key, data):
    return hmac.new(key, data, hashlib.sha256).digest()


def hex32(text):
    if len(text) != 64 or not all(c in "0123456789abcdefABCDEF" for c in text):
        raise Refused("signature_malformed")
    return bytes.fromhex(text)


def b64(text):
    """Canonical padded standard base64, or None."""
    if len(text) % 4 or not re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", text):
        return None
    raw = base64.b64decode(text, validate=True)
    return raw if base64.b64encode(raw).decode() == text else None


def seconds(text):
    if not re.fullmatch(r"[0-9]+", text) or int(text) >= 2**64:
        raise Refused("signature_malformed")
    return int(text)


# Ed25519 point checks, from RFC 8032 §5.1.3 (decoding) and the group law, to refuse a `whpk_`
# that is not a point or is of small order (8·A is the neutral element).
P = 2**255 - 19
D = (-121665 * pow(121666, P - 2, P)) % P


def point(raw):
    y = int.from_bytes(raw, "little") & ((1 << 255) - 1)
    sign = raw[31] >> 7
    x2 = (y * y - 1) * pow(D * y * y + 1, P - 2, P) % P
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P:
        x = x * pow(2, (P - 1) // 4, P) % P
    if (x * x - x2) % P:
        return None
    if x & 1 != sign:
        x = P - x
    return (x % P, y % P)


def add(a, b):
    (x1, y1), (x2, y2) = a, b
    t = D * x1 * x2 * y1 * y2 % P
    return ((x1 * y2 + x2 * y1) * pow(1 + t, P - 2, P) % P,
            (y1 * y2 + x1 * x2) * pow(1 - t, P - 2, P) % P)


def small_order(pt):
    for _ in range(3):
        pt = add(pt, pt)
    return pt == (0, 1)


def keys(scheme, secrets):
    """(hmac keys, ed25519 public keys) or Refused."""
    if not secrets:
        raise Refused("signature_no_secret")
    macs, publics = [], []
    for secret in secrets:
        if scheme in STANDARD and secret.startswith("whpk_"):
            raw = b64(secret[5:])
            pt = point(raw) if raw is not None and len(raw) == 32 else None
            if pt is None or small_order(pt):
                raise Refused("signature_public_key_invalid")
            publics.append(raw)
            continue
        if scheme in STANDARD:
            raw = b64(secret[6:] if secret.startswith("whsec_") else secret)
            if raw is None:
                raise Refused("signature_secret_not_base64")
        else:
            raw = secret.encode()
        if len(raw) < 8:
            raise Refused("signature_secret_too_short")
        macs.append(raw)
    return macs, publics


def claim(scheme, values):
    """(signed prefix, macs, ed25519 signatures, timestamp or None)."""
    if scheme == "github":
        (value,) = values
        value = value.strip()
        if not value.startswith("sha256="):
            raise Refused("signature_malformed")
        return b"", [hex32(value[7:])], [], None
    if scheme == "shopify":
        raw = b64(values[0].strip())
        if raw is None or len(raw) != 32:
            raise Refused("signature_malformed")
        return b"", [raw], [], None
    if scheme == "slack":
        value, t = values
        value = value.strip()
        if not value.startswith("v0="):
            raise Refused("signature_malformed")
        tag = hex32(value[3:])
        return f"v0:{t}:".encode(), [tag], [], seconds(t)
    if scheme == "stripe":
        t, tags = None, []
        for item in values[0].split(","):
            item = item.strip()
            if "=" not in item:
                raise Refused("signature_malformed")
            name, value = item.split("=", 1)
            if name == "t":
                t = value
            elif name == "v1":
                tags.append(hex32(value))
        if t is None:
            raise Refused("signature_malformed")
        return f"{t}.".encode(), tags, [], seconds(t)
    signature, msg_id, t = values
    if msg_id == "":
        raise Refused("signature_malformed")
    ts = seconds(t)
    tags, eds = [], []
    for item in signature.split(" "):
        if item == "":
            continue
        if "," not in item:
            raise Refused("signature_malformed")
        version, value = item.split(",", 1)
        want = {"v1": 32, "v1a": 64}.get(version)
        if want is None:
            continue
        raw = b64(value)
        if raw is None or len(raw) != want:
            raise Refused("signature_malformed")
        (tags if version == "v1" else eds).append(raw)
    return f"{msg_id}.{ts}.".encode(), tags, eds, ts


def ed25519_ok(public, signature, message):
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
        return True
    except InvalidSignature:
        return False


def verify(case):
    scheme = case["scheme"]
    secrets = case["secrets"] if "secrets" in case else [case["secret"]]
    body = bytes.fromhex(case["body_hex"]) if "body_hex" in case else case["body"].encode()
    try:
        macs, publics = keys(scheme, secrets)
        values = []
        for i, name in enumerate(HEADERS[scheme]):
            given = [v for n, v in case.get("headers", {}).items() if n == name]
            if i == 0 and "header" in case:
                given.insert(0, case["header"])
            if not given:
                raise Refused("signature_missing")
            if len(given) > 1:
                raise Refused("signature_malformed")
            values.append(given[0])
        prefix, tags, eds, t = claim(scheme, values)
        if not 0 < len(tags) + len(eds) <= MAX_SIGNATURES:
            raise Refused("signature_malformed")
        tolerance = millis(case.get("tolerance", "5m"))
        late = False
        if scheme in TIMESTAMPED and abs(case["now_ms"] // 1000 - t) * 1000 > tolerance:
            if t > case["now_ms"] // 1000:
                raise Refused("signature_stale")
            late = True
        message = prefix + body
        ok = any(hmac.compare_digest(mac(key, message), tag) for key in macs for tag in tags)
        ok = ok or any(ed25519_ok(pk, sig, message) for pk in publics for sig in eds)
        if not ok:
            return {"error": "signature_mismatch"}
        return {"ok": "late"} if late else {"ok": True}
    except Refused as refused:
        return {"error": refused.code}


def sign(scheme, secret, body, *rest):
    if scheme == "github":
        return "sha256=" + mac(secret.encode(), body.encode()).hex()
    if scheme == "shopify":
        return base64.b64encode(mac(secret.encode(), body.encode())).decode()
    if scheme == "stripe":
        return f"t={rest[0]},v1=" + mac(secret.encode(), f"{rest[0]}.{body}".encode()).hex()
    if scheme == "slack":
        return "v0=" + mac(secret.encode(), f"v0:{rest[0]}:{body}".encode()).hex()
    msg_id, t = rest
    content = f"{msg_id}.{int(t)}.{body}".encode()
    if scheme == "v1a":
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(secret))
        public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return ("whpk_" + base64.b64encode(public).decode()
                + " v1a," + base64.b64encode(key.sign(content)).decode())
    key = base64.b64decode(secret[6:] if secret.startswith("whsec_") else secret)
    return "v1," + base64.b64encode(mac(key, content)).decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check")
    ap.add_argument("--write")
    ap.add_argument("--sign", nargs="+")
    args = ap.parse_args()
    if args.sign:
        print(sign(*args.sign))
        return 0
    path = args.check or args.write
    doc = json.load(open(path))
    bad = 0
    for case in doc["cases"]:
        want = verify(case["input"])
        if args.write:
            case["expect"] = want
        elif case["expect"] != want:
            bad += 1
            print(f"{case['name']}: expect {case['expect']}, reference {want}")
    if args.write:
        with open(path, "w") as f:
            f.write("{\n")
            f.write(f'  "group": {json.dumps(doc["group"])},\n')
            f.write(f'  "description": {json.dumps(doc["description"], ensure_ascii=False)},\n')
            f.write('  "cases": [\n')
            f.write(",\n".join("    " + json.dumps(c, ensure_ascii=False) for c in doc["cases"]))
            f.write("\n  ]\n}\n")
    else:
        print(f"{len(doc['cases']) - bad} of {len(doc['cases'])} cases agree with the reference")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
