#!/usr/bin/env python3
"""Extracts seed inputs for the fuzz targets from the conformance vectors.

Writes corpus/<target>/vec-<group>-<nnn> in each target's input framing (documented at the top of
fuzz_targets/<target>.rs). Old vec-* seeds are replaced, so seeds follow the vectors; everything
libFuzzer adds to corpus/ is local (see .gitignore), except the committed regression-* inputs.
The `decision` target reads vectors/decision.json and vectors/completion.json itself (its input is
structured by the `arbitrary` crate), so it gets no files here.

Usage: seeds.py [vectors-dir]   (default: ../../../vectors relative to this file)
"""
import json
import pathlib
import struct
import sys

HERE = pathlib.Path(__file__).resolve().parent
VECTORS = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parents[2] / "vectors"
CORPUS = HERE / "corpus"


def cases(group):
    with open(VECTORS / f"{group}.json", encoding="utf-8") as f:
        return json.load(f)["cases"]


def body_of(inp):
    if "body_hex" in inp:
        return bytes.fromhex(inp["body_hex"])
    return inp.get("body", "").encode()


def splits(body, chunks):
    """The split spec: count byte, then cut points as fractions of the body length."""
    cuts = [c for c in (chunks or []) if 0 <= c <= len(body)][:7]
    fractions = [min(255, c * 256 // len(body)) if body else 0 for c in cuts]
    return bytes([len(fractions)] + fractions)


def key_seeds():
    for c in cases("key"):
        inp = c["input"]
        values = [bytes.fromhex(v) for v in inp["values_hex"]] if "values_hex" in inp else [v.encode() for v in inp["values"]]
        yield b"\n".join(values)


def json_seeds():
    for c in cases("json"):
        inp = c["input"]
        body = body_of(inp)
        opts, extra = 0, b""
        if "max_depth" in inp or "max_number_len" in inp:
            opts |= 0x40
            extra += bytes([min(255, inp.get("max_depth", 64)), min(255, inp.get("max_number_len", 64))])
        if "fields" in inp:
            opts |= 0x80
            extra += b"\x1f".join(p.encode() for p in inp["fields"]) + b"\x00"
        yield bytes([opts]) + splits(body, inp.get("chunks")) + extra + body


def form_seeds():
    for c in cases("form"):
        inp = c["input"]
        body = body_of(inp)
        yield splits(body, inp.get("chunks")) + body


def fingerprint_seeds():
    modes = {"raw": 0, "json": 1, "fields": 2, "none": 3, "auto": 4, "form": 5}
    for c in cases("fingerprint"):
        inp = c["input"]
        body = body_of(inp)
        mode = modes[((inp.get("policy") or {}).get("fingerprint") or {}).get("mode", "auto")]
        headers = b"\x1f".join(f"{n}:{v}".encode() for n, v in inp.get("headers", []))
        head = b"\n".join([inp.get("method", "POST").encode(), inp.get("path", "/").encode(), headers])
        yield bytes([mode]) + splits(body, inp.get("chunks")) + head + b"\n" + body


def record_seeds():
    for c in cases("record"):
        yield bytes.fromhex(c["input"]["bytes_hex"])


def config_seeds():
    for c in cases("config"):
        config = c["input"]["config"]
        yield (config if isinstance(config, str) else json.dumps(config)).encode()


def token_seeds():
    for c in cases("token"):
        inp = c["input"]
        if inp["op"] == "verify":
            yield b"\x00" + inp["token"].encode()
        else:
            # Round-trip mode: the bytes only steer `arbitrary`; these start from the vector's values.
            nonce = bytes.fromhex(inp["nonce_hex"])
            yield b"\x01" + struct.pack("<QQ", inp["now"], 600_000) + nonce + bytes(48)


def admission_seeds():
    # The key_source vectors of the routes the `admission` target knows (byte 0: sns, 1: pubsub-push).
    routes = {"sns": 0, "pubsub-push": 1}
    for c in cases("key_source"):
        inp = c["input"]
        route = routes.get(inp["route"].get("preset"))
        if route is not None and set(inp["route"]) <= {"prefix", "preset"}:
            body = body_of(inp)
            yield bytes([route]) + splits(body, inp.get("chunks")) + body


SEEDS = {
    "key": key_seeds,
    "admission": admission_seeds,
    "json": json_seeds,
    "form": form_seeds,
    "fingerprint": fingerprint_seeds,
    "record": record_seeds,
    "config": config_seeds,
    # The document reader reads configurations (and vectors): the config vectors are its seeds.
    "document": config_seeds,
    "token": token_seeds,
    "decision": lambda: iter(()),
    "remote": lambda: iter(()),
}


def main():
    for target, make in SEEDS.items():
        out = CORPUS / target
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("vec-*"):
            old.unlink()
        n = 0
        for n, data in enumerate(make(), start=1):
            (out / f"vec-{target}-{n:03d}").write_bytes(data)
        print(f"seeds: {target}: {n} from vectors", file=sys.stderr)


if __name__ == "__main__":
    main()
