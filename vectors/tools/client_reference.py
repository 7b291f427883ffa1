#!/usr/bin/env python3
"""Independent reference for the `client` vector group (vectors/client.json): the browser client's
rules, written from `docs/semantics.md` §9 and the behaviour table (docs/guide/concepts.md), not from the Rust.

- classify: 2xx success, 3xx redirect, 409 in_flight, 429 rate_limited, 502-504 unavailable,
  422 key_reused, other 4xx client_error, other 5xx server_error, anything else invalid.
- settle: success/redirect -> succeed; a retried class (in_flight, rate_limited, unavailable:
  the retry policy's) -> fail_retryable (the key is kept); anything else -> fail_final.
- replayed: `true` (any case) or the structured-field boolean `?1`, spaces/tabs trimmed.
- reuses_key: only with a held fingerprint equal to the new payload's (both known), and the same
  If-Match (or none on both).
- token_target: endpoint + (`&` if it has a query else `?`) + method=..&path=.., both
  percent-encoded except RFC 3986 unreserved characters (Python's quote with safe=''); the method
  as `fetch` sends it (DELETE, GET, HEAD, OPTIONS, POST, PUT upper-cased case-insensitively, any
  other as written), the path without its query (from the first `?` or `#`: a token binds none).
- token_fresh: a token is usable strictly before its expiry (`now < expires_at`), as the edge
  refuses it from `expires_at` on (`docs/semantics.md` §7).

    python3 vectors/tools/client_reference.py --check   # exit 1 on any mismatch
    python3 vectors/tools/client_reference.py --write   # fill `expect` from this reference
"""
import os
import sys
from urllib.parse import quote

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from vector_file import reconcile  # noqa: E402  (check or write a vector file)

RETRIED = {"in_flight", "rate_limited", "unavailable"}


def status_class(status):
    if 200 <= status <= 299:
        return "success"
    if 300 <= status <= 399:
        return "redirect"
    named = {409: "in_flight", 429: "rate_limited", 502: "unavailable", 503: "unavailable",
             504: "unavailable", 422: "key_reused"}
    if status in named:
        return named[status]
    if 400 <= status <= 499:
        return "client_error"
    if 500 <= status <= 599:
        return "server_error"
    return "invalid"


def answer(inp):
    op = inp["op"]
    if op == "classify":
        return status_class(inp["status"])
    if op == "settle":
        c = status_class(inp["status"])
        if c in ("success", "redirect"):
            return {"event": "succeed", "keeps_key": False}
        if c in RETRIED:
            return {"event": "fail_retryable", "keeps_key": True}
        return {"event": "fail_final", "keeps_key": False}
    if op == "replayed":
        v = inp.get("value")
        if v is None:
            return False
        v = v.strip(" \t")
        return v.lower() == "true" or v == "?1"
    if op == "reuses_key":
        held, payload = inp.get("held"), inp.get("payload")
        same_version = inp.get("held_if_match") == inp.get("if_match")
        return held is not None and payload is not None and held == payload and same_version
    if op == "token_target":
        endpoint = inp["endpoint"]
        sep = "&" if "?" in endpoint else "?"
        method = inp["method"]
        if method.upper() in {"DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT"}:
            method = method.upper()
        path = inp["path"].split("?")[0].split("#")[0]
        return f"{endpoint}{sep}method={quote(method, safe='')}&path={quote(path, safe='')}"
    if op == "token_fresh":
        return inp["now"] < inp["expires_at"]
    raise KeyError(op)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "--check"
    path = os.path.join(HERE, "..", "client.json")
    if reconcile(mode, "client", path, lambda inp: {"ok": answer(inp)}):
        sys.exit(1)
    print("reference agrees with every case" if mode == "--check" else "written")


if __name__ == "__main__":
    main()
