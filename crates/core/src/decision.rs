//! The two pure decisions (`docs/semantics.md` §4 and §5): what to do with a request given the
//! record found, and what to do with the record given how the request ended. Neither touches a
//! store; the [`crate::store::protocol`] applies them atomically, and [`crate::answer`] turns them
//! into HTTP.

pub mod admission;

pub(crate) use crate::record::safe_header;
pub(crate) use crate::record::MAX_STORED_HEADERS;

use crate::policy::Policy;
use crate::record::{Completed, InFlight, OwnerToken, Record, StoredBody, StoredResponse};
use crate::request::fingerprint::Fingerprint;
use crate::time::{Span, UnixMillis};
use alloc::string::String;
use alloc::vec::Vec;

/// What a request gets, given the record found under its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// No live record (or a lease whose owner is gone): write this claim and forward upstream.
    Claim { claim: InFlight, takeover: bool },
    /// The first request is still in flight: 409, retry after this long (≥ 1 s on the wire).
    Conflict { retry_after: Span },
    /// Completed with the same payload: replay the stored answer.
    Replay(StoredResponse),
    /// The key was used for a different payload: 422.
    Mismatch,
}

/// Decides a request (`docs/semantics.md` §4). `owner` is fresh entropy from the host, used only if
/// this request claims the key.
#[must_use = "the decision says what the request gets"]
pub fn decide(
    existing: Option<&Record>,
    fingerprint: Fingerprint,
    owner: OwnerToken,
    now: UnixMillis,
    policy: &Policy,
) -> Decision {
    decide_with(existing, fingerprint, owner, now, policy.lease, policy.ttl)
}

/// [`decide`] with only the two policy values it needs: the remote store service decides on the
/// lease and TTL the filter sent, without the filter's whole policy.
#[must_use = "the decision says what the request gets"]
pub(crate) fn decide_with(
    existing: Option<&Record>,
    fingerprint: Fingerprint,
    owner: OwnerToken,
    now: UnixMillis,
    lease: Span,
    ttl: Span,
) -> Decision {
    let fresh_claim = |takeover| Decision::Claim {
        claim: claim_with(fingerprint, owner, now, lease, ttl),
        takeover,
    };
    let record = match existing {
        Some(record) if !record.is_expired(now) => record,
        _ => return fresh_claim(false),
    };
    match record {
        Record::InFlight(flight) if flight.fingerprint != fingerprint => Decision::Mismatch,
        Record::InFlight(flight) if now < flight.lease_until => Decision::Conflict {
            retry_after: now.until(flight.lease_until),
        },
        Record::InFlight(_) => fresh_claim(true),
        Record::Completed(done) if done.fingerprint != fingerprint => Decision::Mismatch,
        Record::Completed(done) => Decision::Replay(done.response.clone()),
        // A token record can never share a storage key with a request (separate hash domains);
        // refusing is the answer that cannot cause a second execution.
        Record::TokenUsed { .. } | Record::Resource(_) => Decision::Mismatch,
    }
}

/// What a late delivery gets — one whose signature matches but was made longer ago than the
/// tolerance allows ([`crate::client::signature::Freshness::Late`]): a provider (or a relay)
/// redelivering a message with its original signature. Only the answer stored for that very
/// message (completed, same fingerprint) answers it; anything else — no record, one in flight, one
/// for another payload — is `None`, and the delivery is refused as stale. It never claims, takes
/// over or releases: a captured old delivery can run nothing and hold nothing.
#[must_use = "the stored answer, if any, is what the delivery gets"]
pub(crate) fn decide_late(
    existing: Option<&Record>,
    fingerprint: Fingerprint,
    now: UnixMillis,
) -> Option<StoredResponse> {
    match existing.filter(|record| !record.is_expired(now)) {
        Some(Record::Completed(done)) if done.fingerprint == fingerprint => {
            Some(done.response.clone())
        }
        _ => None,
    }
}

/// A new in-flight record. The lease never outlives the record (`lease_until ≤ expires_at`), so no
/// claim can be stuck past its TTL.
#[must_use = "the claim must be stored to take effect"]
pub fn new_claim(
    fingerprint: Fingerprint,
    owner: OwnerToken,
    now: UnixMillis,
    policy: &Policy,
) -> InFlight {
    claim_with(fingerprint, owner, now, policy.lease, policy.ttl)
}

/// [`new_claim`] with only the lease and TTL.
#[must_use = "the claim must be stored to take effect"]
pub(crate) fn claim_with(
    fingerprint: Fingerprint,
    owner: OwnerToken,
    now: UnixMillis,
    lease: Span,
    ttl: Span,
) -> InFlight {
    let expires_at = now.after(ttl);
    InFlight {
        fingerprint,
        owner,
        lease_until: now.after(lease).min(expires_at),
        expires_at,
        payers: crate::client::payer::Payers::NONE,
    }
}

/// How a forwarded request ended, as the host observed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseFacts {
    /// A whole response came from the upstream itself.
    Upstream {
        status: u16,
        /// Response headers as (name, value); filtered against the policy here.
        headers: Vec<(String, String)>,
        /// `None` when the body was over the configured limit and was passed on but not kept.
        body: Option<Vec<u8>>,
    },
    /// The request never reached the upstream (no healthy upstream, connection refused, a reply
    /// made by the proxy or a later filter before forwarding): a retry is safe.
    NeverReached,
    /// Sent, but no complete answer came back (reset, route timeout, client gone, body cut off):
    /// the upstream may have committed.
    InDoubt,
}

/// Why an outcome is in doubt, for the host's counters: the claim is kept in flight all the same.
/// Exhaustive on purpose, like [`crate::events::Event`]: each cause is one counter in every host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DoubtCause {
    /// The upstream reset or closed the exchange after the request may have been sent.
    UpstreamReset,
    /// The upstream timeout fired.
    UpstreamTimeout,
    /// The client went away and the proxy reset the upstream request (router path only).
    ClientGone,
    /// Anything else, or no details at all.
    Other,
}

/// What becomes of the claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// The answer is the idempotent result.
    Store(Completed),
    /// Drop the claim: the upstream did not act, and a retry runs again.
    Release,
    /// Leave the claim in flight until its lease ends: retries get 409 instead of racing a request
    /// that may still be committing.
    KeepInFlight,
}

/// Decides what the end of a forwarded request does to its claim (`docs/semantics.md` §5).
#[must_use = "the completion says what the store must do with the record"]
pub fn complete(
    claim: &InFlight,
    facts: ResponseFacts,
    now: UnixMillis,
    policy: &Policy,
) -> Completion {
    match verdict(facts, policy) {
        Verdict::Store(response) => {
            Completion::Store(completed_record(claim, response, now, policy.ttl))
        }
        Verdict::Release => Completion::Release,
        Verdict::KeepInFlight => Completion::KeepInFlight,
    }
}

/// [`Completion`] before the claim is known: what the policy makes of how the request ended. The
/// filter decides this half; with a remote store the service applies it to the record it reads
/// ([`completed_record`]), so every policy rule stays on the side that holds the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Store this answer (already filtered: allow-listed headers, body within the limit).
    Store(StoredResponse),
    Release,
    KeepInFlight,
}

/// The policy half of [`complete`].
#[must_use = "the verdict says whether the answer is stored or the claim released"]
pub(crate) fn verdict(facts: ResponseFacts, policy: &Policy) -> Verdict {
    match facts {
        ResponseFacts::NeverReached => Verdict::Release,
        ResponseFacts::InDoubt => Verdict::KeepInFlight,
        // Not an HTTP status the record can hold (a host bug or a hostile upstream): whether the
        // upstream acted is unknown, so this is an outcome in doubt, never a poisoned record.
        ResponseFacts::Upstream { status, .. } if !crate::record::is_storable_status(status) => {
            Verdict::KeepInFlight
        }
        ResponseFacts::Upstream { status, .. } if !policy.store_rule.stores(status) => {
            Verdict::Release
        }
        ResponseFacts::Upstream {
            status,
            headers,
            body,
        } => {
            let headers = headers
                .into_iter()
                .filter(|(name, value)| policy.replays_header(name) && safe_header(name, value))
                // In place: the name is the answer's own copy already.
                .map(|(mut name, value)| {
                    name.make_ascii_lowercase();
                    (name, value)
                })
                .take(MAX_STORED_HEADERS)
                .collect();
            let body = match body {
                Some(body) if body.len() as u64 <= policy.max_response_body => {
                    StoredBody::Kept(body)
                }
                _ => StoredBody::NotKept,
            };
            Verdict::Store(StoredResponse {
                status,
                headers,
                body,
                seal: None,
            })
        }
    }
}

/// The record a claim becomes when its answer is stored.
#[must_use = "the completed record must be stored to take effect"]
pub(crate) fn completed_record(
    claim: &InFlight,
    response: StoredResponse,
    now: UnixMillis,
    ttl: Span,
) -> Completed {
    Completed {
        fingerprint: claim.fingerprint,
        response,
        expires_at: stored_until(claim, now, ttl),
    }
}

/// Until when `claim`'s answer, stored at `now`, is kept: its TTL from completion (the claim's
/// TTL bounded only the lease), never less than the claim itself was to live.
pub(crate) fn stored_until(claim: &InFlight, now: UnixMillis, ttl: Span) -> UnixMillis {
    now.after(ttl).max(claim.expires_at)
}
