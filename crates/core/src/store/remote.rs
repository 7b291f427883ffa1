//! The remote store protocol: how a fleet of hosts (several Envoys) shares one record store kept in
//! an existing engine (Redis, Redis Cluster) behind a stateless service.
//!
//! The local protocol ([`crate::store::protocol`]) packs records into a bounded set of cells
//! because Envoy shared data has no delete, no TTL and no listing. Redis has all three, so the
//! remote protocol keeps **one record per engine key**, with the engine's TTL as the record's
//! expiry, and every operation touches exactly one key (which is what lets Redis Cluster shard it).
//!
//! The split of work keeps every decision in this crate:
//! - the filter runs the policy half (`crate::decision::verdict`: which answers are stored, which
//!   headers are replayed, body limits) and sends a [`wire::Request`] — claim, finish (store or
//!   release) or token consume — with the few policy values the record needs (lease, TTL);
//! - the service reads the key, calls [`operation::apply`] on the record it found (the same
//!   `crate::decision::decide_with` as the local store), and writes the result with a
//!   compare-and-set on the value's [`stored::ValueVersion`], deciding again on a lost race
//!   ([`operation::Operation`] is that loop, sans-IO). In the common cases (a fresh claim, a token's
//!   first use, the owner's finish) the operation skips the read: it decides on the state the key
//!   most likely holds and lets the compare-and-set prove it ([`operation::Operation::speculate`]),
//!   one engine round trip instead of two;
//! - the filter decodes the [`wire::Response`] into the same outcomes the local protocol returns
//!   ([`client`] holds both of the filter's steps).
//!
//! Shares: a claim, a token use or an ordering begin names its payers with their shares (the filter's
//! policy: who pays, and how many records each may hold). Each payer's usage lives under a key of
//! its own (the `ledger` module), charged after the record is written — one key per engine call,
//! so Redis Cluster can shard a payer's ledger anywhere — and the claim is undone when a payer is
//! at its share while the store is under pressure. The fleet's fill is counted as the local store
//! counts it (`crate::store::share::fill`): in fill shards, each a ledger key of its own charged
//! with the record, the shard a key falls in standing for the whole store; the filter's
//! `capacity` places the key, and the request carries its shard. The operation asks for each charge ([`operation::Need::Ledger`]); the service
//! settles the charges waiting on one payer's key together ([`settle::Settlement`]), so one busy
//! client's concurrent requests share a compare-and-set instead of racing for it.
//!
//! Time: the service decides on the *engine's* clock (Redis `TIME`, read in the same script as the
//! record), never on its own or the filter's. Each key lives on one Redis node, so every decision
//! on a key — from any service replica, for any Envoy — uses one clock, and it is the clock that
//! enforces the key's expiry (`PXAT`), so a record the core calls live is one Redis still holds.
//! Service replicas with skewed clocks therefore cannot disagree about a lease.
//!
//! A speculative write is decided before anything is read, so on the service's clock; it carries
//! that time, and the engine refuses it (answering with its own clock and the key's value, in the
//! same atomic step) unless its clock is within [`operation::CLOCK_TOLERANCE`] of it. The decision
//! is then made again on the engine's clock. So every write that lands was decided at the
//! engine's time, to within the tolerance; and a speculative decision never depends on a lease
//! or an expiry of a record it did not see (it assumes the key absent, or holding the claim the
//! service itself just wrote), so the tolerance moves only the times of the record it writes.

mod batching;
pub mod client;
mod finishing;
pub(crate) mod ledger;
mod operation;
mod settle;
mod stored;
mod wire;

// The service's loops and the wire between filter and service, at one path each.
pub use batching::BatchStep;
pub use batching::FinishBatch;
pub use batching::FinishQueue;
pub use batching::BATCH_DELAY;
pub use finishing::FinishNote;
pub use finishing::FinishStep;
pub use finishing::Finishing;
pub use operation::apply;
pub use operation::full;
pub use operation::Change;
pub use operation::Need;
pub use operation::Operation;
pub use operation::OperationStep;
pub use operation::Resume;
pub use operation::Write;
pub use operation::CLOCK_TOLERANCE;
pub use settle::LedgerJob;
pub use settle::LedgerOutcome;
pub use settle::SettleError;
pub use settle::Settlement;
pub use settle::SettlementStep;
pub use stored::cache_hold;
pub use stored::CacheHold;
pub use stored::StoredValue;
pub use stored::ValueVersion;
pub use stored::VERSION_LEN;
pub use wire::End;
pub use wire::Failure;
pub use wire::Incoming;
pub use wire::Request;
pub use wire::Response;
pub use wire::WireError;
pub use wire::CONTENT_TYPE;
#[cfg(test)]
pub(crate) use wire::MAX_FINISHES;
