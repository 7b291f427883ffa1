#!/usr/bin/env python3
"""Independent reference for vectors/json.json (canonical JSON and fields-mode digests).

Written from the spec, not from the Rust code: a strict recursive-descent parser over bytes (the
Rust side is a chunk-fed state machine), so the two only agree if both follow the spec. Stdlib only;
json.loads is used only to read the vector file, never to parse a body.

Usage:
  json_reference.py --check vectors/json.json   # exit 1 if any expect differs from the reference
  json_reference.py --write vectors/json.json   # (re)compute every expect from the inputs
  json_reference.py --body '{"a":1}' [--fields /a ...]   # print one result

Error precedence (shared with the Rust implementation): the first offending byte decides; a
misplaced byte that can never occur in UTF-8 (80-C1, F5-FF) is json_invalid_utf8; duplicate keys
are reported when their object closes; input ending inside a value is json_unexpected_end except
inside a UTF-8 sequence (json_invalid_utf8); lone/mismatched surrogate escapes are
json_invalid_escape.
"""

import argparse
import hashlib
import json
import re
import struct
import sys

WHITESPACE = b" \t\n\r"
SIMPLE_ESCAPES = {
    ord('"'): b'"', ord("\\"): b"\\", ord("/"): b"/", ord("b"): b"\x08",
    ord("f"): b"\x0c", ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t",
}
HEX = b"0123456789abcdefABCDEF"
DIGITS = b"0123456789"


class JsonError(Exception):
    def __init__(self, code, offset=None):
        super().__init__(f"{code} at {offset}")
        self.code = code
        self.offset = offset


def sha(*parts):
    h = hashlib.sha256()
    for part in parts:
        h.update(part)
    return h.digest()


def parse_pointer(text):
    """RFC 6901: returns the list of unescaped reference tokens."""
    if text == "":
        return []
    if not text.startswith("/"):
        raise JsonError("json_pointer_invalid")
    tokens = []
    for raw in text[1:].split("/"):
        out, i = [], 0
        while i < len(raw):
            if raw[i] == "~":
                nxt = raw[i + 1] if i + 1 < len(raw) else None
                if nxt == "0":
                    out.append("~")
                elif nxt == "1":
                    out.append("/")
                else:
                    raise JsonError("json_pointer_invalid")
                i += 2
            else:
                out.append(raw[i])
                i += 1
        tokens.append("".join(out))
    return tokens


def token_matches(token, step):
    """Array positions match only canonical decimal tokens (no sign, no leading zeros)."""
    if isinstance(step, int):
        canonical = token == "0" or (
            token[:1] in ("1", "2", "3", "4", "5", "6", "7", "8", "9")
            and all(c in "0123456789" for c in token))
        return canonical and int(token) == step
    return token.encode("utf-8") == step


class Parser:
    def __init__(self, body, max_depth, max_number_len, pointers):
        self.b = body
        self.pos = 0
        self.max_depth = max_depth
        self.max_number_len = max_number_len
        self.pointers = pointers  # list of token lists, or None
        self.found = {}

    # -- helpers ---------------------------------------------------------------------------------
    def peek(self):
        if self.pos >= len(self.b):
            raise JsonError("json_unexpected_end")
        return self.b[self.pos]

    def at(self):
        return self.b[self.pos] if self.pos < len(self.b) else None

    def misplaced(self, code):
        byte = self.b[self.pos]
        if byte >= 0x80 and not 0xC2 <= byte <= 0xF4:
            return JsonError("json_invalid_utf8", self.pos)
        return JsonError(code, self.pos)

    def skip_ws(self):
        while self.pos < len(self.b) and self.b[self.pos] in WHITESPACE:
            self.pos += 1

    # -- grammar ---------------------------------------------------------------------------------
    def document(self):
        self.skip_ws()
        encoding = self.value((), 0)
        self.skip_ws()
        if self.pos < len(self.b):
            raise self.misplaced("json_trailing_data")
        return encoding

    # Each grammar method returns the value's canonical encoding E (see crates/json/src/lib.rs).

    def value(self, path, depth):
        c = self.peek()
        if c == ord("{"):
            encoding = self.obj(path, depth)
        elif c == ord("["):
            encoding = self.arr(path, depth)
        elif c == ord('"'):
            encoding = encode_string(self.string())
        elif c == ord("-") or c in DIGITS:
            encoding = self.number()
        elif c in b"tfn":
            encoding = self.literal()
        else:
            raise self.misplaced("json_syntax")
        if self.pointers is not None:
            for idx, tokens in enumerate(self.pointers):
                if len(tokens) == len(path) and all(map(token_matches, tokens, path)):
                    self.found[idx] = sha(encoding)
        return encoding

    def arr(self, path, depth):
        if depth >= self.max_depth:
            raise JsonError("json_too_deep", self.pos)
        self.pos += 1
        parts = [b"a"]
        self.skip_ws()
        if self.peek() == ord("]"):
            self.pos += 1
            return b"a]"
        index = 0
        while True:
            self.skip_ws()
            parts.append(self.value(path + (index,), depth + 1))
            index += 1
            self.skip_ws()
            c = self.peek()
            if c == ord(","):
                self.pos += 1
            elif c == ord("]"):
                self.pos += 1
                return b"".join(parts) + b"]"
            else:
                raise self.misplaced("json_syntax")

    def obj(self, path, depth):
        if depth >= self.max_depth:
            raise JsonError("json_too_deep", self.pos)
        self.pos += 1
        members = []
        self.skip_ws()
        if self.peek() == ord("}"):
            self.pos += 1
            return b"o}"
        while True:
            self.skip_ws()
            if self.peek() != ord('"'):
                raise self.misplaced("json_syntax")
            key = self.string()
            self.skip_ws()
            if self.peek() != ord(":"):
                raise self.misplaced("json_syntax")
            self.pos += 1
            self.skip_ws()
            members.append((key, encode_string(key) + self.value(path + (key,), depth + 1)))
            self.skip_ws()
            c = self.peek()
            if c == ord(","):
                self.pos += 1
            elif c == ord("}"):
                members.sort(key=lambda m: m[0])
                for first, second in zip(members, members[1:]):
                    if first[0] == second[0]:
                        raise JsonError("json_duplicate_key", self.pos)
                self.pos += 1
                return b"o" + b"".join(m for _, m in members) + b"}"
            else:
                raise self.misplaced("json_syntax")

    def literal(self):
        word = {ord("t"): b"true", ord("f"): b"false", ord("n"): b"null"}[self.peek()]
        for expected in word:
            if self.peek() != expected:
                raise self.misplaced("json_syntax")
            self.pos += 1
        return word[:1]

    def number(self):
        start = self.pos

        def take():
            self.pos += 1
            if self.pos - start > self.max_number_len:
                raise JsonError("json_number_too_long", start)

        def digits_required():
            c = self.peek()
            if c not in DIGITS:
                raise self.misplaced("json_syntax")
            while self.at() is not None and self.at() in DIGITS:
                take()

        if self.peek() == ord("-"):
            take()
        c = self.peek()
        if c == ord("0"):
            take()
        elif c in DIGITS:
            digits_required()
        else:
            raise self.misplaced("json_syntax")
        if self.at() == ord("."):
            take()
            digits_required()
        if self.at() is not None and self.at() in b"eE":
            take()
            if self.peek() in b"+-":
                take()
            digits_required()
        return encode_number(self.b[start:self.pos].decode("ascii"), start)

    def hex4(self):
        unit = 0
        for _ in range(4):
            c = self.peek()
            if c not in HEX:
                raise self.misplaced("json_invalid_escape")
            unit = unit * 16 + int(chr(c), 16)
            self.pos += 1
        return unit

    def string(self):
        """Decodes a string starting at its opening quote; returns its UTF-8 bytes."""
        self.pos += 1
        out = bytearray()
        while True:
            c = self.peek()
            if c == ord('"'):
                self.pos += 1
                return bytes(out)
            if c == ord("\\"):
                self.pos += 1
                c = self.peek()
                if c in SIMPLE_ESCAPES:
                    out += SIMPLE_ESCAPES[c]
                    self.pos += 1
                elif c == ord("u"):
                    self.pos += 1
                    unit = self.hex4()
                    if 0xD800 <= unit <= 0xDBFF:
                        for want in (ord("\\"), ord("u")):
                            if self.peek() != want:
                                raise self.misplaced("json_invalid_escape")
                            self.pos += 1
                        low = self.hex4()
                        if not 0xDC00 <= low <= 0xDFFF:
                            raise JsonError("json_invalid_escape", self.pos - 1)
                        unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                    elif 0xDC00 <= unit <= 0xDFFF:
                        raise JsonError("json_invalid_escape", self.pos - 1)
                    out += chr(unit).encode("utf-8")
                else:
                    raise self.misplaced("json_invalid_escape")
            elif c < 0x20:
                raise JsonError("json_control_character", self.pos)
            elif c < 0x80:
                out.append(c)
                self.pos += 1
            else:
                self.utf8_sequence(out)

    def utf8_sequence(self, out):
        """Unicode Table 3-7 (well-formed UTF-8 byte sequences)."""
        lead = self.b[self.pos]
        if 0xC2 <= lead <= 0xDF:
            ranges = [(0x80, 0xBF)]
        elif lead == 0xE0:
            ranges = [(0xA0, 0xBF), (0x80, 0xBF)]
        elif 0xE1 <= lead <= 0xEC or lead in (0xEE, 0xEF):
            ranges = [(0x80, 0xBF)] * 2
        elif lead == 0xED:
            ranges = [(0x80, 0x9F), (0x80, 0xBF)]
        elif lead == 0xF0:
            ranges = [(0x90, 0xBF)] + [(0x80, 0xBF)] * 2
        elif 0xF1 <= lead <= 0xF3:
            ranges = [(0x80, 0xBF)] * 3
        elif lead == 0xF4:
            ranges = [(0x80, 0x8F)] + [(0x80, 0xBF)] * 2
        else:
            raise JsonError("json_invalid_utf8", self.pos)
        out.append(lead)
        self.pos += 1
        for low, high in ranges:
            if self.pos >= len(self.b):
                raise JsonError("json_invalid_utf8", self.pos)  # truncated sequence
            byte = self.b[self.pos]
            if not low <= byte <= high:
                raise JsonError("json_invalid_utf8", self.pos)
            out.append(byte)
            self.pos += 1


MAX_MAGNITUDE = 9999
NUMBER = re.compile(r"(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?")


def encode_number(text, offset):
    """d, the exact decimal value as canonical text, then ';' (crates/json/src/lib.rs): '0' for
    any zero, else an optional '-', the significant digits without leading or trailing zeros, 'e'
    and the exponent E with value = digits * 10**E. Non-zero values whose order of magnitude
    (E + len(digits) - 1) is beyond +-9999 are json_number_out_of_range. The grammar was checked
    by the parser; this works on the whole token with Python's unbounded ints (no float)."""
    m = NUMBER.fullmatch(text)
    sign, integer, fraction, exponent = m.group(1), m.group(2), m.group(3) or "", m.group(4) or "0"
    digits = (integer + fraction).lstrip("0")
    if not digits:
        return b"d0;"
    power = int(exponent) - len(fraction)
    stripped = digits.rstrip("0")
    power += len(digits) - len(stripped)
    if abs(power + len(stripped) - 1) > MAX_MAGNITUDE:
        raise JsonError("json_number_out_of_range", offset)
    return b"d" + f"{sign}{stripped}e{power}".encode("ascii") + b";"


def encode_string(decoded):
    """s, the UTF-8 with 00 escaped as 00 01, then the 00 00 terminator."""
    return b"s" + decoded.replace(b"\x00", b"\x00\x01") + b"\x00\x00"


def evaluate(body, fields=None, max_depth=64, max_number_len=64):
    """Returns ("ok", hex digest) or ("error", code)."""
    try:
        pointers = None if fields is None else [parse_pointer(p) for p in fields]
        if len(body) == 0:
            root = None
            found = {}
        else:
            parser = Parser(body, max_depth, max_number_len, pointers)
            root = parser.document()
            found = parser.found
        if fields is None:
            return ("ok", sha(b"empty" if root is None else root).hex())
        parts = [b"F"]
        for idx, text in enumerate(fields):
            raw = text.encode("utf-8")
            parts.append(struct.pack(">Q", len(raw)) + raw)
            parts.append(b"\x00" if idx not in found else b"\x01" + found[idx])
        return ("ok", sha(*parts).hex())
    except JsonError as err:
        return ("error", err.code)


def case_body(inp):
    if "body_hex" in inp:
        return bytes.fromhex(inp["body_hex"])
    return inp["body"].encode("utf-8")


def case_result(case):
    inp = case["input"]
    return evaluate(case_body(inp), inp.get("fields"), inp.get("max_depth", 64),
                    inp.get("max_number_len", 64))


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
    ap.add_argument("--fields", nargs="*")
    args = ap.parse_args()

    if args.body is not None:
        print(*evaluate(args.body.encode("utf-8"), args.fields))
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
        kind, value = case_result(case)
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
