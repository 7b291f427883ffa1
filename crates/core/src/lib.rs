//! # idemgate-core
//!
//! The rules of idempotency, once, with no I/O: parse an `Idempotency-Key`, derive a scoped storage
//! key, fingerprint a request as its body streams past, decide what a request gets (forward, 409,
//! 422, replay), decide what its response does to the record, and map every decision to HTTP.
//! Time, entropy and storage come in from the host (the Envoy filter, the browser module, a test),
//! in the spirit of quinn-proto and rustls: values in, decisions out.
//!
//! ```
//! use idemgate_core::{
//!     ClaimOutcome, Protocol, FingerprintBuilder, IdempotencyKey, MemoryStore, OwnerToken, Payers,
//!     Policy, ResponseFacts, Scope, StorageKey, UnixMillis,
//! };
//!
//! let policy = Policy::defaults();
//! let mut store = MemoryStore::new();
//! let mut protocol = Protocol { store: &mut store, policy: &policy };
//!
//! let key = IdempotencyKey::parse(b"\"8e03978e-40d5-43e8-bc93-6894a57f9324\"").unwrap();
//! let scope = Scope { source: "header:authorization", value: b"Bearer alice" };
//! let storage_key = StorageKey::derive(scope, "POST", "/orders", &key);
//! // Who pays for the record's space: the header is the client's own word, so its address too.
//! let payers = Payers::of(scope, false, Some(&[4, 32, 192, 0, 2, 7]));
//! let mut fp = FingerprintBuilder::new(&policy.fingerprint, "POST", "/orders", [("content-type", &b"application/json"[..])]);
//! fp.update(br#"{"sku":"A1","qty":1}"#).unwrap();
//! let fingerprint = fp.finish().unwrap();
//!
//! let now = UnixMillis(1_700_000_000_000);
//! let first = protocol.claim(storage_key, fingerprint, OwnerToken([1; 16]), payers, now).unwrap();
//! let ClaimOutcome::Forward { owner, .. } = first else { unreachable!() };
//! // A retry while the first is in flight gets 409 …
//! assert!(matches!(protocol.claim(storage_key, fingerprint, OwnerToken([2; 16]), payers, now).unwrap(), ClaimOutcome::Conflict { .. }));
//! // … and after the upstream answered, the stored answer.
//! let facts = ResponseFacts::Upstream { status: 201, headers: vec![], body: Some(b"{\"id\":1}".to_vec()) };
//! protocol.finish(storage_key, owner, Some(facts), now).unwrap();
//! assert!(matches!(protocol.claim(storage_key, fingerprint, OwnerToken([3; 16]), payers, now).unwrap(), ClaimOutcome::Replay(_)));
//! ```
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod answer;
pub mod base64;
pub mod browser;
pub mod client;
mod codec;
#[cfg(feature = "config")]
pub mod config;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod decision;
pub mod events;
pub mod guard;
pub mod hash;
pub mod headers;
pub mod order;
pub mod policy;
pub mod record;
pub mod request;
pub mod store;
#[cfg(test)]
#[macro_use]
extern crate std;
#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;
mod text;
pub mod time;

// Modules by concept: what a request says and its fingerprint (`request`), who asks
// and what it must show (`client`), the record store and its protocol, local and remote
// (`store`), what a request gets and its HTTP meaning (`decision`), a request's life (`guard`),
// the ordering rules with their state tables (`order`), the browser's rules (`browser`), the
// configuration and its compiled `policy`, and the primitives (`hash`, `time`).
//
// The types a host names on every request, at the root: a request's key, scope and
// fingerprint, the policy, the protocol with its outcomes, and time. The rest stays in the module
// of its concept; crates/core/public-api.txt lists all of it, and `make check-api` keeps the list
// true, so a change to what hosts can reach shows in review.
pub use answer::{EdgeAnswer, HttpAnswer};
pub use client::payer::Payers;
pub use client::scope::{Scope, StorageKey};
pub use decision::ResponseFacts;
pub use policy::Policy;
pub use record::OwnerToken;
pub use request::fingerprint::{Fingerprint, FingerprintBuilder};
pub use request::key::{IdempotencyKey, KeyError};
pub use store::protocol::claim::{ClaimOutcome, ConsumeOutcome, FinishOutcome};
pub use store::protocol::immediate::Protocol;
pub use store::protocol::ProtocolError;
pub use store::{MemoryStore, Store};
pub use time::{Span, UnixMillis};
