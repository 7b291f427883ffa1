#!/usr/bin/env python3
"""Independent reference for vectors/key_source.json (where a route's idempotency key comes from).

Written from "Key sources and callback routes" (docs/guide/callbacks-and-presets.md), `docs/semantics.md` §1 and the webhook presets' rules (presets,
CloudEvents, pass-through, numbers by value, unreadable bodies), not from the Rust code (stdlib
only: json, decimal, hashlib). A route's `key_from` sources are tried in order; the first present
wins:
- {"header": NAME}: every value of the header (case-insensitive name); absent if none;
- {"json": POINTER}: RFC 6901 in a JSON body (the pointer selecting nothing is absent; array
  elements only by a canonical index); a string is the key as it is spelled ("1e2" stays 1e2), a
  number is the key by its VALUE, one spelling per value (Python's decimal, never floats): zero is
  0; an integer value is its plain decimal digits (with "-" if negative) when that is at most 255
  characters (100, 1e2, 100.0, 1.00E+2 -> 100); any other value is
  <significant digits without leading/trailing zeros>e<exponent>, value = digits x 10^exponent
  (1.5, 1.50, 15e-1 -> 15e-1; -0.25 -> -25e-2; 1e300 -> 1e300); anything else is key_not_text;
- {"form": FIELD}: every value of the field (pieces split at "&" and the first "="; "+" a space,
  "%XX" a byte, a "%" without two hex digits kept as is);
- {"cloudevents": true}: any Content-Type value whose essence is application/cloudevents-batch+json
  -> cloudevents_batch_unsupported. The one Content-Type's essence application/cloudevents+json
  (structured mode): a body source over the JSON body's members "source" and "id" (both absent:
  absent; both non-empty strings: the key; else cloudevent_incomplete). Otherwise (binary mode): a
  header source over ce-source and ce-id (each: values trimmed of spaces/tabs, several values must
  all be equal else key_conflicting; both absent: absent; one absent or either empty:
  cloudevent_incomplete). The key is "ce:" + lowercase hex SHA-256 over the parts
  [b"idemgate.cloudevent.v1", source, id], each preceded by its length as a u64 big-endian.
Body sources and what they can read: JSON sources and a structured CloudEvent source read a body
that parses as JSON (UTF-8); form sources read a body whose one Content-Type essence (before ";",
trimmed, case-insensitive) is application/x-www-form-urlencoded. When the search reaches a body
source (no earlier source found the key): when no body source of the route can read the body,
the body sources are absent, and if no later header source finds the key -> key_body_unreadable;
otherwise a body source that cannot read it is absent. Header sources found before any body
source decide without the body.
Every key value (not the CloudEvent parts, which are hashed) obeys the key rules: spaces/tabs
around are ignored; a value starting with '"' is an RFC 8941 sf-string (escapes \\" and \\\\ only;
else key_malformed_quoted_string); then 1 to 255 bytes (key_empty, key_too_long), visible ASCII
only (key_non_ascii for a byte >= 0x80, else key_invalid_character). Several values that differ:
key_conflicting. No key: null, or key_missing when the route's key is required (callback routes
require it by default).
Routes: `pass_through` {"header": H, "values": [...]} (callback routes): H present and every value
of it, trimmed of spaces/tabs, exactly one of `values` -> null (unguarded), before any key source;
{"json": P, "values": [...]}: the body is JSON and P resolves to a string exactly one of `values`
-> null, before any key source.
Key rules (`key_format`, `key_mismatch`): a key found (not null) is then held to the route's
format: "uuid" is 36 characters, "-" at 0-based positions 8, 13, 18 and 23 and a hexadecimal digit
(either case) everywhere else; {"prefix": P} is a key that starts with P (exact bytes) and is longer
than P; {"pattern": P} is a key the whole of which matches P in the pattern language of
`key_format` (docs/reference/configuration.md)
(atoms: a visible ASCII character, "\\" + one of \\ [ ] { } ( ) . * + ? ^ $ | for itself, \\d 0-9,
\\w A-Za-z0-9_, \\x 0-9a-fA-F, "." any visible ASCII character, a class [...] of characters and
ranges a-z, "-" first or last or "\\-" for itself; quantifiers {n}, {m,n}, ?, * = {0,255},
+ = {1,255}), here parsed into (set of characters, min, max) and matched by re.fullmatch over
classes of single escaped characters. A key of another format is key_format, or with
"key_mismatch": "ignore" no key at all (null; a route that ignores mismatches never requires a
key). Errors before the key is found stay what they are.
`preset` makes a callback route (key required unless said otherwise) with the sender's key_from
(and, for sns, pass_through); every field the route sets itself wins (PRESETS below). The signed
presets also need a signature the vectors' evaluator verifies; this reference does not model
signatures and refuses them.

Usage:
  key_source_reference.py --check vectors/key_source.json
  key_source_reference.py --write vectors/key_source.json
"""

import argparse
import decimal
import hashlib
import json
import re
import sys


class KeyError_(Exception):
    def __init__(self, code):
        super().__init__(code)
        self.code = code


def unquote(raw):
    out = bytearray()
    i = 1
    while i < len(raw):
        c = raw[i]
        if c == 0x5C:
            if i + 1 < len(raw) and raw[i + 1] in (0x22, 0x5C):
                out.append(raw[i + 1])
                i += 2
                continue
            raise KeyError_("key_malformed_quoted_string")
        if c == 0x22:
            if i + 1 == len(raw):
                return bytes(out)
            raise KeyError_("key_malformed_quoted_string")
        if 0x20 <= c <= 0x7E:
            out.append(c)
            i += 1
            continue
        raise KeyError_("key_non_ascii" if c >= 0x80 else "key_invalid_character")
    raise KeyError_("key_malformed_quoted_string")


def parse_key(raw):
    raw = raw.strip(b" \t")
    value = unquote(raw) if raw[:1] == b'"' else raw
    if not value:
        raise KeyError_("key_empty")
    if len(value) > 255:
        raise KeyError_("key_too_long")
    for b in value:
        if not 0x21 <= b <= 0x7E:
            raise KeyError_("key_non_ascii" if b >= 0x80 else "key_invalid_character")
    return value.decode()


def parse_all(values):
    found = None
    for v in values:
        key = parse_key(v)
        if found is not None and key != found:
            raise KeyError_("key_conflicting")
        found = key if found is None else found
    return found


def form_decode(raw):
    out = bytearray()
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == ord("+"):
            out.append(0x20)
        elif c == ord("%") and len(raw[i + 1:i + 3]) == 2 and all(h in b"0123456789abcdefABCDEF" for h in raw[i + 1:i + 3]):
            out.append(int(raw[i + 1:i + 3], 16))
            i += 3
            continue
        else:
            out.append(c)
        i += 1
    return bytes(out)


def resolve(doc, pointer):
    if pointer == "":
        return True, doc
    for token in pointer[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(doc, dict) and token in doc:
            doc = doc[token]
        elif isinstance(doc, list) and (token == "0" or (token[:1] in "123456789" and token.isdigit())) and int(token) < len(doc):
            doc = doc[int(token)]
        else:
            return False, None
    return True, doc


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key")
    return dict(pairs)


PRESETS = {
    # preset: (key_from, key requirement, pass_through, signed)
    "standard-webhooks": ([{"header": "webhook-id"}], "required", None, True),
    "svix": ([{"header": "svix-id"}], "required", None, True),
    "stripe": ([{"json": "/id"}], "required", None, True),
    "github": ([{"header": "x-github-delivery"}], "required", None, True),
    "shopify": ([{"header": "x-shopify-webhook-id"}], "required", None, True),
    "slack": ([{"json": "/event_id"}], "optional", None, True),
    "cloudevents": ([{"cloudevents": True}], "required", None, False),
    "pubsub-push": ([{"json": "/message/messageId"}, {"header": "x-goog-pubsub-message-id"}], "required", None, False),
    "sns": ([{"json": "/MessageId"}], "required",
            {"json": "/Type", "values": ["SubscriptionConfirmation", "UnsubscribeConfirmation"]}, False),
}

CE_TAG = b"idemgate.cloudevent.v1"
CE_STRUCTURED = b"application/cloudevents+json"
CE_BATCH = b"application/cloudevents-batch+json"
FORM = b"application/x-www-form-urlencoded"


class Number:
    """A JSON number, kept as its exact decimal value (never a float)."""

    def __init__(self, text):
        self.value = decimal.Decimal(text)


def no_constants(name):
    raise ValueError(f"{name} is not JSON")


def number_key(number):
    """One spelling per value: 0; an integer's plain digits (at most 255 characters); else
    <significant digits>e<exponent>."""
    sign, digits, exponent = number.value.as_tuple()
    digits = "".join(map(str, digits)).lstrip("0")
    if not digits:
        return "0"
    stripped = digits.rstrip("0")
    exponent += len(digits) - len(stripped)
    minus = "-" if sign else ""
    if exponent >= 0:
        plain = minus + stripped + "0" * exponent
        if len(plain) <= 255:
            return plain
    return f"{minus}{stripped}e{exponent}"


def essence(value):
    return value.split(b";")[0].strip(b" \t").lower()


def ce_key(source, ident):
    if not source or not ident:
        raise KeyError_("cloudevent_incomplete")
    h = hashlib.sha256()
    for part in (CE_TAG, source, ident):
        h.update(len(part).to_bytes(8, "big") + part)
    return "ce:" + h.hexdigest()


def ce_header(values, name):
    found = [v.strip(b" \t") for v in values(name)]
    if any(v != found[0] for v in found):
        raise KeyError_("key_conflicting")
    return found[0] if found else None


def is_uuid(key):
    return len(key) == 36 and all(
        c == "-" if i in (8, 13, 18, 23) else c in "0123456789abcdefABCDEF" for i, c in enumerate(key))


DIGITS = set("0123456789")
WORD = DIGITS | set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
HEX = DIGITS | set("abcdefABCDEF")
NAMED = {"d": DIGITS, "w": WORD, "x": HEX}
ESCAPABLE = "\\[]{}().*+?^$|"
VISIBLE = {chr(c) for c in range(0x21, 0x7F)}


def pattern_atoms(pattern):
    """The pattern as [(set of characters, min, max)] (the vectors hold only valid patterns)."""
    atoms, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c in "?*+{":
            if c == "{":
                end = pattern.index("}", i)
                counts = [int(n) for n in pattern[i + 1:end].split(",")]
                lo, hi = counts[0], counts[-1]
                i = end
            else:
                lo, hi = {"?": (0, 1), "*": (0, 255), "+": (1, 255)}[c]
            atoms[-1] = (atoms[-1][0], lo, hi)
            i += 1
            continue
        if c == "\\":
            e = pattern[i + 1]
            chars = NAMED.get(e, {e})
            i += 2
        elif c == ".":
            chars = VISIBLE
            i += 1
        elif c == "[":
            chars, i = set(), i + 1
            while pattern[i] != "]":
                if pattern[i] == "\\":
                    member, i = NAMED.get(pattern[i + 1], {pattern[i + 1]}), i + 2
                else:
                    member, i = {pattern[i]}, i + 1
                if len(member) == 1 and pattern[i] == "-" and pattern[i + 1] != "]":
                    high = pattern[i + 2] if pattern[i + 1] == "\\" else pattern[i + 1]
                    i += 3 if pattern[i + 1] == "\\" else 2
                    member = {chr(x) for x in range(ord(next(iter(member))), ord(high) + 1)}
                chars |= member
            i += 1
        else:
            chars = {c}
            i += 1
        atoms.append((chars, 1, 1))
    return atoms


def pattern_matches(pattern, key):
    regex = "".join("[" + "".join(re.escape(c) for c in sorted(chars)) + "]{%d,%d}" % (lo, hi)
                    for chars, lo, hi in pattern_atoms(pattern))
    return re.fullmatch(regex, key) is not None


def fits(rule, key):
    if rule == "uuid":
        return is_uuid(key)
    if "prefix" in rule:
        return key.startswith(rule["prefix"]) and len(key) > len(rule["prefix"])
    return pattern_matches(rule["pattern"], key)


def find(case):
    """The key search's result, then the route's key rules on a key found."""
    found = search(case)
    key = found.get("ok")
    rule = case["route"].get("key_format")
    if key is None or rule is None:
        return found
    if fits(rule, key):
        return found
    return {"ok": None} if case["route"].get("key_mismatch") == "ignore" else {"error": "key_format"}


def search(case):
    route = dict(case["route"])
    headers = case.get("headers", [])
    body = bytes.fromhex(case["body_hex"]) if "body_hex" in case else case.get("body", "").encode()
    values = lambda name: [v.encode() for n, v in headers if n.lower() == name.lower()]
    if "preset" in route:
        key_from, key, pass_through, signed = PRESETS[route["preset"]]
        if signed:
            raise SystemExit(f"preset {route['preset']}: signed presets need a verified signature, not modelled here")
        preset = {"kind": "callback", "key_from": key_from, "key": key}
        if pass_through:
            preset["pass_through"] = pass_through
        route = {**preset, **route}
    kind = route.get("kind", "api")
    required = route.get("key", "required" if kind == "callback" else "optional") == "required"
    sources = route.get("key_from", [{"header": "idempotency-key"}])
    types = values("content-type")
    one_type = essence(types[0]) if len(types) == 1 else None
    batch = any(essence(t) == CE_BATCH for t in types)
    try:
        doc = (True, json.loads(body.decode("utf-8"), object_pairs_hook=no_duplicates,
                                parse_float=Number, parse_int=Number, parse_constant=no_constants))
    except (ValueError, UnicodeDecodeError):
        doc = (False, None)
    pass_through = route.get("pass_through")
    if pass_through and "header" in pass_through:
        found = values(pass_through["header"])
        if found and all(v.strip(b" \t").decode() in pass_through["values"] for v in found):
            return {"ok": None}
    if pass_through and "json" in pass_through and doc[0]:
        ok, value = resolve(doc[1], pass_through["json"])
        if ok and isinstance(value, str) and value in pass_through["values"]:
            return {"ok": None}

    def is_body(source):
        (kind_, _), = source.items()
        return kind_ in ("json", "form") or (kind_ == "cloudevents" and not batch and one_type == CE_STRUCTURED)

    def reads(source):
        (kind_, _), = source.items()
        return one_type == FORM if kind_ == "form" else doc[0]

    readable = any(is_body(s) and reads(s) for s in sources)
    unreadable = False
    try:
        for source in sources:
            (kind_, name), = source.items()
            if is_body(source):
                if not readable:
                    unreadable = True
                    continue
                if not reads(source):
                    continue
            if kind_ == "header":
                found = values(name)
                if found:
                    return {"ok": parse_all(found)}
            elif kind_ == "json":
                ok, value = resolve(doc[1], name)
                if ok:
                    if isinstance(value, str):
                        return {"ok": parse_key(value.encode())}
                    if isinstance(value, Number):
                        return {"ok": parse_key(number_key(value).encode())}
                    raise KeyError_("key_not_text")
            elif kind_ == "form":
                found = []
                for piece in body.split(b"&"):
                    n, _, v = piece.partition(b"=")
                    if form_decode(n) == name.encode():
                        found.append(form_decode(v))
                if found:
                    return {"ok": parse_all(found)}
            elif kind_ == "cloudevents":
                if batch:
                    raise KeyError_("cloudevents_batch_unsupported")
                if is_body(source):
                    event = doc[1] if isinstance(doc[1], dict) else {}
                    if "source" not in event and "id" not in event:
                        continue
                    source_, ident = event.get("source"), event.get("id")
                    if not isinstance(source_, str) or not isinstance(ident, str):
                        raise KeyError_("cloudevent_incomplete")
                    return {"ok": ce_key(source_.encode(), ident.encode())}
                source_, ident = ce_header(values, "ce-source"), ce_header(values, "ce-id")
                if source_ is None and ident is None:
                    continue
                if source_ is None or ident is None:
                    raise KeyError_("cloudevent_incomplete")
                return {"ok": ce_key(source_, ident)}
    except KeyError_ as e:
        return {"error": e.code}
    if unreadable:
        return {"error": "key_body_unreadable"}
    return {"error": "key_missing"} if required else {"ok": None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check")
    ap.add_argument("--write")
    args = ap.parse_args()
    path = args.check or args.write
    doc = json.load(open(path))
    bad = 0
    for case in doc["cases"]:
        want = find(case["input"])
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
