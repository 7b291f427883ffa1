//! The remote store protocol: the wire codec round-trips and refuses garbage with typed errors,
//! the read → decide → compare-and-set exchange admits exactly one claim whatever the
//! interleaving, and over a model of the engine (one value per key, expiry on the engine's clock)
//! it gives the same outcomes as the local protocol for any sequence of operations.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod engine;
mod support;

mod agreement;
mod batch;
mod claims;
mod seal;
mod shares;
mod wire;
