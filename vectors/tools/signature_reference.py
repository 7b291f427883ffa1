#!/usr/bin/env python3
"""Independent reference for vectors/signature.json (webhook signatures on callback routes).

Written from the providers' documented formats, not from the Rust code (stdlib hmac/hashlib only):
- GitHub: header `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>`;
- Stripe: header `Stripe-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`,
  more `v1=` entries allowed (any may match), other schemes (`v0=`) ignored; the timestamp must be
  within `tolerance` (default 5 minutes) of now, in either direction.
Codes: signature_missing (no header), signature_malformed (not the format: no `sha256=`, hex not
64 digits, no `t`, no `v1`, `t` not digits, an item without `=`), signature_stale, signature_mismatch,
signature_secret_too_short (secret under 8 bytes). The header check (format, timestamp) comes first.

Usage:
  signature_reference.py --check vectors/signature.json   # exit 1 if any expect differs
  signature_reference.py --write vectors/signature.json   # (re)compute every expect from the inputs
  signature_reference.py --sign github SECRET BODY         # print a header value
  signature_reference.py --sign stripe SECRET BODY T       # print a header value
"""

import argparse
import hashlib
import hmac
import json
import re
import sys

UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def millis(text):
    total = 0
    for number, unit in re.findall(r"(\d+)(ms|s|m|h)", text):
        total += int(number) * UNITS[unit]
    return total


def mac(secret, data):
    return hmac.new(secret.encode(), data, hashlib.sha256).hexdigest()


def is_hex64(text):
    return len(text) == 64 and all(c in "0123456789abcdefABCDEF" for c in text)


def verify(case):
    secret = case["secret"]
    body = bytes.fromhex(case["body_hex"]) if "body_hex" in case else case["body"].encode()
    if len(secret.encode()) < 8:
        return {"error": "signature_secret_too_short"}
    header = case.get("header")
    if header is None:
        return {"error": "signature_missing"}
    if case["scheme"] == "github":
        value = header.strip()
        if not value.startswith("sha256=") or not is_hex64(value[7:]):
            return {"error": "signature_malformed"}
        ok = hmac.compare_digest(value[7:].lower(), mac(secret, body))
        return {"ok": True} if ok else {"error": "signature_mismatch"}
    t, tags = None, []
    for item in header.split(","):
        item = item.strip()
        if "=" not in item:
            return {"error": "signature_malformed"}
        name, value = item.split("=", 1)
        if name == "t":
            t = value
        elif name == "v1":
            if not is_hex64(value):
                return {"error": "signature_malformed"}
            tags.append(value.lower())
    if t is None or not t.isdigit() or not tags:
        return {"error": "signature_malformed"}
    tolerance = millis(case.get("tolerance", "5m"))
    if abs(case["now_ms"] // 1000 - int(t)) * 1000 > tolerance:
        return {"error": "signature_stale"}
    expected = mac(secret, t.encode() + b"." + body)
    ok = any(hmac.compare_digest(tag, expected) for tag in tags)
    return {"ok": True} if ok else {"error": "signature_mismatch"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check")
    ap.add_argument("--write")
    ap.add_argument("--sign", nargs="+")
    args = ap.parse_args()
    if args.sign:
        scheme, secret, body, *rest = args.sign
        if scheme == "github":
            print("sha256=" + mac(secret, body.encode()))
        else:
            print(f"t={rest[0]},v1=" + mac(secret, f"{rest[0]}.{body}".encode()))
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
