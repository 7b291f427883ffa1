#!/usr/bin/env bash
# Tests of the browser module (run by `make test-web` after `make build-web`):
#   1. wasm-bindgen tests of the Rust exports, in Node and in headless Chromium (chromedriver);
#   2. the JS tests (node --test): the shared vectors through the package API, the JS layer in
#      Node, behaviour in Chromium against a local test server, and `npm pack` → plain HTML page.
# Every step is bounded by a timeout; the tests stop every process and server they start.
set -euo pipefail
web="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="$(cd "$web/../.." && pwd)"
cargo="${CARGO:-cargo}"

[[ -f "$web/pkg/package.json" ]] || { echo "test-web: $web/pkg missing; run 'make build-web'" >&2; exit 1; }

export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
export CHROMEDRIVER="${CHROMEDRIVER:-$(command -v chromedriver)}"
export WASM_BINDGEN_TEST_TIMEOUT="${WASM_BINDGEN_TEST_TIMEOUT:-60}"
echo "== wasm-bindgen tests (Node, then headless Chromium)"
(cd "$root" && timeout 900 "$cargo" test -p idemgate-web --target wasm32-unknown-unknown --test node --test browser)

echo "== JS tests (node --test)"
cd "$web"
timeout 300 node --test --test-timeout=120000 --test-reporter=spec tests/js/*.test.mjs
