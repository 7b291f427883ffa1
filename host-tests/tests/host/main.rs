//! The harness's tests, in one binary so the filter is compiled once per run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod abi;
mod batching;
mod builds;
mod callouts;
mod detached;
mod failures;
mod fleet;
mod guard;
mod intake;
mod interleavings;
mod order;
mod pending;
mod reentry;
mod runtimes;
mod scenarios;
mod support;
mod vectors;
