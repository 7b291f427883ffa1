#!/usr/bin/env bash
# Optimises the filter .wasm in place with binaryen's wasm-opt -O3 (npm binaryen, pinned in
# crates/web/package.json): about 14 % smaller than cargo's output. Not -Oz: only 2 % smaller
# still, but in alternating runs in Envoy it was 6-18 % slower than cargo's output on json keyed
# POSTs, and -O3 was 9-12 % faster than -Oz (BENCHMARKS.md). Cargo puts its own output back on
# every build, so the optimised file is cached next to it with the hash of the cargo output it
# came from (and of this script): wasm-opt runs only when cargo produced new code or the flags
# changed.
# Usage: optimize.sh <filter.wasm>
set -euo pipefail
wasm="$1"
root="$(cd "$(dirname "$0")/../../.." && pwd)"
wasm_opt="$root/crates/web/node_modules/.bin/wasm-opt"
cache="$wasm.opt"
source_hash="$cache.source"
current="$(sha256sum <"$wasm")"
# The cache is also keyed by this script, so a change of its flags optimises again.
script="$(sha256sum <"$0")"
if [[ -f "$cache" && -f "$source_hash" ]]; then
  if [[ "$current" == "$(sha256sum <"$cache")" ]]; then
    exit 0 # already the optimised file
  fi
  if [[ "$current $script" == "$(cat "$source_hash")" ]]; then
    cp "$cache" "$wasm.tmp" && mv "$wasm.tmp" "$wasm"
    exit 0
  fi
fi
before=$(stat -c %s "$wasm")
# The link step strips custom sections (build.rs), target_features included, so the features the
# module uses (rustc's wasm32 defaults) are named here. --low-memory-unused lets wasm-opt fold a
# pointer's constant offset into the load/store (1.8 KB smaller, 0.6 % fewer operators per request:
# make bench-work). The fold differs only where pointer + offset would wrap past 4 GiB into the
# first KiB, which no Rust pointer does; that KiB is the bottom of the 1 MiB stack rustc places
# first (the stack pointer starts at 1 MiB), reached only by a stack overflow.
"$wasm_opt" -O3 --low-memory-unused --enable-bulk-memory --enable-sign-ext --enable-mutable-globals \
  --enable-nontrapping-float-to-int --enable-multivalue --enable-reference-types \
  "$wasm" -o "$cache"
echo "$current $script" >"$source_hash"
cp "$cache" "$wasm.tmp" && mv "$wasm.tmp" "$wasm"
echo "wasm-opt -O3: $wasm $before -> $(stat -c %s "$wasm") bytes"
