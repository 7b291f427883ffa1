//! Shares: no client can deny the store to others. Each test replays one flood of the threat
//! against the configuration of `examples/envoy/envoy.yaml` as shipped (capacity 10,000, scope
//! `[authorization, peer]`, TTL 24 h), in front of an app that answers 404 on an unknown path (a
//! 404 is the app's answer, so it is stored). What must hold after each flood: the flooding client
//! is refused by its share once the store is under pressure (the flood itself fills it to the
//! example's pressure, a fifth) — 429 `scope_quota_exceeded` with a `Retry-After` within the TTL,
//! never a 503 `store_full` — and every other client (other addresses, their own `Authorization`,
//! or none) still gets its own answer for fresh keys and a replay for a repeated one. The last tests
//! are the opposite failure: a busy client alone on the example's store, and one address under an
//! ordinary load far under any share of a store of 1,000,000, are never refused.
//!
//! These tests were written before the fix; the commit that added them says how each failed then.

mod example;
mod traffic;

mod flooders;
mod memory;
mod served;

pub(crate) use example::{
    app, example_filter, keyed, ttl_seconds, MALLORY, MALLORY_TOO, THREADS, UNKNOWN,
};
pub(crate) use memory::{outside_the_byte_share_with, LARGE};
pub(crate) use traffic::{flood, flooder_failures, label, others_are_served, Tally, OTHERS};
