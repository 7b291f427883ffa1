#!/usr/bin/env python3
"""Independent reference for vectors/key_source.json (where a route's idempotency key comes from).

Written from the README's "Key sources and callback routes" and semantics §1, not from the Rust
code (stdlib only). A route's `key_from` sources are tried in order; the first present wins:
- {"header": NAME}: every value of the header (case-insensitive name); absent if none;
- {"json": POINTER}: RFC 6901 in a JSON body (absent if the body is not JSON or the pointer selects
  nothing; array elements only by a canonical index); a string is the key, a number its text,
  anything else is key_not_text;
- {"form": FIELD}: only when the one Content-Type is application/x-www-form-urlencoded (essence,
  case-insensitive); every value of the field (pieces split at "&" and the first "="; "+" a space,
  "%XX" a byte, a "%" without two hex digits kept as is).
Every value obeys the key rules: spaces/tabs around are ignored; a value starting with '"' is an
RFC 8941 sf-string (escapes \\" and \\\\ only; else key_malformed_quoted_string); then 1 to 255
bytes (key_empty, key_too_long), visible ASCII only (key_non_ascii for a byte >= 0x80, else
key_invalid_character). Several values that differ: key_conflicting. No key: null, or key_missing
when the route's key is required (callback routes require it by default).

Usage:
  key_source_reference.py --check vectors/key_source.json
  key_source_reference.py --write vectors/key_source.json
"""

import argparse
import json
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


def find(case):
    route = case["route"]
    headers = case.get("headers", [])
    body = bytes.fromhex(case["body_hex"]) if "body_hex" in case else case.get("body", "").encode()
    values = lambda name: [v.encode() for n, v in headers if n.lower() == name.lower()]
    kind = route.get("kind", "api")
    required = route.get("key", "required" if kind == "callback" else "optional") == "required"
    sources = route.get("key_from", [{"header": "idempotency-key"}])
    types = values("content-type")
    is_form = len(types) == 1 and types[0].split(b";")[0].strip(b" \t").lower() == b"application/x-www-form-urlencoded"
    try:
        doc = (True, json.loads(body.decode("utf-8"), object_pairs_hook=no_duplicates, parse_float=str, parse_int=str))
    except (ValueError, UnicodeDecodeError):
        doc = (False, None)
    try:
        for source in sources:
            (kind_, name), = source.items()
            if kind_ == "header":
                found = values(name)
                if found:
                    return {"ok": parse_all(found)}
            elif kind_ == "json" and doc[0]:
                ok, value = resolve(doc[1], name)
                if ok:
                    if isinstance(value, str) and not isinstance(value, bool):
                        # Numbers were parsed as their text (parse_int/parse_float=str): a JSON
                        # string and a number both arrive as str; tell them apart by the source.
                        return {"ok": parse_key(value.encode())}
                    raise KeyError_("key_not_text")
            elif kind_ == "form" and is_form:
                found = []
                for piece in body.split(b"&"):
                    n, _, v = piece.partition(b"=")
                    if form_decode(n) == name.encode():
                        found.append(form_decode(v))
                if found:
                    return {"ok": parse_all(found)}
    except KeyError_ as e:
        return {"error": e.code}
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
