#!/usr/bin/env python3
"""Where the filter .wasm's bytes go: a breakdown of its code by crate and module.

Builds the filter as `make build-filter` does, but with the name section kept (IDEMGATE_KEEP_NAMES=1,
crates/envoy/build.rs) into its own target dir, runs the same `wasm-opt -O3` with `-g` (names kept
through the optimiser), and adds up each function's body size (wasm-objdump, from wabt) by the crate
and module its demangled name (c++filt, binutils) belongs to. A generic function instantiated for an
idemgate type or closure (`core::ptr::drop_in_place::<idemgate_json::document::Value>`, an iterator
adapter over a closure of `idemgate_core::config::read`) counts for the last idemgate module its
name mentions: the build uses v0 symbol mangling (`-C symbol-mangling-version=v0`, names only: the
code is the same), whose names carry the generic arguments the legacy scheme leaves out. Sections (code, data, the rest) are given for the same build without names (the shipped
file's layout).

Usage: size.py [--features FEATURES] [--top N] [--functions N]      (`make size`; needs wabt: `apt-get install wabt`)
"""
import argparse
import collections
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
WASM_OPT = ROOT / "crates/web/node_modules/.bin/wasm-opt"
# Same features as crates/envoy/scripts/optimize.sh.
WASM_OPT_FLAGS = ["-O3", "--low-memory-unused", "--enable-bulk-memory", "--enable-sign-ext", "--enable-mutable-globals",
                  "--enable-nontrapping-float-to-int", "--enable-multivalue", "--enable-reference-types"]

CORE_GROUPS = {"request", "client", "store", "decision", "order", "browser"}
STD = {"core": "Rust core", "alloc": "Rust alloc", "std": "Rust std"}
NAMED = {
    "dlmalloc": "allocator (dlmalloc)",
    "sha2": "SHA-256 (sha2, digest, hmac)", "digest": "SHA-256 (sha2, digest, hmac)",
    "hmac": "SHA-256 (sha2, digest, hmac)", "block_buffer": "SHA-256 (sha2, digest, hmac)",
    "hashbrown": "hash maps (hashbrown)", "getrandom": "entropy (getrandom, wasi)", "wasi": "entropy (getrandom, wasi)",
    "compiler_builtins": "compiler_builtins",
}


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout


def build(features):
    target_dir = TARGET / "size-names"
    cmd = [os.environ.get("CARGO", "cargo"), "build", "-p", "idemgate-envoy", "--release",
           "--target", "wasm32-wasip1", "--target-dir", str(target_dir)]
    if features:
        cmd += ["--features", features]
    flags = (os.environ.get("RUSTFLAGS", "") + " -C symbol-mangling-version=v0").strip()
    subprocess.run(cmd, check=True, cwd=ROOT, env={**os.environ, "IDEMGATE_KEEP_NAMES": "1", "RUSTFLAGS": flags})
    raw = target_dir / "wasm32-wasip1/release/idemgate_envoy.wasm"
    named = raw.with_suffix(".named-opt.wasm")
    run([str(WASM_OPT), *WASM_OPT_FLAGS, "-g", str(raw), "-o", str(named)])
    # The sections: the shipped build exactly (no names, default mangling), in its own target dir
    # so that `make build-filter`'s optimised file in target/ is never optimised twice.
    plain_dir = TARGET / "size-plain"
    cmd = [*cmd[:cmd.index("--target-dir") + 1], str(plain_dir), *cmd[cmd.index("--target-dir") + 2:]]
    subprocess.run(cmd, check=True, cwd=ROOT)
    plain = plain_dir / "wasm32-wasip1/release/idemgate_envoy.wasm"
    stripped = plain.with_suffix(".opt.wasm")
    run([str(WASM_OPT), *WASM_OPT_FLAGS, str(plain), "-o", str(stripped)])
    return named, stripped


def functions(wasm):
    """(size, mangled name) of every function body."""
    out = run(["wasm-objdump", "-x", "-j", "Code", str(wasm)])
    return [(int(m.group(1)), m.group(2)) for m in re.finditer(r"- func\[\d+\] size=(\d+) <(.*)>", out)]


def demangle(names):
    out = run(["c++filt", "-s", "rust"], input="\n".join(names) + "\n")
    return [re.sub(r"\[[0-9a-f]+\]", "", line) for line in out.splitlines()]


def group(name):
    found = re.findall(r"idemgate_(core|json|envoy)::(\w+)(?:::([a-z_][a-z0-9_]*)(?=::))?", name)
    if found:
        crate, module, inner = found[-1]
        # The core's modules grouped by concept (`request::json`, `store::remote`) count by module.
        if crate == "core" and module in CORE_GROUPS and inner:
            module = f"{module}::{inner}"
        return f"{'filter' if crate == 'envoy' else crate}: {module}"
    if name.startswith(("proxy_on_", "idemgate_conformance", "_initialize", "_start")):
        return "filter: exports (with what was inlined into them)"
    if name.startswith("__rustc::"):
        return "Rust std: allocator shims"
    prim = re.match(r"<&?(str|char|\[|[iu](8|16|32|64|128|size)>)", name)
    if prim:
        return "Rust core: " + {"str": "str", "char": "char", "[": "slice"}.get(prim.group(1), "num")
    m = re.search(r"\b([a-z_][a-z0-9_]*)::", name)
    if not m:
        return "C functions (memcpy, memcmp …)"
    crate = m.group(1)
    if crate in STD:
        sub = re.search(crate + r"::(\w+)", name)
        return f"{STD[crate]}: {sub.group(1) if sub else '?'}"
    return NAMED.get(crate, crate)


def sections(wasm):
    out = run(["wasm-objdump", "-h", str(wasm)])
    sizes = {m.group(1): int(m.group(2), 16) for m in re.finditer(r"^\s*(\w+) start=\S+ end=\S+ \(size=(0x[0-9a-f]+)\)", out, re.M)}
    return sizes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--features", default="")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--functions", type=int, default=20, help="list this many of the biggest functions")
    args = ap.parse_args()
    named, stripped = build(args.features)
    total = stripped.stat().st_size
    secs = sections(stripped)
    code, data = secs.get("Code", 0), secs.get("Data", 0)
    print(f"filter .wasm after wasm-opt -O3{' (features: ' + args.features + ')' if args.features else ''}: "
          f"{total} B = code {code} B + data {data} B + other sections {total - code - data} B\n")
    funcs = functions(named)
    by_group = collections.Counter()
    count = collections.Counter()
    by_crate = collections.Counter()
    named_funcs = list(zip([size for size, _ in funcs], demangle([n for _, n in funcs])))
    for size, name in named_funcs:
        g = group(name)
        by_group[g] += size
        count[g] += 1
        by_crate[g.split(":")[0]] += size
    body = sum(by_group.values())
    print("| crate | function bytes | share of code |\n|---|---|---|")
    for crate, size in by_crate.most_common():
        print(f"| {crate} | {size} | {100 * size / body:.1f} % |")
    print(f"\n| module (top {args.top}) | functions | bytes | share of code |\n|---|---|---|---|")
    for g, size in by_group.most_common(args.top):
        print(f"| {g} | {count[g]} | {size} | {100 * size / body:.1f} % |")
    print(f"\n| function (the {args.functions} biggest, with what wasm-opt inlined into them) | bytes | counted for |\n|---|---|---|")
    for size, name in sorted(named_funcs, key=lambda f: -f[0])[:args.functions]:
        shown = re.sub(r"::\{closure#\d+\}", "::{closure}", name)
        shown = shown if len(shown) <= 140 else shown[:137] + "..."
        print(f"| `{shown.replace('|', '/')}` | {size} | {group(name)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
