//! A request's life as the core decides it and the host carries it out:
//!
//! 1. its headers, with what only the host knows ([`Host`]: its clock, the peer's address,
//!    fresh randomness), decided by [`head`]: left alone, answered here (the token endpoint's
//!    `issue_token`; a precondition, admission, identity or `check_token` refusal, counted),
//!    forwarded unguarded, or [`Keyed`] — whose [`Keyed::take`] starts the machine;
//! 2. from there on, its life is one sans-IO state machine, [`Guarded`]: the host hands in what
//!    happened — each body chunk (charged by the request's `Intake` before the host reads it:
//!    `max_request_body`, each kept copy reserved from the hashing [`crate::request::budget`]), the
//!    body's end, the store's [`Reply`], the sequencer's [`Ruling`], whether a detached
//!    exchange was [`Sent`], the upstream's head, body and end, the client gone ([`Guarded::gone`]:
//!    what the request holds is given back once its answer comes) — and carries out the [`Action`]s
//!    it polls, in order, counting the [`Event`]s. Inside, the body's end gives the claim's key and
//!    fingerprint (`Intake::finish`) or a `BodyRefusal`; the store's decision is
//!    `after_claim` (forward as the key's owner, answer here: 409, replay, 422, 429, 502
//!    `record_corrupt`, the failure mode's 503; or forward unguarded); the request's [`Course`]
//!    upstream is the sequencer's decision, the token's single use (`after_use`), then out;
//!    and a [`Capture`] keeps what the record may replay of the upstream's answer and gives the
//!    [`crate::decision::ResponseFacts`] the claim is finished with.
//!
//! Whether a store answers at once (local) or later (remote, the stream paused) is the only
//! thing hosts differ in, and the machine cannot tell. The host decides nothing.
//!
//! ```
//! use idemgate_core::request::budget::Budget;
//! use idemgate_core::guard::{self, Action, Reply, Ask, Capture, Headed, Host};
//! use idemgate_core::client::identity::{ScopeHashes, Unreadable};
//! use idemgate_core::{Protocol, MemoryStore, OwnerToken, Policy, Scope, UnixMillis};
//! use std::cell::Cell;
//! use std::rc::Rc;
//!
//! // What only the host knows: its clock, the peer's address, fresh randomness, its budgets.
//! struct Edge { owners: Cell<u8>, budget: Rc<Budget>, relay: Rc<Budget>, scopes: ScopeHashes }
//! impl Host for Edge {
//!     fn property(&self, _path: &[&str]) -> Result<Option<Vec<u8>>, Unreadable> {
//!         Ok(Some(b"192.0.2.7:40000".to_vec()))
//!     }
//!     fn now(&self) -> Option<UnixMillis> { Some(UnixMillis(1_700_000_000_000)) }
//!     fn nonce(&self) -> [u8; 16] { [9; 16] }
//!     fn owner(&self) -> OwnerToken {
//!         self.owners.set(self.owners.get() + 1);
//!         OwnerToken([self.owners.get(); 16])
//!     }
//!     fn scopes(&self) -> &ScopeHashes { &self.scopes }
//!     fn budget(&self) -> Rc<Budget> { Rc::clone(&self.budget) }
//!     fn relay_budget(&self) -> Rc<Budget> { Rc::clone(&self.relay) }
//! }
//!
//! // Every refusal or failure here becomes the text of its code or answer.
//! fn debug(e: impl core::fmt::Debug) -> String { format!("{e:?}") }
//!
//! let policy = Policy::from_json(r#"{"routes": [{"prefix": "/orders"}]}"#, &|_| None).map_err(debug)?;
//! let edge = Edge {
//!     owners: Cell::new(0),
//!     budget: Rc::new(Budget::default()),
//!     relay: Rc::new(Budget::default()),
//!     scopes: ScopeHashes::default(),
//! };
//! let mut store = MemoryStore::new();
//! let mut upstream_calls = 0;
//!
//! // One request's life. Gives the answer the client gets.
//! let mut life = || -> Result<(u16, Vec<u8>), String> {
//!     // 1. Its headers, as the host read them: keyed, answered here, unguarded, or left alone.
//!     let headers = [
//!         (":method", &b"POST"[..]),
//!         (":path", b"/orders"),
//!         ("authorization", b"Bearer alice"),
//!         ("idempotency-key", b"\"order-1\""),
//!         ("content-type", b"application/json"),
//!     ];
//!     let (headed, _events) = guard::head(&policy, headers, true, &edge);
//!     let Headed::Keyed(keyed) = headed else {
//!         return Err(debug(headed));
//!     };
//!     // 2. Its machine takes the body in, each chunk charged before the host reads it, and
//!     // claims the key at its end. No sequencer and nothing kept for a detached exchange
//!     // here (`()` for both).
//!     let mut machine = keyed.take::<(), ()>(&policy, |_| ());
//!     let body = br#"{"sku":"A1","qty":1}"#;
//!     if machine.body_wants(body.len() as u64) {
//!         machine.body_chunk(Some(body));
//!     }
//!     machine.body_end();
//!     let now = edge.now().ok_or("no clock")?;
//!     let mut protocol = Protocol { store: &mut store, policy: &policy };
//!     let mut answer = None;
//!     // Actions out, one at a time; each answer that comes at once goes straight back in.
//!     while let Some(action) = machine.poll() {
//!         match action {
//!             // A local store answers at once; a remote one would answer later.
//!             Action::Ask(Ask::Claim(c)) => {
//!                 let outcome = protocol.claim(c.key, c.fingerprint, c.owner, c.payers, now);
//!                 machine.answered(Reply::Claim(outcome), &policy);
//!             }
//!             Action::Ask(Ask::Replay { key, fingerprint }) => {
//!                 let outcome = protocol.replay(key, fingerprint, now);
//!                 machine.answered(Reply::Claim(outcome), &policy);
//!             }
//!             Action::Answer(http) => answer = Some((http.status, http.body)),
//!             // The upstream runs the request and answers 201; the record keeps the answer.
//!             Action::Forward => {
//!                 upstream_calls += 1;
//!                 let head = [(":status", &b"201"[..]), ("content-type", b"application/json")];
//!                 machine.upstream_head(Capture::head(head, &policy));
//!                 if machine.upstream_wants(8) {
//!                     machine.upstream_chunk(Some(b"{\"id\":1}"));
//!                 }
//!                 answer = Some((201, b"{\"id\":1}".to_vec()));
//!                 machine.ended(true, || unreachable!("the answer came whole"));
//!             }
//!             Action::Finish { key, owner, facts, .. } => {
//!                 protocol.finish(key, owner, Some(facts), now).map_err(debug)?;
//!             }
//!             other => return Err(format!("not on this route: {other:?}")),
//!         }
//!     }
//!     answer.ok_or_else(|| "no answer".into())
//! };
//! assert_eq!(life()?, (201, b"{\"id\":1}".to_vec()), "the first request goes upstream");
//! assert_eq!(life()?, (201, b"{\"id\":1}".to_vec()), "its retry is replayed");
//! assert_eq!(upstream_calls, 1, "and the upstream ran it once");
//! # Ok::<(), String>(())
//! ```

mod capture;
mod course;
mod detached;
mod guarded;
mod head;
mod intake;
pub mod sequencer;
mod token;
mod waiters;

pub(crate) use crate::events::Event;
pub(crate) use crate::events::Events;
pub use capture::Capture;
pub use course::Course;
pub(crate) use course::Stage;
pub(crate) use detached::retry_after;
pub use detached::Callout;
pub use detached::CalloutOrigin;
pub use detached::Ended;
pub use detached::Ending;
pub use detached::Finish;
pub use guarded::Action;
pub use guarded::Ask;
pub use guarded::Claim;
pub use guarded::Guarded;
pub(crate) use guarded::Intaking;
pub use guarded::Kept;
pub use guarded::Reply;
pub use guarded::Ruling;
pub use guarded::Sent;
pub use guarded::Warning;
pub use head::head;
pub use head::Headed;
pub use head::Host;
pub use head::Keyed;
pub(crate) use intake::BodyRefusal;
pub(crate) use intake::Intake;
pub(crate) use intake::Taken;
pub(crate) use intake::{start, Start};
pub use token::VerifiedToken;
pub(crate) use token::{asks_for_token, check_token, issue_token};
pub use waiters::Waiters;

use crate::answer::{Degraded, EdgeAnswer};
use crate::client::signature::SignatureError;
use crate::client::token::TokenError;
use crate::decision::admission::Refusal;
use crate::policy::{FailureMode, Policy};
use crate::record::OwnerToken;
use crate::store::protocol::{ClaimOutcome, ConsumeOutcome, ProtocolError};
use crate::store::share::{ShareReason, ShareRefusal};

/// What becomes of the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Next<'a> {
    /// Forward it upstream as the key's owner; its end is settled with `owner`.
    Forward { owner: OwnerToken, takeover: bool },
    /// Answer it here with this (the host sends [`crate::answer::answer`] of it).
    Answer(EdgeAnswer<'a>),
    /// Forward it without idempotency: the store could not decide and the failure mode is
    /// `pass_through`. A one-time token the route requires must still be used first; the
    /// answer is marked degraded, for this reason.
    Unguarded(Degraded),
}

/// The event of a request refused before its claim (its answer is [`Refusal::answer`]).
pub(crate) fn refused(refusal: &Refusal) -> Events {
    Events::of(&[match refusal {
        Refusal::Signature(_) => Event::SignatureRejected,
        Refusal::MissingKey { .. } => Event::MissingKey,
        Refusal::InvalidKey(_) | Refusal::Source(_) | Refusal::KeyFormat { .. } => {
            Event::InvalidKey
        }
    }])
}

/// What a claim's outcome (from either store) means for the request.
#[must_use = "the step says what the host must do with the request"]
pub(crate) fn after_claim<'a>(
    outcome: &'a Result<ClaimOutcome, ProtocolError>,
    policy: &'a Policy,
) -> (Next<'a>, Events) {
    match outcome {
        Ok(ClaimOutcome::Forward { owner, takeover }) => {
            let events = if *takeover {
                Events::of(&[Event::Claimed, Event::TakenOver])
            } else {
                Events::of(&[Event::Claimed])
            };
            let next = Next::Forward {
                owner: *owner,
                takeover: *takeover,
            };
            (next, events)
        }
        Ok(ClaimOutcome::Conflict { retry_after }) => (
            Next::Answer(EdgeAnswer::Conflict {
                retry_after: *retry_after,
            }),
            Events::of(&[Event::Conflict]),
        ),
        Ok(ClaimOutcome::Replay(stored)) => (
            Next::Answer(EdgeAnswer::Replay {
                stored,
                replay_headers: &policy.replay_headers,
            }),
            Events::of(&[Event::Replayed]),
        ),
        Ok(ClaimOutcome::Mismatch) => (
            Next::Answer(EdgeAnswer::Mismatch),
            Events::of(&[Event::Mismatch]),
        ),
        // Only a late delivery's look-up gives it (never a claim): refused as that delivery is.
        Ok(ClaimOutcome::NotReplayed) => (
            Next::Answer(EdgeAnswer::Signature(&STALE)),
            Events::of(&[Event::SignatureRejected]),
        ),
        // The client's own doing: 429 whatever the failure mode.
        Ok(ClaimOutcome::QuotaExceeded { retry_after, share }) => (
            Next::Answer(EdgeAnswer::QuotaExceeded {
                retry_after: *retry_after,
            }),
            over_share(*share),
        ),
        Ok(ClaimOutcome::StoreFull { retry_after }) => claim_failure(
            policy.on_store_full,
            EdgeAnswer::StoreFull {
                retry_after: *retry_after,
            },
            Event::StoreFull,
            Degraded::StoreFull,
        ),
        // The store says the request completed, but its answer cannot be trusted: forwarding
        // could run it twice and replaying would send what was planted, so no failure mode.
        Err(e) if !e.allows_failure_mode() => (
            Next::Answer(EdgeAnswer::StoreFailed(e)),
            Events::of(&[Event::RecordCorrupt]),
        ),
        Err(e) => claim_failure(
            policy.on_store_error,
            EdgeAnswer::StoreFailed(e),
            Event::StoreError,
            Degraded::StoreUnavailable,
        ),
    }
}

/// A late delivery with nothing stored to answer it is refused as any stale delivery is.
static STALE: SignatureError = SignatureError::Stale;

/// What a late delivery's look-up ([`Ask::Replay`]) means for it: the answer stored for its key
/// replayed, or the stale-signature refusal it gets without one. Never forwarded, so no failure
/// mode applies: a store that cannot answer is 503 (the sender delivers it again later), a
/// stored answer that fails its seal `record_corrupt`.
#[must_use = "the answer is what the delivery gets"]
pub(crate) fn after_late<'a>(
    outcome: &'a Result<ClaimOutcome, ProtocolError>,
    policy: &'a Policy,
) -> (EdgeAnswer<'a>, Events) {
    match outcome {
        Ok(ClaimOutcome::Replay(stored)) => (
            EdgeAnswer::Replay {
                stored,
                replay_headers: &policy.replay_headers,
            },
            Events::of(&[Event::Replayed]),
        ),
        Ok(_) => (
            EdgeAnswer::Signature(&STALE),
            Events::of(&[Event::SignatureRejected]),
        ),
        Err(e) if !e.allows_failure_mode() => (
            EdgeAnswer::StoreFailed(e),
            Events::of(&[Event::RecordCorrupt]),
        ),
        Err(e) => (EdgeAnswer::StoreFailed(e), Events::of(&[Event::StoreError])),
    }
}

/// No scope source identified the client: guarding the request would put its key in a namespace
/// shared with other clients, so the store-error failure mode applies — this answer (503), or
/// `None`: forward it unguarded.
#[must_use = "the step says what the host must do with the request"]
pub(crate) fn unscoped(policy: &Policy) -> (Option<EdgeAnswer<'static>>, Events) {
    failure(
        policy.on_store_error,
        EdgeAnswer::ScopeUnavailable,
        Event::ScopeUnavailable,
    )
}

/// A token use refused because it was used before.
static ALREADY_USED: TokenError = TokenError::AlreadyUsed;

/// What a one-time token's use (from either store) means for the request: on (`None`), or refused
/// with this answer. A use that cannot be recorded is refused whatever the failure mode: forwarded
/// unrecorded, the token could be used again.
#[must_use = "a request goes on only if its token's use says so"]
pub(crate) fn after_use(
    outcome: &Result<ConsumeOutcome, ProtocolError>,
) -> (Option<EdgeAnswer<'_>>, Events) {
    match outcome {
        Ok(ConsumeOutcome::Consumed) => (None, Events::of(&[Event::TokenConsumed])),
        Ok(ConsumeOutcome::AlreadyUsed) => (
            Some(EdgeAnswer::Token(&ALREADY_USED)),
            Events::of(&[Event::TokenRejected]),
        ),
        Ok(ConsumeOutcome::StoreFull { retry_after }) => (
            Some(EdgeAnswer::StoreFull {
                retry_after: *retry_after,
            }),
            Events::of(&[Event::StoreFull]),
        ),
        Ok(ConsumeOutcome::QuotaExceeded { retry_after, share }) => (
            Some(EdgeAnswer::QuotaExceeded {
                retry_after: *retry_after,
            }),
            over_share(*share),
        ),
        Err(e) => (
            Some(EdgeAnswer::StoreFailed(e)),
            Events::of(&[Event::StoreError]),
        ),
    }
}

/// The events of a share refusal: `QuotaExceeded`, and the share that refused when the store
/// says which.
pub(crate) fn over_share(share: Option<ShareRefusal>) -> Events {
    let reason = share.map(|share| match share.reason {
        ShareReason::Identity => Event::QuotaIdentity,
        ShareReason::Address => Event::QuotaAddress,
        ShareReason::Route => Event::QuotaRoute,
        ShareReason::Bytes => Event::QuotaBytes,
    });
    match reason {
        Some(reason) => Events::of(&[Event::QuotaExceeded, reason]),
        None => Events::of(&[Event::QuotaExceeded]),
    }
}

/// A failure mode applied: answer with the core's 503, or (`None`) forward unguarded.
fn failure(
    mode: FailureMode,
    answer: EdgeAnswer<'_>,
    event: Event,
) -> (Option<EdgeAnswer<'_>>, Events) {
    match mode {
        FailureMode::Reject => (Some(answer), Events::of(&[event])),
        FailureMode::PassThrough => (None, Events::of(&[event, Event::Passthrough])),
    }
}

/// [`failure`] as a claim's next step; passed through, degraded for `why`.
fn claim_failure(
    mode: FailureMode,
    answer: EdgeAnswer<'_>,
    event: Event,
    why: Degraded,
) -> (Next<'_>, Events) {
    let (answer, events) = failure(mode, answer, event);
    (answer.map_or(Next::Unguarded(why), Next::Answer), events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::seal::SealError;
    use crate::record::{StoredBody, StoredResponse};
    use crate::store::StoreError;
    use crate::time::Span;
    use alloc::vec::Vec;

    fn events(e: Events) -> Vec<Event> {
        e.iter().collect()
    }

    #[test]
    fn each_outcome_has_one_step_and_its_events() {
        let policy = Policy::defaults();
        let owner = OwnerToken([1; 16]);
        let claimed = Ok(ClaimOutcome::Forward {
            owner,
            takeover: true,
        });
        let (next, e) = after_claim(&claimed, &policy);
        assert_eq!(
            next,
            Next::Forward {
                owner,
                takeover: true
            }
        );
        assert_eq!(events(e), [Event::Claimed, Event::TakenOver]);

        let stored = StoredResponse {
            status: 201,
            headers: Vec::new(),
            body: StoredBody::Kept(b"{}".to_vec()),
            seal: None,
        };
        let replay = Ok(ClaimOutcome::Replay(stored.clone()));
        let (next, e) = after_claim(&replay, &policy);
        assert!(matches!(next, Next::Answer(EdgeAnswer::Replay { stored: s, .. }) if *s == stored));
        assert_eq!(events(e), [Event::Replayed]);

        // A refusal that names no share is counted as a refusal alone; one that names it (either
        // store's) by the share that refused.
        let quota = Ok(ClaimOutcome::QuotaExceeded {
            retry_after: Span::from_secs(7),
            share: None,
        });
        let (next, e) = after_claim(&quota, &policy);
        assert_eq!(
            next,
            Next::Answer(EdgeAnswer::QuotaExceeded {
                retry_after: Span::from_secs(7)
            })
        );
        assert_eq!(events(e), [Event::QuotaExceeded]);
        for (reason, event) in [
            (ShareReason::Identity, Event::QuotaIdentity),
            (ShareReason::Address, Event::QuotaAddress),
            (ShareReason::Route, Event::QuotaRoute),
            (ShareReason::Bytes, Event::QuotaBytes),
        ] {
            let share = ShareRefusal {
                reason,
                payer: crate::client::payer::PayerTag([9; 8]),
            };
            let quota = Ok(ClaimOutcome::QuotaExceeded {
                retry_after: Span::from_secs(7),
                share: Some(share),
            });
            let (_, e) = after_claim(&quota, &policy);
            assert_eq!(events(e), [Event::QuotaExceeded, event]);
            let used = Ok(ConsumeOutcome::QuotaExceeded {
                retry_after: Span::from_secs(7),
                share: Some(share),
            });
            assert_eq!(events(after_use(&used).1), [Event::QuotaExceeded, event]);
            // Logged with the payer's hashed label, never its identity.
            assert_eq!(
                alloc::format!("{share}"),
                alloc::format!(
                    "429 scope_quota_exceeded: payer 0909090909090909 holds its {} share",
                    reason.name()
                )
            );
        }
    }

    #[test]
    fn an_unscoped_request_gets_the_store_error_failure_mode() {
        let mut policy = Policy::defaults();
        policy.on_store_error = FailureMode::Reject;
        let (next, e) = unscoped(&policy);
        assert_eq!(next, Some(EdgeAnswer::ScopeUnavailable));
        assert_eq!(events(e), [Event::ScopeUnavailable]);
        policy.on_store_error = FailureMode::PassThrough;
        let (next, e) = unscoped(&policy);
        assert_eq!(next, None);
        assert_eq!(events(e), [Event::ScopeUnavailable, Event::Passthrough]);
    }

    #[test]
    fn a_token_use_goes_on_only_once_recorded_whatever_the_failure_modes() {
        let mut policy = Policy::defaults();
        policy.on_store_full = FailureMode::PassThrough;
        policy.on_store_error = FailureMode::PassThrough;
        let (next, e) = after_use(&Ok(ConsumeOutcome::Consumed));
        assert_eq!(next, None);
        assert_eq!(events(e), [Event::TokenConsumed]);
        let (next, e) = after_use(&Ok(ConsumeOutcome::AlreadyUsed));
        assert_eq!(next, Some(EdgeAnswer::Token(&TokenError::AlreadyUsed)));
        assert_eq!(events(e), [Event::TokenRejected]);
        let full = Ok(ConsumeOutcome::StoreFull {
            retry_after: Span::from_secs(3),
        });
        assert!(
            matches!(after_use(&full), (Some(EdgeAnswer::StoreFull { .. }), e) if events(e) == [Event::StoreFull])
        );
        let failed = Err(ProtocolError::Contention);
        assert!(
            matches!(after_use(&failed), (Some(EdgeAnswer::StoreFailed(_)), e) if events(e) == [Event::StoreError])
        );
    }

    #[test]
    fn the_failure_modes_decide_a_full_or_failed_store_but_never_a_tampered_record() {
        let mut policy = Policy::defaults();
        let full = Ok(ClaimOutcome::StoreFull {
            retry_after: Span::from_secs(2),
        });
        let failed = Err(ProtocolError::Store(StoreError::Unavailable("down".into())));
        let tampered = Err(ProtocolError::Tampered(SealError::Missing));

        policy.on_store_full = FailureMode::Reject;
        policy.on_store_error = FailureMode::Reject;
        assert!(matches!(
            after_claim(&full, &policy),
            (Next::Answer(EdgeAnswer::StoreFull { .. }), e) if events(e) == [Event::StoreFull]
        ));
        assert!(matches!(
            after_claim(&failed, &policy),
            (Next::Answer(EdgeAnswer::StoreFailed(_)), e) if events(e) == [Event::StoreError]
        ));

        policy.on_store_full = FailureMode::PassThrough;
        policy.on_store_error = FailureMode::PassThrough;
        let (next, e) = after_claim(&full, &policy);
        assert_eq!(next, Next::Unguarded(Degraded::StoreFull));
        assert_eq!(events(e), [Event::StoreFull, Event::Passthrough]);
        let (next, e) = after_claim(&failed, &policy);
        assert_eq!(next, Next::Unguarded(Degraded::StoreUnavailable));
        assert_eq!(events(e), [Event::StoreError, Event::Passthrough]);
        // Whatever the failure mode: a tampered record is answered, never forwarded.
        let (next, e) = after_claim(&tampered, &policy);
        assert!(matches!(next, Next::Answer(EdgeAnswer::StoreFailed(_))));
        assert_eq!(events(e), [Event::RecordCorrupt]);
    }
}
