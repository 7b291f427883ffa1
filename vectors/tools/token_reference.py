#!/usr/bin/env python3
"""Independent reference for vectors/token.json (one-time anti-resubmit tokens, `docs/semantics.md` §7).

Written from the spelled-out format, not from the Rust code, with the stdlib only (hmac, hashlib,
base64):

  token = "v1." b64url(issued_at u64be || expires_at u64be || nonce(16)) "." b64url(mac(32))
  mac   = HMAC-SHA-256(key = secret, msg = concat of u64be(len(p)) || p for p in
          ["idemgate-token-v1", scope(32), issued_at u64be, expires_at u64be, nonce(16)])

base64url is RFC 4648 §5 without padding; a decoder accepts exactly one spelling (43 characters,
no '=', unused low bits of the last character zero). Verification order: format
(token_malformed), MAC (token_bad_signature), now >= expires_at (token_expired), issued_at > now +
60 s (token_not_yet_valid). A secret under 16 bytes is token_secret_too_short.

Usage:
  token_reference.py --check vectors/token.json     # recompute every expect from its input; exit 1 on a difference
  token_reference.py --generate vectors/token.json  # write the file from the case recipes below
"""

import argparse
import base64
import hashlib
import hmac
import json
import struct
import sys

SKEW_MS = 60_000
UNITS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def u64be(n):
    return struct.pack(">Q", n)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode_strict(text, length):
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    if any(c not in alphabet for c in text):
        return None
    padded = text + "=" * (-len(text) % 4)
    try:
        data = base64.urlsafe_b64decode(padded)
    except ValueError:
        return None
    if len(data) != length or b64url(data) != text:  # one spelling only
        return None
    return data


def parse_ttl(text):
    total, number, unit = 0, "", ""
    for c in text + "0":  # a trailing digit flushes the last pair
        if c.isdigit():
            if unit:
                total += int(number) * UNITS[unit]
                number, unit = "", ""
            number += c
        else:
            unit += c
    return total


def mac(secret, scope, issued_at, expires_at, nonce):
    parts = [b"idemgate-token-v1", scope, u64be(issued_at), u64be(expires_at), nonce]
    message = b"".join(u64be(len(p)) + p for p in parts)
    return hmac.new(secret, message, hashlib.sha256).digest()


def make_token(secret, scope, issued_at, expires_at, nonce):
    payload = u64be(issued_at) + u64be(expires_at) + nonce
    return "v1." + b64url(payload) + "." + b64url(mac(secret, scope, issued_at, expires_at, nonce))


def secret_of(inp):
    return inp["secret"].encode() if "secret" in inp else bytes.fromhex(inp["secret_hex"])


def evaluate(inp):
    secret = secret_of(inp)
    if len(secret) < 16:
        return {"error": "token_secret_too_short"}
    scope = bytes.fromhex(inp["scope_hex"])
    now = inp["now"]
    if inp["op"] == "issue":
        expires_at = min(now + parse_ttl(inp["ttl"]), 2**64 - 1)
        nonce = bytes.fromhex(inp["nonce_hex"])
        return {"ok": {"token": make_token(secret, scope, now, expires_at, nonce), "expires_at": expires_at}}
    text = inp["token"]
    pieces = text.split(".")
    if len(pieces) != 3 or pieces[0] != "v1":
        return {"error": "token_malformed"}
    payload = b64url_decode_strict(pieces[1], 32)
    tag = b64url_decode_strict(pieces[2], 32)
    if payload is None or tag is None:
        return {"error": "token_malformed"}
    issued_at, expires_at = struct.unpack(">QQ", payload[:16])
    nonce = payload[16:]
    if not hmac.compare_digest(mac(secret, scope, issued_at, expires_at, nonce), tag):
        return {"error": "token_bad_signature"}
    if now >= expires_at:
        return {"error": "token_expired"}
    if issued_at > now + SKEW_MS:
        return {"error": "token_not_yet_valid"}
    return {"ok": {"issued_at": issued_at, "expires_at": expires_at, "nonce_hex": nonce.hex()}}


# ---- case recipes (inputs only; every expect comes from evaluate) ----

SECRET = bytes(range(0x20, 0x40))  # 32 bytes 20..3f
OTHER_SECRET = bytes(range(0x21, 0x41))
SCOPE = hashlib.sha256(b"scope:alice").digest()
OTHER_SCOPE = hashlib.sha256(b"scope:bob").digest()
NONCE = bytes(range(16))
NOW = 1_700_000_000_000
TEN_MIN = 600_000


def recipes():
    good = make_token(SECRET, SCOPE, NOW, NOW + TEN_MIN, NONCE)
    prefix, payload, tag = good.split(".")

    def v(name, token, now=NOW, secret=SECRET, scope=SCOPE, why=None):
        case = {"name": name, "input": {"op": "verify", "secret_hex": secret.hex(), "scope_hex": scope.hex(), "now": now, "token": token}}
        if why:
            case["why"] = why
        return case

    def issue(name, ttl, nonce=NONCE, now=NOW, secret=SECRET, why=None, text_secret=None):
        inp = {"op": "issue", "scope_hex": SCOPE.hex(), "now": now, "ttl": ttl, "nonce_hex": nonce.hex()}
        if text_secret is not None:
            inp = {"op": "issue", "secret": text_secret, **inp}
        else:
            inp = {"op": "issue", "secret_hex": secret.hex(), **inp}
        case = {"name": name, "input": inp}
        if why:
            case["why"] = why
        return case

    forged_payload = b64url(u64be(NOW) + u64be(NOW + 100 * TEN_MIN) + NONCE)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    flipped_tag = ("B" if tag[0] == "A" else "A") + tag[1:]
    non_canonical_tag = tag[:-1] + alphabet[alphabet.index(tag[-1]) | 1]
    future = make_token(SECRET, SCOPE, NOW + SKEW_MS + 1, NOW + TEN_MIN, NONCE)
    at_skew = make_token(SECRET, SCOPE, NOW + SKEW_MS, NOW + TEN_MIN, NONCE)
    return [
        issue("issue 10m", "10m", why="expires_at = now + 600000"),
        issue("issue 24h other nonce", "24h", nonce=bytes([0xff] * 16), why="expires_at = now + 86400000"),
        issue("issue zero ttl", "0s", why="expires_at = now: born expired"),
        issue("issue text secret", "30s", text_secret="correct horse battery staple"),
        issue("issue secret too short", "10m", secret=bytes(15), why="15 bytes < 16"),
        v("verify fresh", good),
        v("verify one ms before expiry", good, now=NOW + TEN_MIN - 1),
        v("verify exactly at expiry", good, now=NOW + TEN_MIN, why="now >= expires_at"),
        v("verify after expiry", good, now=NOW + 2 * TEN_MIN),
        v("verify wrong scope", good, scope=OTHER_SCOPE, why="scope is bound only through the MAC"),
        v("verify wrong secret", good, secret=OTHER_SECRET),
        v("verify wrong scope after expiry", good, scope=OTHER_SCOPE, now=NOW + 2 * TEN_MIN, why="signature is checked before time"),
        v("verify tampered payload (longer expiry)", f"{prefix}.{forged_payload}.{tag}"),
        v("verify tampered mac", f"{prefix}.{payload}.{flipped_tag}"),
        v("verify issued 60001 ms in the future", future, why="issued_at > now + 60000"),
        v("verify issued exactly 60000 ms in the future", at_skew, why="skew tolerated up to 60 s"),
        v("verify garbage", "hello"),
        v("verify empty", ""),
        v("verify truncated", good[:-1]),
        v("verify extra dot segment", good + ".x"),
        v("verify trailing dot", good + "."),
        v("verify version v2", "v2." + good[3:]),
        v("verify padding", good + "="),
        v("verify standard base64 alphabet", f"{prefix}.{payload}.{tag[:-2]}+/"),
        v("verify non-canonical last character", f"{prefix}.{payload}.{non_canonical_tag}", why="unused low bits of the last character must be zero"),
        v("verify surrounding space", " " + good),
    ]


def check(path):
    with open(path) as f:
        data = json.load(f)
    bad = 0
    names = set()
    for case in data["cases"]:
        if case["name"] in names:
            print(f"duplicate name: {case['name']}")
            bad += 1
        names.add(case["name"])
        want = evaluate(case["input"])
        if case["expect"] != want:
            print(f"MISMATCH {case['name']}: file {case['expect']} reference {want}")
            bad += 1
    print(f"{len(data['cases'])} cases, {bad} problems")
    return 1 if bad else 0


def generate(path):
    cases = []
    for case in recipes():
        case["expect"] = evaluate(case["input"])
        cases.append(case)
    data = {
        "group": "token",
        "description": (
            "One-time tokens (`docs/semantics.md` §7). input op=issue: secret_hex (or secret as text), scope_hex "
            "(32 bytes), now (ms), ttl (duration), nonce_hex (16 bytes) -> ok {token, expires_at}; "
            "op=verify: secret_hex, scope_hex, now, token -> ok {issued_at, expires_at, nonce_hex} or a "
            "TokenError code. Expected values come from vectors/tools/token_reference.py, written from "
            "the spelled-out format with Python's hmac/hashlib/base64 (check with: python3 "
            "vectors/tools/token_reference.py --check vectors/token.json)."
        ),
        "cases": cases,
    }
    with open(path, "w") as f:
        f.write("{\n")
        f.write(f'  "group": {json.dumps(data["group"])},\n')
        f.write(f'  "description": {json.dumps(data["description"], ensure_ascii=False)},\n')
        f.write('  "cases": [\n')
        f.write(",\n".join("    " + json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n  ]\n}\n")
    print(f"wrote {len(cases)} cases to {path}")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", metavar="FILE")
    mode.add_argument("--generate", metavar="FILE")
    args = parser.parse_args()
    sys.exit(check(args.check) if args.check else generate(args.generate))


if __name__ == "__main__":
    main()
