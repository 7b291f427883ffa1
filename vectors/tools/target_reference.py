#!/usr/bin/env python3
"""Independent reference for the `target` vector group (vectors/target.json): what the edge does
with a request a browser app sends with `fetch(path, {method})`, written from the documented rules,
not from the Rust.

- The method on the wire (Fetch, "normalize a method"): DELETE, GET, HEAD, OPTIONS, POST and PUT,
  matched case-insensitively, are upper-cased; any other method is sent as written.
- The path a route sees (README "Behaviour", one spelling per path): percent-escapes of unreserved
  characters, `/` and `\\` decoded, other escapes kept with upper-case hex, a `%` that starts no
  escape written `%25`; `\\` read as `/`; `;params` cut from every segment; empty and `.` segments
  dropped; `..` resolved, never above the root; a trailing slash kept; lower-cased unless the route
  is case-sensitive. The route is the first whose methods include the method exactly and whose
  prefix (spelled the same way) starts the path; none -> null (the edge forwards it untouched).
- The fingerprint hashes the method on the wire and that path with the query as sent (from the
  first `?` or `#`), over the configured headers and body (core_reference.fingerprint).

    python3 vectors/tools/target_reference.py --check   # exit 1 on any mismatch
    python3 vectors/tools/target_reference.py --write   # fill `expect` from this reference
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import core_reference  # noqa: E402  (the fingerprint preimage)
from vector_file import reconcile  # noqa: E402  (check or write a vector file)

FETCH_UPPER = {"DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT"}
UNRESERVED = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
HEX = set("0123456789abcdefABCDEF")


def sent_method(method):
    return method.upper() if method.upper() in FETCH_UPPER else method


def decode(path):
    out, i = [], 0
    while i < len(path):
        c = path[i]
        if c == "%" and len(path) >= i + 3 and path[i + 1] in HEX and path[i + 2] in HEX:
            byte = int(path[i + 1:i + 3], 16)
            ch = chr(byte)
            if ch in UNRESERVED or ch == "/":
                out.append(ch)
            elif ch == "\\":
                out.append("/")
            else:
                out.append("%" + format(byte, "02X"))
            i += 3
        elif c == "%":
            out.append("%25")
            i += 1
        elif c == "\\":
            out.append("/")
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def normalize(path):
    decoded = decode(path)
    segments = []
    for segment in decoded.split("/"):
        segment = segment.split(";")[0]
        if segment in ("", "."):
            continue
        if segment == "..":
            if segments:
                segments.pop()
            continue
        segments.append(segment)
    out = "".join("/" + s for s in segments)
    if not out or (len(decoded) > 1 and decoded.endswith("/")):
        out += "/"
    return out


def split_query(target):
    cut = min([i for i in (target.find("?"), target.find("#")) if i >= 0], default=len(target))
    return target[:cut], target[cut:]


def answer(inp):
    config = inp.get("policy") or {}
    routes = config.get("routes", [{"prefix": "/"}])
    method = sent_method(inp["method"])
    raw_path, query = split_query(inp["path"])
    normalized = normalize(raw_path)
    for route in routes:
        sensitive = route.get("case_sensitive", False)
        prefix = normalize(route["prefix"])
        path = normalized if sensitive else normalized.lower()
        if not sensitive:
            prefix = prefix.lower()
        if method in route.get("methods", ["POST", "PATCH"]) and path.startswith(prefix):
            fp = core_reference.fingerprint(dict(inp, method=method, path=path + query))
            return {"method": method, "path": path + query, "fingerprint": fp}
    return None


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "--check"
    path = os.path.join(HERE, "..", "target.json")
    if reconcile(mode, "target", path, lambda inp: {"ok": answer(inp)}):
        sys.exit(1)
    print("reference agrees with every case" if mode == "--check" else "written")


if __name__ == "__main__":
    main()
