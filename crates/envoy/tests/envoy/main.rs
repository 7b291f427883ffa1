//! idemgate's filter in a real Envoy. Every test owns its Envoy and upstream (see `harness`).
//! Run with `make test-envoy` (builds the filter first); the tests are `#[ignore]`d in a plain
//! `cargo test` because they need Envoy and the built `.wasm`.

// A test harness fails loudly: these are the test's own assertions.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod client;
mod harness;
mod reset_once;
mod setup;
mod upstream;

mod config;
mod degraded;
mod detached;
mod exactly_once;
mod faults;
mod fleet;
mod floods;
mod floods_fleet;
mod hardening;
mod jwt_authn;
mod jwt_platforms;
mod kept_bodies;
mod key_policy;
mod key_sources;
mod large_answers;
mod late_fleet;
mod memory;
mod order;
mod order_fleet;
mod order_shares;
mod pending;
mod published;
mod reentry;
mod reentry_authz;
mod reentry_control;
mod relay_budget;
mod requests;
mod responses;
mod route_shares;
mod shares_fleet;
mod soak;
mod tamper;
mod threats;
mod tokens;
mod waiting;
