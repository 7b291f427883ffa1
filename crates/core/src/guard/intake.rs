//! A guarded request between its headers and its claim: whether it has a key
//! to claim, and its body taken in — counted against `max_request_body`, charged to the hashing
//! budget (every copy of it that is kept), fingerprinted, read by a body key source or a
//! signature — until the claim's key and fingerprint are known, or the request is refused. The
//! rules were the Envoy filter's; the host now hands over its facts (the admission, the client,
//! each chunk's size and bytes) and carries out what this says.
//!
//! The order is kept from the filter: the body's size is checked before its bytes are charged, and
//! charged to the hashing budget ([`crate::request::budget`]) before the host reads them, so a body
//! that is too large or over the budget is never copied; at the end the key is read before the
//! fingerprint is finished (a refusal names the key's problem first).

use super::{refused, Event, Events};
use crate::answer::{styled, EdgeAnswer, HttpAnswer};
use crate::client::identity::ClientIdentity;
use crate::client::scope::{KeyPrefix, Scope, StorageKey};
use crate::client::signature::Freshness;
use crate::decision::admission::{Admission, Refusal};
use crate::policy::Policy;
use crate::policy::ProblemStyle;
use crate::request::budget::{Limits, Reservation};
use crate::request::fingerprint::{Fingerprint, FingerprintBuilder, FingerprintError};
use alloc::boxed::Box;
use alloc::string::String;

/// What a request's headers settle about its key.
#[derive(Debug)]
#[must_use = "the start says whether the request is guarded"]
pub(crate) enum Start {
    /// Guarded: its key is known, or will be at the end of its body.
    Keyed(PendingKey),
    /// No key and none required: forwarded without idempotency (a required token still applies).
    Unguarded,
    /// A key, or one to come from the body, but no scope source identified the client: the
    /// host answers [`super::unscoped`] (the store-error failure mode).
    Unscoped,
}

/// The storage key, or what decides it at the end of the body.
#[derive(Debug)]
pub(crate) struct PendingKey(Key);

#[derive(Debug)]
enum Key {
    Known(StorageKey),
    /// A body key source or a signature decides. Boxed: a header key, the common case, moves a
    /// small value from the headers to the claim.
    FromBody(Box<FromBody>),
}

/// What decides a key at the end of the body, and what the storage key is made of.
#[derive(Debug)]
struct FromBody {
    admission: Admission,
    /// The client's scope as its storage key begins.
    prefix: KeyPrefix,
    method: String,
    path: String,
}

/// Decides from the headers' `admission` whether the request is guarded. `client` is who sent
/// it, if a scope source identified it (kept, where the key comes with the body); `prefix` gives
/// what a scope's storage keys begin with, its quota tag among it (asked for only when the request
/// is keyed, so an unguarded request costs no tag). `path` is the normalised path the storage key uses.
pub(crate) fn start(
    admission: Admission,
    client: Option<ClientIdentity>,
    prefix: impl FnOnce(Scope<'_>) -> KeyPrefix,
    method: &str,
    path: &str,
) -> Start {
    if admission.needs_body() {
        let Some(client) = client else {
            return Start::Unscoped;
        };
        return Start::Keyed(PendingKey(Key::FromBody(Box::new(FromBody {
            prefix: prefix(client.scope()),
            admission,
            method: method.into(),
            path: path.into(),
        }))));
    }
    let Some(key) = admission.key_now() else {
        return Start::Unguarded;
    };
    let Some(client) = client else {
        return Start::Unscoped;
    };
    let key = prefix(client.scope()).derive(method, path, key);
    Start::Keyed(PendingKey(Key::Known(key)))
}

/// Why a request's body stops it before its claim.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum BodyRefusal {
    /// More than `max_request_body` bytes.
    TooLarge { limit: u64 },
    /// The VM's hashing budget, or the peer's part of it, cannot take the chunk.
    OverBudget,
    /// The body is not what the fingerprint mode reads (not JSON, not a form, ...).
    Invalid(FingerprintError),
    /// The signature or the body's key refused it ([`Admission::finish`]).
    Admission(Refusal),
}

impl BodyRefusal {
    /// The answer the host sends (the mapping lives in [`crate::answer`]), its problem written
    /// in `style`.
    pub(crate) fn answer(&self, style: &ProblemStyle) -> HttpAnswer {
        let edge = match self {
            BodyRefusal::TooLarge { limit } => EdgeAnswer::BodyTooLarge { limit: *limit },
            BodyRefusal::OverBudget => EdgeAnswer::HashingBudgetExceeded,
            BodyRefusal::Invalid(e) => EdgeAnswer::InvalidBody(e),
            BodyRefusal::Admission(refusal) => return crate::answer::refusal(refusal, style),
        };
        styled(&edge, style)
    }

    /// What the host counts.
    pub(crate) fn events(&self) -> Events {
        match self {
            BodyRefusal::TooLarge { .. } => Events::of(&[Event::BodyTooLarge]),
            BodyRefusal::OverBudget => Events::of(&[Event::HashingBudgetExceeded]),
            BodyRefusal::Invalid(_) => Events::of(&[Event::InvalidBody]),
            BodyRefusal::Admission(refusal) => refused(refusal),
        }
    }
}

/// What a complete body gives the claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "the claim's key and fingerprint, or no claim"]
pub(crate) enum Taken {
    Claim {
        key: StorageKey,
        fingerprint: Fingerprint,
        /// [`Freshness::Late`]: a validly signed redelivery past the tolerance — only the key's
        /// stored answer may answer it, nothing is claimed.
        freshness: Freshness,
    },
    /// No key (the body had none) and none required: forwarded without idempotency.
    Unguarded,
}

/// A keyed request's body being taken in.
pub(crate) struct Intake {
    key: Key,
    fingerprint: FingerprintBuilder,
    /// Body bytes seen so far.
    seen: u64,
    limit: u64,
    budget: Limits,
    /// How many copies of each body byte are kept until the claim: the hasher's state, a body
    /// key source's copy, and the host's own (see [`Policy::hashing_budget`]).
    copies: u64,
}

impl Intake {
    /// Starts taking in the body of a keyed request. `host_copies`: how many copies of the body
    /// the host keeps itself until the claim (the sequencer's, a detached exchange's).
    #[inline]
    pub fn new(
        key: PendingKey,
        fingerprint: FingerprintBuilder,
        host_copies: u64,
        policy: &Policy,
    ) -> Intake {
        let keeps = matches!(&key.0, Key::FromBody(body) if body.admission.keeps_body());
        Intake {
            key: key.0,
            fingerprint,
            seen: 0,
            limit: policy.max_request_body,
            budget: policy.hashing_limits(),
            copies: 1 + u64::from(keeps) + host_copies,
        }
    }

    /// A chunk of `size` bytes arrived, not yet read: its bytes, each kept copy counted, are
    /// reserved from the hashing budget in `reservation` (the stream's), before the host reads
    /// them. Refused if the body goes over `max_request_body` (nothing reserved), or if the VM's
    /// budget or the peer's part of it cannot take them.
    pub(crate) fn charge(
        &mut self,
        size: u64,
        reservation: &mut Reservation,
    ) -> Result<(), BodyRefusal> {
        self.seen = self.seen.saturating_add(size);
        if self.seen > self.limit {
            return Err(BodyRefusal::TooLarge { limit: self.limit });
        }
        if !reservation.grow(size.saturating_mul(self.copies), self.budget) {
            return Err(BodyRefusal::OverBudget);
        }
        Ok(())
    }

    /// The chunk's bytes, in order, once charged.
    pub fn update(&mut self, chunk: &[u8]) -> Result<(), BodyRefusal> {
        if let Key::FromBody(body) = &mut self.key {
            body.admission.update(chunk);
        }
        self.fingerprint.update(chunk).map_err(BodyRefusal::Invalid)
    }

    /// The body is complete: the key (the signature verified first), then the fingerprint.
    pub fn finish(self) -> Result<Taken, BodyRefusal> {
        let (key, freshness) = match self.key {
            Key::Known(key) => (key, Freshness::Fresh),
            Key::FromBody(body) => {
                let FromBody {
                    admission,
                    prefix,
                    method,
                    path,
                } = *body;
                match admission.finish().map_err(BodyRefusal::Admission)? {
                    None => return Ok(Taken::Unguarded),
                    Some(admitted) => (
                        prefix.derive(&method, &path, &admitted.key),
                        admitted.freshness,
                    ),
                }
            }
        };
        let fingerprint = self.fingerprint.finish().map_err(BodyRefusal::Invalid)?;
        Ok(Taken::Claim {
            key,
            fingerprint,
            freshness,
        })
    }
}

#[cfg(test)]
mod tests;
