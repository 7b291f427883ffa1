//! # idemgate-host-tests
//!
//! A wasmtime harness that runs the exact `.wasm` files idemgate ships — the Envoy filter and the
//! browser module — and proves they compute what the native core computes.
//!
//! - [`abi`]: a proxy-wasm ABI 0.2.1 host (and the WASI calls a `wasm32-wasip1` build imports);
//! - [`envoy`]: a scriptable Envoy — workers with their own VM and `Store`, shared data with
//!   Envoy's exact CAS rules, a controllable clock, fault injection;
//! - [`scenario`]: tests that read like stories (workers, requests in chunks, a scripted upstream);
//! - [`explore`]: every interleaving (or a seeded sample) of concurrent requests, with invariants;
//! - [`conformance`]: the shared `vectors/` on the native core, the filter and the browser module;
//! - [`wasm_bindgen`]: the one place that knows wasm-bindgen 0.2.130's calling convention.
#![forbid(unsafe_code)]

pub mod abi;
pub mod artifacts;
pub mod conformance;
pub mod envoy;
pub mod error;
pub mod explore;
pub mod profile;
pub mod runtime;
pub mod scenario;
pub mod wasm_bindgen;

pub use error::{HarnessError, Result};
