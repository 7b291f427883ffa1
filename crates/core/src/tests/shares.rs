//! Shares of the whole store, in the core: charged to whoever cannot make up a new
//! identity for free. The floods the Envoy tests of `crates/envoy/tests/envoy/floods.rs` send,
//! here against the protocol over a memory store.
//!
//! Shares bind only while the store is under pressure (`shares.pressure`). The floods are sent
//! into a store already past it; the tests of what a share counts (leases, bytes, replays, who
//! pays) set `"pressure": "0%"`, so that every share binds as a fixed cap and the counting shows.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod charges;
mod floods;
mod honest;
