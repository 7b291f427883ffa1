#!/usr/bin/env bash
# Prints the public API of idemgate-core (default features: what hosts build against), one item per
# line, with what it re-exports of idemgate-json listed whole. rustdoc's JSON output is still
# unstable, so it is asked of the pinned stable toolchain with RUSTC_BOOTSTRAP=1 — in a target
# directory of its own, so that no other build sees the variable and rebuilds. Used by
# `make check-api` (compare with crates/core/public-api.txt) and `make api` (refresh).
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
target="$root/target/public-api"
RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$target" "${CARGO:-cargo}" rustdoc --quiet -p idemgate-core \
    --manifest-path "$root/Cargo.toml" -- -Z unstable-options --output-format json \
    -D rustdoc::broken_intra_doc_links -D rustdoc::private_intra_doc_links
# The crate the core re-exports as `request::json`: its items are listed at the core's paths.
RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$target" "${CARGO:-cargo}" rustdoc --quiet -p idemgate-json \
    --manifest-path "$root/Cargo.toml" -- -Z unstable-options --output-format json \
    -D rustdoc::broken_intra_doc_links -D rustdoc::private_intra_doc_links
python3 "$root/crates/core/scripts/public_api.py" "$target/doc/idemgate_core.json" "$target/doc/idemgate_json.json"
