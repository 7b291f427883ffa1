//! What a claim, a finish and a token's use do to the record under one key — written once, for both
//! stores: the local store applies these inside a cell's bucket
//! ([`crate::store::protocol`]), the remote engine to the one record it read
//! ([`crate::store::remote::operation::apply`]). Each takes the live record (expired ones already
//! dropped) and returns the outcome with the [`Change`] that makes it so. What surrounds the record
//! — a cell's room, a share's charge, an engine's version and clock — is the store's own business.

use crate::client::payer::Payers;
use crate::decision::{completed_record, decide_late, decide_with, Decision, Verdict};
use crate::record::{OwnerToken, Record};
use crate::request::fingerprint::Fingerprint;
use crate::store::protocol::{ClaimOutcome, ConsumeOutcome, FinishOutcome};
use crate::time::{Span, UnixMillis};

/// What an operation does to its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Nothing to write: the outcome holds as read.
    Keep,
    /// Write this record (its `expires_at` is the key's expiry).
    Put(Record),
    /// Remove the key.
    Delete,
}

/// A request claims its key (`docs/semantics.md` §4): the claim it writes names who pays for its
/// space.
pub(crate) fn claim(
    live: Option<&Record>,
    fingerprint: Fingerprint,
    owner: OwnerToken,
    payers: Payers,
    now: UnixMillis,
    (lease, ttl): (Span, Span),
) -> (ClaimOutcome, Change) {
    match decide_with(live, fingerprint, owner, now, lease, ttl) {
        Decision::Claim {
            mut claim,
            takeover,
        } => {
            claim.payers = payers;
            (
                ClaimOutcome::Forward { owner, takeover },
                Change::Put(Record::InFlight(claim)),
            )
        }
        Decision::Conflict { retry_after } => {
            (ClaimOutcome::Conflict { retry_after }, Change::Keep)
        }
        Decision::Replay(response) => (ClaimOutcome::Replay(response), Change::Keep),
        Decision::Mismatch => (ClaimOutcome::Mismatch, Change::Keep),
    }
}

/// A late delivery looks its key up ([`decide_late`]): the stored answer, or nothing. Never a
/// write, whatever the record.
pub(crate) fn replay(
    live: Option<&Record>,
    fingerprint: Fingerprint,
    now: UnixMillis,
) -> (ClaimOutcome, Change) {
    let outcome = match decide_late(live, fingerprint, now) {
        Some(response) => ClaimOutcome::Replay(response),
        None => ClaimOutcome::NotReplayed,
    };
    (outcome, Change::Keep)
}

/// The claim's owner ends its request (`docs/semantics.md` §5) with what the policy made of how it
/// ended ([`crate::decision::verdict`]). Anyone else — a claim taken over after its lease, or gone
/// — changes nothing.
pub fn finish(
    live: Option<&Record>,
    owner: OwnerToken,
    verdict: Verdict,
    now: UnixMillis,
    ttl: Span,
) -> (FinishOutcome, Change) {
    let claim = match live {
        Some(Record::InFlight(claim)) if claim.owner == owner => claim,
        _ => return (FinishOutcome::NotOwner, Change::Keep),
    };
    match verdict {
        Verdict::Store(response) => (
            FinishOutcome::Stored,
            Change::Put(Record::Completed(completed_record(
                claim, response, now, ttl,
            ))),
        ),
        Verdict::Release => (FinishOutcome::Released, Change::Delete),
        Verdict::KeepInFlight => (FinishOutcome::KeptInFlight, Change::Keep),
    }
}

/// A one-time token is used (`docs/semantics.md` §7): once, and remembered for [`token_hold`].
pub(crate) fn consume(
    live: Option<&Record>,
    expires_at: UnixMillis,
    now: UnixMillis,
) -> (ConsumeOutcome, Change) {
    match live {
        Some(_) => (ConsumeOutcome::AlreadyUsed, Change::Keep),
        None => (
            ConsumeOutcome::Consumed,
            Change::Put(Record::TokenUsed {
                expires_at: token_hold(expires_at, now),
            }),
        ),
    }
}

/// How long a token's use is remembered: until the token expires plus the clock skew the verifier
/// tolerates ([`crate::client::token::CLOCK_SKEW`]). Envoys check expiry on their own clocks, so an
/// Envoy running behind could still accept the token after the store's clock has passed its expiry;
/// the use must outlive that. One rule for both stores, so a use is held as long whichever records
/// it.
pub(crate) fn token_hold(expires_at: UnixMillis, now: UnixMillis) -> UnixMillis {
    expires_at
        .after(crate::client::token::CLOCK_SKEW)
        .max(now.after(Span(1)))
}
