#!/usr/bin/env python3
"""Independent reference for vectors/form.json (canonical application/x-www-form-urlencoded digests).

Written from the spec in crates/core/src/request/form.rs, not from the Rust code: the Rust side is a
chunk-fed state machine that encodes pairs as it goes; this one splits the whole body, decodes each
piece, sorts with Python's stable sort and encodes at the end. Stdlib only.

Spec: split the body at b"&", skip empty pieces; split a piece at its first b"=" into name and value
(no "=" = no value, distinct from an empty value); in both, b"+" is a space and b"%" must be
followed by two hex digits (either case), else form_invalid_escape (the first such "%" in the body
decides). Sort pairs by decoded name bytewise, keeping body order among equal names.
Digest = sha256(concat of E(pair)), E(pair) = esc(name) + (b"\\x00" if no value else b"\\x01" +
esc(value)), esc(x) = x with 00 -> 00 01, then 00 00.

Usage:
  form_reference.py --check vectors/form.json   # exit 1 if any expect differs from the reference
  form_reference.py --write vectors/form.json   # (re)compute every expect from the inputs
  form_reference.py --body 'a=1&b=2'            # print one result
"""

import argparse
import hashlib
import json
import sys

HEXDIGITS = b"0123456789abcdefABCDEF"


class FormError(Exception):
    def __init__(self, code, offset):
        super().__init__(f"{code} at {offset}")
        self.code = code
        self.offset = offset


def decode(piece, offset):
    """Decodes one name or value; `offset` is the body offset of piece[0]."""
    out = bytearray()
    i = 0
    while i < len(piece):
        c = piece[i]
        if c == ord("%"):
            hex2 = piece[i + 1:i + 3]
            if len(hex2) != 2 or any(h not in HEXDIGITS for h in hex2):
                raise FormError("form_invalid_escape", offset + i)
            out.append(int(hex2.decode("ascii"), 16))
            i += 3
        elif c == ord("+"):
            out.append(0x20)
            i += 1
        else:
            out.append(c)
            i += 1
    return bytes(out)


def pairs_of(body):
    pairs = []
    offset = 0
    for piece in body.split(b"&"):
        if piece:
            if b"=" in piece:
                eq = piece.index(b"=")
                name = decode(piece[:eq], offset)
                value = decode(piece[eq + 1:], offset + eq + 1)
            else:
                name, value = decode(piece, offset), None
            pairs.append((name, value))
        offset += len(piece) + 1
    return pairs


def esc(x):
    return x.replace(b"\x00", b"\x00\x01") + b"\x00\x00"


def digest(body):
    """Returns the 32-byte digest, or raises FormError."""
    pairs = sorted(pairs_of(body), key=lambda p: p[0])  # stable: equal names keep body order
    h = hashlib.sha256()
    for name, value in pairs:
        h.update(esc(name) + (b"\x00" if value is None else b"\x01" + esc(value)))
    return h.digest()


def evaluate(body):
    """Returns ("ok", hex digest) or ("error", code)."""
    try:
        return ("ok", digest(body).hex())
    except FormError as err:
        return ("error", err.code)


def case_body(inp):
    if "body_hex" in inp:
        return bytes.fromhex(inp["body_hex"])
    return inp["body"].encode("utf-8")


def dump(doc):
    """One case per line, so diffs of the vector file stay readable."""
    head = {k: v for k, v in doc.items() if k != "cases"}
    lines = ["{"]
    for key, value in head.items():
        lines.append(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)},")
    lines.append('  "cases": [')
    rows = [json.dumps(c, ensure_ascii=False, separators=(", ", ": ")) for c in doc["cases"]]
    lines.append(",\n".join("    " + row for row in rows))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", metavar="FILE")
    mode.add_argument("--write", metavar="FILE")
    mode.add_argument("--body")
    args = ap.parse_args()

    if args.body is not None:
        print(*evaluate(args.body.encode("utf-8")))
        return 0

    path = args.check or args.write
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    names = [c["name"] for c in doc["cases"]]
    if len(names) != len(set(names)):
        print("duplicate case names", file=sys.stderr)
        return 1
    failures = 0
    for case in doc["cases"]:
        kind, value = evaluate(case_body(case["input"]))
        expect = {kind: value}
        if args.write:
            case["expect"] = expect
        elif case.get("expect") != expect:
            failures += 1
            print(f"MISMATCH {case['name']}: file {case.get('expect')} reference {expect}", file=sys.stderr)
    if args.write:
        with open(path, "w", encoding="utf-8") as f:
            f.write(dump(doc))
        print(f"wrote {len(doc['cases'])} cases to {path}")
        return 0
    print(f"{len(doc['cases']) - failures}/{len(doc['cases'])} cases match the reference")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
