//! The remote store protocol: how a fleet of hosts (several Envoys) shares one record store kept in
//! an existing engine (Redis, Redis Cluster) behind a stateless service.
//!
//! The local protocol ([`crate::protocol`]) packs records into a bounded set of cells because
//! Envoy shared data has no delete, no TTL and no listing. Redis has all three, so the remote
//! protocol keeps **one record per engine key**, with the engine's TTL as the record's expiry, and
//! every operation touches exactly one key (which is what lets Redis Cluster shard it).
//!
//! The split of work keeps every decision in this crate:
//! - the filter runs the policy half ([`crate::decision::verdict`]: which answers are stored, which
//!   headers are replayed, body limits) and sends a [`wire::Request`] — claim, finish (store or
//!   release) or token consume — with the few policy values the record needs (lease, TTL);
//! - the service reads the key, calls [`exchange::apply`] on the record it found (the same
//!   [`crate::decision::decide_with`] as the local store), and writes the result with a
//!   compare-and-set on the value's [`stored::ValueVersion`], re-reading on a lost race
//!   ([`exchange::Exchange`] is that loop, sans-IO);
//! - the filter decodes the [`wire::Response`] into the same outcomes the local protocol returns
//!   ([`client`] holds both of the filter's steps).
//!
//! Time: the service decides on the *engine's* clock (Redis `TIME`, read in the same script as the
//! record), never on its own or the filter's. Each key lives on one Redis node, so every decision
//! on a key — from any service replica, for any Envoy — uses one clock, and it is the clock that
//! enforces the key's expiry (`PXAT`), so a record the core calls live is one Redis still holds.
//! Service replicas with skewed clocks therefore cannot disagree about a lease.

pub mod client;
pub mod exchange;
pub mod stored;
pub mod wire;

pub use exchange::{apply, Change, Exchange, Need, Step, Write};
pub use stored::{StoredValue, ValueVersion};
pub use wire::{Failure, Request, Response, WireError, CONTENT_TYPE};
