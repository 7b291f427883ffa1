//! How a detached exchange ends: the host sent the claimed request itself (an HTTP callout,
//! straight to a cluster or back into the proxy through a re-entry listener) and its answer has
//! come — possibly after the client's stream is gone. The host hands in what only it can read
//! (where the answer came from, its head, its body or that the body was over the relay bound,
//! whether the client still waits, the clock); the core says how the claim is finished, what the
//! client is relayed, how the sequencer's claim is settled, and what to count. Two steps,
//! because what the client is told may depend on what the store did:
//!
//! ```text
//! Ending::new ─► answered / no_answer ─► Finish: the host finishes the claim
//!             ─► finished(what the store did) ─► Ended: the host relays and settles
//! ```
//!
//! The rules are the router path's ([`super::Guarded`]): the record keeps what a [`Capture`]
//! keeps, a callback route's non-2xx is released, only the upstream's own 2xx applies an
//! ordered event, an outcome in doubt keeps both claims until their lease ends, and a client told
//! "no answer" waits as long as [`retry_after`] says.

use super::{Capture, Event, Events};
use crate::answer::order::applied_header;
use crate::answer::{styled, EdgeAnswer, HttpAnswer, RelayProblem};
use crate::client::scope::StorageKey;
use crate::decision::{DoubtCause, ResponseFacts};
use crate::guard::sequencer::settlement;
use crate::headers;
use crate::policy::ProblemStyle;
use crate::policy::{Policy, RouteKind, Via};
use crate::record::OwnerToken;
use crate::store::protocol::FinishOutcome;
use crate::time::{Span, UnixMillis};
use alloc::vec::Vec;

/// How long a client told that its request got no answer should wait before trying again: until
/// the claim's lease ends, counted from the claim when both it and now are known; else the whole
/// lease, the longest the claim can still hold, so a retry that waits that long is never early.
/// One rule for every "no answer" the edge gives.
pub(crate) fn retry_after(
    now: Option<UnixMillis>,
    claimed_at: Option<UnixMillis>,
    lease: Span,
) -> Span {
    match (now, claimed_at) {
        (Some(now), Some(at)) => now.until(at.after(lease)),
        _ => lease,
    }
}

/// Where a detached exchange's answer came from: what only the host can tell, from how its proxy
/// marks the replies it makes itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CalloutOrigin {
    /// The upstream answered: its status, headers and body are the result.
    Upstream,
    /// The proxy answered because the request never reached an upstream (no healthy upstream,
    /// connection refused, or on re-entry a reply of its own routes and filters): a retry is
    /// safe.
    NeverReached,
    /// No answer from the upstream after the request may have been sent.
    InDoubt(DoubtCause),
}

/// A detached exchange whose answer has come: what the host kept with its callout.
#[derive(Debug)]
pub struct Callout<O> {
    pub key: StorageKey,
    pub owner: OwnerToken,
    /// When the claim was made (`None`: the clock could not be read then), for Retry-After.
    pub claimed_at: Option<UnixMillis>,
    /// The route's kind: on a callback route only a 2xx answer settles the key.
    pub kind: RouteKind,
    /// Where the exchange went: on re-entry, the proxy's own replies are the client's answer.
    pub via: Via,
    /// On an ordered route: the resource's claim, settled with the answer.
    pub order: Option<O>,
}

/// Finish the claim with these facts ([`crate::Protocol::finish`]); `cause` says
/// why should they be in doubt. What the store did goes to [`Ending::finished`].
#[derive(Debug, PartialEq, Eq)]
#[must_use = "the host finishes the claim"]
pub struct Finish {
    pub key: StorageKey,
    pub owner: OwnerToken,
    pub facts: ResponseFacts,
    pub cause: DoubtCause,
}

/// A detached exchange's answer, before it is read.
#[derive(Debug)]
pub struct Ending<O> {
    callout: Callout<O>,
    lease: Span,
    max_relay_body: u64,
    /// How the answers the edge makes here write their problems (`problems`).
    problems: ProblemStyle,
    events: Events,
    /// What the client is relayed once the claim is finished (until the answer is read: none).
    relay: Relay,
}

/// What the client will be relayed, once the store has finished the claim. The relayed headers
/// are read only then, from the answer the host still holds.
#[derive(Debug)]
enum Relay {
    /// No whole answer: "not sent" if the store released the key, else "no answer".
    Missing,
    /// The request never reached an upstream: on re-entry the proxy's own reply (its status and
    /// body), else "not sent".
    NeverReached(Option<(u16, Vec<u8>)>),
    /// The upstream's own answer: its status, its body (`None`: over the relay bound); `in_doubt`:
    /// what the record could keep of it was not whole.
    Upstream {
        status: u16,
        body: Option<Vec<u8>>,
        in_doubt: bool,
    },
}

/// How the exchange ended, for the host to carry out.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "the host carries out the ending"]
pub struct Ended<O> {
    /// What the client gets if its stream still exists.
    pub answer: HttpAnswer,
    /// The upstream's own answer (relayed with or without its body), else one the edge made.
    pub from_upstream: bool,
    /// The sequencer's claim settled: the event applied, or not. A claim the exchange held
    /// that is not here is dropped unsettled: the outcome is in doubt, so it holds until its
    /// lease ends.
    pub settle: Option<(O, bool)>,
    pub events: Events,
}

impl<O> Ending<O> {
    /// The answer to `callout` has come; `client_waits`: the client's stream still exists.
    pub fn new(callout: Callout<O>, policy: &Policy, client_waits: bool) -> Self {
        let events = if client_waits {
            Events::default()
        } else {
            Events::of(&[Event::DetachedClientGone])
        };
        Ending {
            callout,
            lease: policy.lease,
            max_relay_body: policy.max_relay_body,
            problems: policy.problems.clone(),
            events,
            relay: Relay::Missing,
        }
    }

    /// The claim's key (for the host's log).
    pub fn key(&self) -> StorageKey {
        self.callout.key
    }

    /// Where the exchange went: the host classifies its answer by it.
    pub fn via(&self) -> Via {
        self.callout.via
    }

    /// Whether a body of `size` bytes is read and relayed whole (within `upstream.max_body`);
    /// else the host leaves it unread and hands in `None`.
    pub fn relays_whole(&self, size: usize) -> bool {
        u64::try_from(size).is_ok_and(|size| size <= self.max_relay_body)
    }

    /// No whole answer the edge can relay or store: the call failed without one, or a part of it
    /// (its head, a valid `:status`, its body) could not be read. The upstream may have acted:
    /// in doubt, for `cause`.
    pub fn no_answer(&mut self, cause: DoubtCause) -> Finish {
        self.finish(ResponseFacts::InDoubt, cause, Relay::Missing)
    }

    /// The answer, read: where it came from, its head as the record keeps it ([`Capture::head`]),
    /// and its body — `None` when it was over the relay bound
    /// ([`Ending::relays_whole`]) and left unread. A head without a valid `:status` is no answer.
    pub fn answered(
        &mut self,
        origin: CalloutOrigin,
        mut capture: Capture,
        body: Option<Vec<u8>>,
    ) -> Finish {
        let Some(status) = capture.status() else {
            return self.no_answer(DoubtCause::Other);
        };
        match origin {
            CalloutOrigin::InDoubt(cause) => self.no_answer(cause),
            CalloutOrigin::NeverReached => {
                // On re-entry this is the proxy's own reply on the inner pass (a direct response,
                // an authorization denial, a rate limit): the client gets exactly what the same
                // request without a key gets. The direct path's never-reached replies are the
                // async client's and say nothing a client can use.
                let own = match (self.callout.via, body) {
                    (Via::Reentry, Some(body)) => Some((status, body)),
                    _ => None,
                };
                let facts = ResponseFacts::NeverReached;
                self.finish(facts, DoubtCause::Other, Relay::NeverReached(own))
            }
            CalloutOrigin::Upstream => {
                match &body {
                    Some(body) if capture.wants(body.len() as u64) => capture.chunk(Some(body)),
                    Some(_) => {}
                    None => capture.pass(),
                }
                // On a callback route only a 2xx settles the key; else released.
                let facts = self.callout.kind.screen(capture.facts());
                let in_doubt = facts == ResponseFacts::InDoubt;
                if body.is_none() {
                    self.count(Event::RelayTooLarge);
                }
                let relay = Relay::Upstream {
                    status,
                    body,
                    in_doubt,
                };
                self.finish(facts, DoubtCause::Other, relay)
            }
        }
    }

    fn count(&mut self, event: Event) {
        // At most two events per ending (the client gone, the body over the bound).
        if let Some(events) = self.events.with(event) {
            self.events = events;
        }
    }

    /// The claim's finish; `relay` waits for what the store did with it.
    fn finish(&mut self, facts: ResponseFacts, cause: DoubtCause, relay: Relay) -> Finish {
        self.relay = relay;
        Finish {
            key: self.callout.key,
            owner: self.callout.owner,
            facts,
            cause,
        }
    }

    /// The store finished the claim of the last [`Finish`] with `outcome` (`None`: it failed);
    /// `answer_headers` are the answer's (none without one), for what is relayed of them; `now`
    /// reads the clock, only for a "no answer" whose Retry-After counts from the claim. Without
    /// an answer handed in first, the exchange is taken as having none.
    pub fn finished<'h>(
        self,
        outcome: Option<FinishOutcome>,
        answer_headers: impl IntoIterator<Item = (&'h str, &'h [u8])>,
        now: impl FnOnce() -> Option<UnixMillis>,
    ) -> Ended<O> {
        let (mut answer, from_upstream, in_doubt, upstream_status) = match self.relay {
            // Released means the store found it never sent: nothing can be running.
            Relay::Missing if outcome == Some(FinishOutcome::Released) => {
                let answer = styled(&EdgeAnswer::Relay(RelayProblem::NotSent), &self.problems);
                (answer, false, false, None)
            }
            Relay::Missing => {
                let retry_after = retry_after(now(), self.callout.claimed_at, self.lease);
                let no_answer = EdgeAnswer::Relay(RelayProblem::NoAnswer { retry_after });
                let answer = styled(&no_answer, &self.problems);
                (answer, false, true, None)
            }
            Relay::NeverReached(Some((status, body))) => {
                let headers = headers::relayed(answer_headers);
                let answer = HttpAnswer {
                    status,
                    headers,
                    body,
                };
                (answer, false, false, None)
            }
            Relay::NeverReached(None) => {
                let answer = styled(&EdgeAnswer::Relay(RelayProblem::NotSent), &self.problems);
                (answer, false, false, None)
            }
            Relay::Upstream {
                status,
                body,
                in_doubt,
            } => {
                let headers = headers::relayed(answer_headers);
                let answer = match body {
                    Some(body) => HttpAnswer {
                        status,
                        headers,
                        body,
                    },
                    // Over `upstream.max_body`: the upstream's status and headers, without the
                    // body and saying so — a success is never turned into a 5xx.
                    None => {
                        let without = EdgeAnswer::RelayWithoutBody {
                            status,
                            headers: &headers,
                        };
                        styled(&without, &self.problems)
                    }
                };
                (answer, true, in_doubt, Some(status))
            }
        };
        // Only the upstream's own 2xx applied the event; a reply the proxy made leaves the
        // resource's state and frees it; an outcome in doubt keeps it claimed until its lease
        // ends.
        let settle = match (self.callout.order, settlement(in_doubt, upstream_status)) {
            (Some(claim), Some(applied)) => Some((claim, applied)),
            _ => None,
        };
        if from_upstream && matches!(settle, Some((_, true))) {
            answer.headers.push(applied_header());
        }
        Ended {
            answer,
            from_upstream,
            settle,
            events: self.events,
        }
    }
}

#[cfg(test)]
mod tests;
