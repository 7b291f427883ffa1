#!/usr/bin/env bash
# Builds crates/web/pkg, the npm package `idemgate`:
#   cargo (wasm32-unknown-unknown, profile release-web) → wasm-bindgen --target web (the glue
#   minified by terser) → wasm-opt (npm binaryen@132) → the hand-written ES modules, TypeScript
#   declarations, README and package.json.
# Uses $CARGO_TARGET_DIR when set, else the workspace's target/. Run `make setup-web` first.
set -euo pipefail
web="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="$(cd "$web/../.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
cargo="${CARGO:-cargo}"
wasm_opt="$web/node_modules/.bin/wasm-opt"
out="$web/pkg"

[[ -x "$wasm_opt" ]] || { echo "build-web: $wasm_opt missing; run 'make setup-web'" >&2; exit 1; }

# `cargo rustc --crate-type cdylib`: built together with the rlib (Cargo.toml lists both, for the
# tests), the cdylib comes out 13 KB larger.
# Profile `release-web` (Cargo.toml): release at opt-level "z", in its own target directory.
(cd "$root" && "$cargo" rustc -p idemgate-web --profile release-web --target wasm32-unknown-unknown --crate-type cdylib --features standalone)

rm -rf "$out"
mkdir -p "$out"
wasm-bindgen --target web --no-typescript --out-dir "$out" --out-name idemgate_web \
  "$target_dir/wasm32-unknown-unknown/release-web/idemgate_web.wasm"
node "$web/scripts/minify-glue.mjs" "$out/idemgate_web.js"
# Features come from the module's target_features section, read when wasm-opt loads the module;
# the shipped file needs neither it nor the `producers` section (toolchain names), so both are
# stripped after the optimizing passes (−97 B gzipped). `--low-memory-unused` lets wasm-opt fold a
# constant added to a pointer into the load's or store's offset (−212 B gzipped): the two differ
# only when the sum wraps past 4 GiB into the lowest 1 KiB, which no valid pointer of this module
# does (its memory is far below 4 GiB). Not `--traps-never-happen`: a bug should still trap.
# `--reorder-functions` numbers the most-called functions first (one-byte call indices: −153 B).
"$wasm_opt" -Oz --converge --low-memory-unused --reorder-functions \
  --strip-producers --strip-target-features \
  "$out/idemgate_web_bg.wasm" -o "$out/idemgate_web_bg.wasm"
cp "$web"/js/*.js "$web"/js/*.d.ts "$out"/
node "$web/scripts/assemble.mjs" "$root" "$out"
node "$web/scripts/size.mjs" "$out"
