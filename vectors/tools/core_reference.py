#!/usr/bin/env python3
"""Independent reference for idemgate's hash-based vector groups (storage_key, fingerprint, record).

Written from the formats documented in the crate docs, in plain Python with hashlib, so that the
expected values in vectors/*.json are not copies of the Rust implementation's output.

    python3 vectors/tools/core_reference.py --check   # exit 1 on any mismatch
    python3 vectors/tools/core_reference.py --write   # fill `expect` of these groups from this reference
"""
import hashlib
import os
import re
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import json_reference  # noqa: E402  (the JSON canonical digest reference)
import form_reference  # noqa: E402  (the form canonical digest reference)
from vector_file import reconcile  # noqa: E402  (check or write a vector file)

TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")


def auto_mode(headers):
    """The mode `auto` picks: from exactly one content-type field's essence (before ';', trimmed,
    case-insensitive): application/json or a +json suffix -> json, the form type -> form, else raw;
    raw whenever a content-encoding other than identity is present."""
    values = [v.encode() for (n, v) in headers if n.lower() == "content-type"]
    encodings = [v.strip(" \t").lower() for (n, v) in headers if n.lower() == "content-encoding"]
    if len(values) != 1 or any(e != "identity" for e in encodings):
        return "raw"
    essence = values[0].split(b";")[0].strip(b" \t").lower()
    kind, slash, subtype = essence.partition(b"/")
    if not slash or not TOKEN.match(kind) or not TOKEN.match(subtype):
        return "raw"
    if essence == b"application/json" or (subtype.endswith(b"+json") and len(subtype) > 5):
        return "json"
    if essence == b"application/x-www-form-urlencoded":
        return "form"
    return "raw"


def parts_hash(tag, parts):
    """SHA-256 over length-prefixed parts: u64be(len) || bytes, the tag being the first part."""
    h = hashlib.sha256()
    for p in [tag.encode()] + list(parts):
        h.update(struct.pack(">Q", len(p)))
        h.update(p)
    return h.digest()


def unquote_key(raw):
    raw = raw.strip(" \t")
    if raw.startswith('"'):
        assert raw.endswith('"')
        return raw[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return raw


def storage_key(inp):
    value = inp["scope_value"].encode() if "scope_value" in inp else bytes.fromhex(inp["scope_value_hex"])
    # `key_scope: "client"` (a key that is the client's across routes): method and route are empty.
    client = inp.get("key_scope") == "client"
    method, route = ("", "") if client else (inp["method"], inp["route"])
    parts = [inp["scope_source"].encode(), value, method.encode(), route.encode(),
             unquote_key(inp["key"]).encode()]
    key = bytearray(parts_hash("idemgate-storage-key-v2", parts))
    # Bytes 4..8: the quota tag, 3 bytes of the scope's hash and its class (1 = peer).
    scope = parts_hash("idemgate-scope-v1", parts[:2])
    key[4:8] = scope[:3] + bytes([1 if inp["scope_source"] == "peer" else 0])
    return bytes(key).hex()


def body_of(inp):
    if "body" in inp:
        return inp["body"].encode()
    if "body_hex" in inp:
        return bytes.fromhex(inp["body_hex"])
    return b""


def if_match_parts(inp):
    """On a route with a `precondition` (the first route whose prefix and methods match), the
    request's If-Match fields, after the headers and before the body digest."""
    routes = (inp.get("policy") or {}).get("routes") or []
    for route in routes:
        methods = route.get("methods", ["POST", "PATCH"])
        if inp["path"].startswith(route["prefix"]) and inp["method"] in methods:
            if "precondition" not in route:
                return []
            values = [v.encode() for (n, v) in inp.get("headers", []) if n.lower() == "if-match"]
            return [b"precondition:if-match", struct.pack(">Q", len(values))] + values
    return []


def fingerprint(inp):
    fp = (inp.get("policy") or {}).get("fingerprint") or {}
    mode = fp.get("mode", "auto")
    if mode == "auto":
        mode = auto_mode(inp.get("headers", []))
    wanted = [h.lower() for h in fp.get("headers", ["content-type"])]
    parts = [mode.encode()]
    headers = inp.get("headers", [])
    if mode == "none":
        return parts_hash("idemgate-fingerprint-v3", parts + if_match_parts(inp)).hex()
    parts += [inp["method"].encode(), inp["path"].encode()]
    for name in wanted:
        values = [v.encode() for (n, v) in headers if n.lower() == name]
        parts += [name.encode(), struct.pack(">Q", len(values))] + values
    parts += if_match_parts(inp)
    body = body_of(inp)
    if mode == "raw":
        digest = hashlib.sha256(body).digest()
    elif mode == "form":
        kind, value = form_reference.evaluate(body)
        if kind == "error":
            return {"error": value}
        digest = bytes.fromhex(value)
    else:
        fields = fp.get("fields") if mode == "fields" else None
        kind, value = json_reference.evaluate(body, fields=fields, max_depth=fp.get("max_depth", 64))
        if kind == "error":
            return {"error": value}
        digest = bytes.fromhex(value)
    parts.append(digest)
    return parts_hash("idemgate-fingerprint-v3", parts).hex()


def expected(group, inp):
    if group == "storage_key":
        return {"ok": storage_key(inp)}
    if group == "fingerprint":
        r = fingerprint(inp)
        return r if isinstance(r, dict) else {"ok": r}
    raise KeyError(group)


GROUPS = ["storage_key", "fingerprint"]


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "--check"
    vectors = os.path.join(HERE, "..")
    bad = 0
    for group in GROUPS:
        path = os.path.join(vectors, group + ".json")
        bad += reconcile(mode, group, path, lambda inp, group=group: expected(group, inp))
    if bad:
        sys.exit(1)
    print("reference agrees with every case" if mode == "--check" else "written")


if __name__ == "__main__":
    main()
