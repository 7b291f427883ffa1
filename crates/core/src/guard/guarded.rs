//! One guarded request's life from the end of its headers to its settlement, as one sans-IO
//! state machine in quinn-proto's shape.
//!
//! The host hands in what happened: its body, chunk by chunk ([`Guarded::body_wants`],
//! [`Guarded::body_chunk`], [`Guarded::body_end`]: `taking`), the store's answer to a question
//! the machine asked ([`Guarded::answered`]), the sequencer's decision
//! ([`Guarded::ordered`]), whether a detached exchange went out ([`Guarded::sent`]), the
//! upstream's head, body and end ([`Guarded::upstream_head`], [`Guarded::upstream_chunk`],
//! [`Guarded::ended`]), a clock it could not read ([`Guarded::clock_failed`]). Then it takes the
//! [`Action`]s to carry out, in order, with [`Guarded::poll`], and the [`Event`]s to count with
//! [`Guarded::events`] — quinn-proto's `handle` / `poll` shape, so nothing is moved around but
//! one action at a time. The host decides nothing: whether a store is local (it answers at once)
//! or remote (it answers later, the stream paused meanwhile) is the only thing that differs
//! between hosts, and the machine cannot tell.
//!
//! ```text
//! headers ─► Taking (the body) ─┬─ refused (413, 503, 400, …) ─────────────────────────────► Over
//!                               ▼            ┌──── Answer (409, replay, 422, 429, 503, …) ──► Over
//!                          Claiming ──► Ordering (the guard) ──► Using (the token) ──► Forwarded ──► Over (Finish)
//!                               │            └─────────────────────┴──► Sending (detached) ──► Over
//!                               └── a step refuses: Finish (released) + Answer ───────────► Over
//! no key ─────────────────────► Using (the token) ──► Over (Pass)
//! ```
//!
//! Each state waits for one kind of input; any other is said ([`Warning::OutOfOrder`]) and
//! changes nothing.
//!
//! `O` is the host's claim on an ordered resource (settled when the upstream answers), `H` the
//! request a detached route keeps to send itself; the machine carries both without looking inside.

use super::{
    after_claim, after_late, after_use, Capture, Course, Event, Events, Next, Stage, VerifiedToken,
};
use crate::answer::{styled, Degraded, EdgeAnswer, HttpAnswer, RelayProblem};
use crate::client::scope::StorageKey;
use crate::decision::{DoubtCause, ResponseFacts};
use crate::guard::sequencer::Ordered;
use crate::policy::{Policy, ProblemStyle, RouteKind};
use crate::record::OwnerToken;
use crate::request::budget::Reservation;
use crate::store::protocol::{ClaimOutcome, ConsumeOutcome, ProtocolError};
use crate::store::share::Payers;
use crate::time::Span;
use alloc::boxed::Box;
use alloc::vec::Vec;

mod degraded;
mod forwarded;
mod io;
mod queue;
mod taking;
mod waiting;

pub use io::Action;
pub use io::Ask;
pub use io::Claim;
pub use io::Kept;
pub use io::Reply;
pub use io::Ruling;
pub use io::Sent;
pub use io::Warning;
use queue::Queue;
pub(crate) use taking::Intaking;

/// Reserves a won claim's detached exchange's answer (`upstream.max_body`) from the relay
/// budget, before its course (an ordering decision, a token's use) and before anything is sent;
/// `None`: it does not fit the VM's budget or its peer's part (the kept request is dropped).
fn relay<H>(mut kept: Kept<H>, policy: &Policy) -> Option<Kept<H>> {
    let fits = kept
        .relay
        .grow(policy.max_relay_body, policy.relay_limits());
    fits.then_some(kept)
}

/// Where the request goes once its course is run.
#[derive(Debug)]
enum After<H> {
    /// Out as the owner of the claim on `key`: on the router path, or (`held`) detached.
    Owner {
        key: StorageKey,
        owner: OwnerToken,
        held: Option<Kept<H>>,
    },
    /// Out without idempotency; `event`: what to count then (`Passthrough` for an optional key
    /// not given; nothing when a failure mode already counted it).
    Pass { event: Option<Event> },
}

#[derive(Debug)]
enum State<O, H> {
    /// The body is being taken in; the claim is made at its end ([`taking`]).
    Taking(Box<taking::Taking<H>>),
    /// A late delivery's key is looked up: its stored answer, or the stale refusal.
    Looking { key: StorageKey },
    /// The claim is asked of the store.
    Claiming {
        key: StorageKey,
        course: Course<Ordered>,
        held: Option<Kept<H>>,
    },
    /// A duplicate of a request in flight, parked until the first's answer ([`waiting`]).
    Waiting(Box<waiting::Parked<H>>),
    /// A parked duplicate woken: its claim asked of the store again.
    Rechecking(Box<waiting::Parked<H>>),
    /// On its course, waiting for the sequencer's decision on its event.
    Ordering {
        course: Course<Ordered>,
        after: After<H>,
    },
    /// On its course, waiting for the store to record its token's use.
    Using {
        course: Course<Ordered>,
        after: After<H>,
        order: Option<O>,
    },
    /// A detached exchange is being sent.
    Sending { key: StorageKey, owner: OwnerToken },
    /// Forwarded on the router path as the key's owner.
    Forwarded {
        key: StorageKey,
        owner: OwnerToken,
        order: Option<O>,
        capture: Option<Capture>,
    },
    /// Nothing more for this request: answered, passed, handed to its exchange, or settled.
    Over,
}

/// One request's life, from its claim (or its lack of a key) to its settlement.
#[derive(Debug)]
pub struct Guarded<O, H> {
    kind: RouteKind,
    payers: Payers,
    lease: Span,
    state: State<O, H>,
    queue: Queue<O, H>,
    /// How long a duplicate of a request in flight waits for its answer (`in_flight.wait`).
    wait: Option<Span>,
    /// On a route that waits: the claim asked, to ask it again once parked.
    reask: Option<Box<Claim>>,
    /// The client is gone ([`Guarded::gone`]): nothing is sent or answered for it any more.
    gone: bool,
    /// How the answers this request gets from the edge write their problems (`problems`).
    problems: ProblemStyle,
    /// Let on unprotected because the store could not decide ([`Guarded::degraded`]).
    degraded: Option<Degraded>,
}

impl<O, H> Guarded<O, H> {
    fn new(policy: &Policy, kind: RouteKind, payers: Payers, state: State<O, H>) -> Self {
        Guarded {
            problems: policy.problems.clone(),
            kind,
            payers,
            lease: policy.lease,
            state,
            queue: Queue {
                actions: [None, None, None, None],
                next: 0,
                given: 0,
                events: Events::default(),
                overflow: false,
            },
            wait: None,
            reask: None,
            gone: false,
            degraded: None,
        }
    }

    /// A request whose key is claimed now, on a route of `kind`: its first action asks the
    /// store. Once claimed, it takes `course` (the event's order, the token's use), then goes
    /// out — detached if the route keeps the request (`held`, with the exchange's empty part of
    /// the relay budget), else on the router path.
    pub fn claim(
        policy: &Policy,
        kind: RouteKind,
        claim: Claim,
        course: Course<Ordered>,
        held: Option<(H, Reservation)>,
    ) -> Self {
        let held = held.map(|(held, relay)| Kept {
            held,
            body: Vec::new(),
            reserved: None,
            relay,
        });
        let state = State::Claiming {
            key: claim.key,
            course,
            held,
        };
        let mut guarded = Guarded::new(policy, kind, claim.payers, state);
        guarded.queue.push(Action::Ask(Ask::Claim(claim)));
        guarded
    }

    /// A request with no key, on a route where the key is optional: out without idempotency,
    /// once its token (if the route requires one) is used.
    pub fn unguarded(policy: &Policy, token: Option<VerifiedToken>, payers: Payers) -> Self {
        let mut guarded = Guarded::new(policy, RouteKind::Api, payers, State::Over);
        // Nothing is claimed, so there is no lease to wait out.
        guarded.lease = Span::from_secs(0);
        let after = After::Pass {
            event: Some(Event::Passthrough),
        };
        guarded.go(Course::unguarded(token), after, None);
        guarded
    }

    /// An answer the edge makes for this request, its problem written in the policy's style.
    fn edge_answer(&self, edge: &EdgeAnswer<'_>) -> HttpAnswer {
        styled(edge, &self.problems)
    }

    /// The next action to carry out, in order; `None` once all are taken.
    pub fn poll(&mut self) -> Option<Action<O, H>> {
        self.queue.pop()
    }

    /// The events to count since the last call.
    pub fn events(&mut self) -> Events {
        core::mem::take(&mut self.queue.events)
    }

    /// Whether every action and event given so far was kept (always, by the paths the machine
    /// has: host-tests' `guard` exploration checks it after every input of every path).
    pub fn is_whole(&self) -> bool {
        !self.queue.overflow
    }

    /// Whether the host still has something to hand in besides a callout's answer: the body (being
    /// taken in) or the upstream's answer (forwarded on the router path).
    pub fn expects_more(&self) -> bool {
        matches!(self.state, State::Taking(_) | State::Forwarded { .. })
    }

    /// Whether the request is forwarded on the router path and its answer still awaited.
    pub fn is_forwarded(&self) -> bool {
        matches!(self.state, State::Forwarded { .. })
    }

    /// The key this request claims or holds, for the host's log and a remote store's answer.
    pub fn key(&self) -> Option<StorageKey> {
        match &self.state {
            State::Claiming { key, .. }
            | State::Looking { key }
            | State::Sending { key, .. }
            | State::Forwarded { key, .. }
            | State::Ordering {
                after: After::Owner { key, .. },
                ..
            }
            | State::Using {
                after: After::Owner { key, .. },
                ..
            } => Some(*key),
            State::Waiting(parked) | State::Rechecking(parked) => Some(parked.claim.key),
            State::Taking(_) | State::Ordering { .. } | State::Using { .. } | State::Over => None,
        }
    }

    /// The store answered the question the last [`Action::Ask`] asked.
    pub fn answered(&mut self, reply: Reply, policy: &Policy) {
        match (core::mem::replace(&mut self.state, State::Over), reply) {
            (State::Claiming { key, course, held }, Reply::Claim(outcome)) => {
                // On a route that waits, the same payload in flight parks the request.
                if let (Ok(ClaimOutcome::Conflict { retry_after }), Some(claim)) =
                    (&outcome, self.reask.take())
                {
                    return self.park(*claim, course, held, *retry_after);
                }
                self.claimed(key, &outcome, course, held, policy)
            }
            (State::Rechecking(parked), Reply::Claim(outcome)) => {
                if let Ok(ClaimOutcome::Conflict { retry_after }) = &outcome {
                    return self.still_in_flight(parked, *retry_after);
                }
                let waiting::Parked {
                    claim,
                    course,
                    held,
                    ..
                } = *parked;
                self.claimed(claim.key, &outcome, course, held, policy)
            }
            (State::Looking { key }, Reply::Claim(outcome)) => self.looked(key, &outcome, policy),
            (
                State::Using {
                    course,
                    after,
                    order,
                },
                Reply::Consume(outcome),
            ) => {
                let (refusal, events) = after_use(&outcome);
                self.queue.count(events);
                if let Ok(ConsumeOutcome::QuotaExceeded {
                    share: Some(share), ..
                }) = &outcome
                {
                    self.warn(Warning::OverShare(*share));
                }
                let Some(refusal) = refusal else {
                    return self.go(course, after, order);
                };
                if let EdgeAnswer::StoreFailed(e) = &refusal {
                    self.warn(Warning::StoreFailed((*e).clone()));
                }
                let http = self.edge_answer(&refusal);
                self.not_forwarded(after, order);
                self.reply(http);
            }
            (state, _) => self.out_of_order(state, "a store answer"),
        }
    }

    /// The sequencer decided the event the last [`Action::Sequence`] asked about.
    pub fn ordered(&mut self, decision: Ruling<O>) {
        match core::mem::replace(&mut self.state, State::Over) {
            State::Ordering { course, after } => match decision {
                Ruling::Forward(order) => self.go(course, after, order),
                Ruling::Answer(http) => {
                    self.not_forwarded(after, None);
                    self.reply(http);
                }
            },
            state => self.out_of_order(state, "an ordering decision"),
        }
    }

    /// Whether the detached exchange of the last [`Action::Detach`] went out.
    pub fn sent(&mut self, sent: Sent<O>) {
        let (key, owner) = match core::mem::replace(&mut self.state, State::Over) {
            State::Sending { key, owner } => (key, owner),
            state => return self.out_of_order(state, "a detached exchange"),
        };
        match sent {
            Sent::Waiting => {}
            Sent::Failed { order } => {
                self.finish(key, owner, ResponseFacts::NeverReached, DoubtCause::Other);
                self.settle_order(order, false);
                let problem = EdgeAnswer::Relay(RelayProblem::NotSent);
                self.reply(self.edge_answer(&problem));
            }
            // The claim holds until its lease ends, so a retry cannot run the request twice.
            Sent::Lost => {
                self.finish(key, owner, ResponseFacts::InDoubt, DoubtCause::Other);
                // Sent just now, with no clock reading: the whole lease (the one rule).
                let retry_after = super::retry_after(None, None, self.lease);
                let problem = EdgeAnswer::Relay(RelayProblem::NoAnswer { retry_after });
                self.reply(self.edge_answer(&problem));
            }
        }
    }

    /// The client is gone (its stream reset or done before its answer). Whatever the request
    /// waits for — a store answer, the sequencer's decision, whether its exchange went
    /// out — is still taken, but the request no longer goes on: a claim it wins or holds is
    /// released (the upstream never saw it), a resource claim given back, and nothing is
    /// answered. A body being taken in is dropped (nothing was claimed yet). A request already
    /// out is settled by its end ([`Guarded::ended`]), a detached exchange by its answer.
    pub fn gone(&mut self) {
        self.gone = true;
        // A parked duplicate holds nothing in the store: it stops waiting at once.
        if let State::Taking(_) | State::Waiting(_) = self.state {
            self.state = State::Over;
        }
    }

    /// Whether the request waits for a store answer, an ordering decision or a send while its
    /// client is gone: the host keeps it until that comes, then carries out what it gives back.
    pub fn is_orphaned(&self) -> bool {
        self.gone
            && matches!(
                self.state,
                State::Claiming { .. }
                    | State::Rechecking(_)
                    | State::Looking { .. }
                    | State::Ordering { .. }
                    | State::Using { .. }
                    | State::Sending { .. }
            )
    }

    /// The host could not read the clock a local store question needs: answered 503, and the
    /// claim the request holds given back (nothing was sent).
    pub fn clock_failed(&mut self) {
        match core::mem::replace(&mut self.state, State::Over) {
            State::Claiming { .. } | State::Rechecking(_) | State::Looking { .. } => {}
            State::Using { after, order, .. } => self.not_forwarded(after, order),
            // Only a store question needs the clock: a request past them has no use for it.
            state => return self.out_of_order(state, "a clock failure"),
        }
        let http = self.edge_answer(&EdgeAnswer::ClockUnavailable);
        self.reply(http);
    }

    fn claimed(
        &mut self,
        key: StorageKey,
        outcome: &Result<ClaimOutcome, ProtocolError>,
        course: Course<Ordered>,
        held: Option<Kept<H>>,
        policy: &Policy,
    ) {
        let (next, events) = after_claim(outcome, policy);
        self.queue.count(events);
        match next {
            Next::Forward { owner, .. } => {
                let held = match held.map(|kept| relay(kept, policy)) {
                    Some(None) => {
                        // Nothing was sent: the claim is released, so the retry runs.
                        self.finish(key, owner, ResponseFacts::NeverReached, DoubtCause::Other);
                        self.queue.count(Events::of(&[Event::RelayBudgetExceeded]));
                        return self.reply(self.edge_answer(&EdgeAnswer::RelayBudgetExceeded));
                    }
                    Some(kept) => kept,
                    None => None,
                };
                let after = After::Owner { key, owner, held };
                self.go(course, after, None);
            }
            Next::Answer(edge) => {
                self.warn_failed(key, &edge);
                if let Ok(ClaimOutcome::QuotaExceeded {
                    share: Some(share), ..
                }) = outcome
                {
                    self.warn(Warning::OverShare(*share));
                }
                self.reply(self.edge_answer(&edge));
            }
            Next::Unguarded(why) => {
                if let Err(e) = outcome {
                    self.warn(Warning::StoreFailed(e.clone()));
                }
                self.degraded = Some(why);
                // Nothing is claimed, so no event to order: only the token is still used.
                let after = After::Pass { event: None };
                self.go(Course::unguarded(course.into_token()), after, None);
            }
        }
    }

    /// A late delivery's look-up came back: it holds nothing, so it only answers.
    fn looked(
        &mut self,
        key: StorageKey,
        outcome: &Result<ClaimOutcome, ProtocolError>,
        policy: &Policy,
    ) {
        let (edge, events) = after_late(outcome, policy);
        self.queue.count(events);
        self.warn_failed(key, &edge);
        self.reply(self.edge_answer(&edge));
    }

    /// The warning an answer from a failed store carries: a record that failed its checks is
    /// logged as corrupt (no failure mode applies to it), any other failure as a store failure.
    fn warn_failed(&mut self, key: StorageKey, edge: &EdgeAnswer) {
        match edge {
            EdgeAnswer::StoreFailed(e) if !e.allows_failure_mode() => {
                self.warn(Warning::RecordCorrupt {
                    key,
                    error: (*e).clone(),
                })
            }
            EdgeAnswer::StoreFailed(e) => self.warn(Warning::StoreFailed((*e).clone())),
            _ => {}
        }
    }

    /// Takes the course's next step — none once the client is gone: what the request holds is
    /// given back instead.
    fn go(&mut self, mut course: Course<Ordered>, after: After<H>, order: Option<O>) {
        if self.gone {
            self.state = State::Over;
            return self.not_forwarded(after, order);
        }
        match course.next_stage() {
            Stage::Order(ordered) => {
                let After::Owner { key, owner, .. } = &after else {
                    // `Course::unguarded` never orders; an unowned request has nothing to order.
                    return self.go(course, after, order);
                };
                let action = Action::Sequence {
                    ordered,
                    key: *key,
                    owner: *owner,
                    payers: self.payers,
                };
                // The event is the course's first step: no resource is claimed yet.
                self.state = State::Ordering { course, after };
                self.queue.push(action);
            }
            Stage::UseToken(token) => {
                self.state = State::Using {
                    course,
                    after,
                    order,
                };
                self.queue.push(Action::Ask(Ask::Consume {
                    use_key: token.use_key,
                    expires_at: token.expires_at,
                    payers: self.payers,
                }));
            }
            Stage::Go => match after {
                After::Owner {
                    key,
                    owner,
                    held: Some(held),
                } => {
                    self.state = State::Sending { key, owner };
                    self.queue.push(Action::Detach {
                        key,
                        owner,
                        held,
                        order,
                    });
                }
                After::Owner {
                    key,
                    owner,
                    held: None,
                } => {
                    self.state = State::Forwarded {
                        key,
                        owner,
                        order,
                        capture: None,
                    };
                    self.queue.push(Action::Forward);
                }
                After::Pass { event } => {
                    self.state = State::Over;
                    if let Some(event) = event {
                        self.queue.count(Events::of(&[event]));
                    }
                    self.queue.push(Action::Pass);
                }
            },
        }
    }

    /// Finishes the claim, its facts screened by the route's kind (a callback route keeps only a
    /// 2xx answer).
    fn finish(
        &mut self,
        key: StorageKey,
        owner: OwnerToken,
        facts: ResponseFacts,
        cause: DoubtCause,
    ) {
        let facts = self.kind.screen(facts);
        self.queue.push(Action::Finish {
            key,
            owner,
            facts,
            cause,
        });
    }

    /// A step refused the request before it was sent: the upstream never saw it, so the claim it
    /// holds is released and its resource claim given back.
    fn not_forwarded(&mut self, after: After<H>, order: Option<O>) {
        if let After::Owner { key, owner, .. } = after {
            self.finish(key, owner, ResponseFacts::NeverReached, DoubtCause::Other);
        }
        self.settle_order(order, false);
    }

    fn settle_order(&mut self, order: Option<O>, applied: bool) {
        if let Some(claim) = order {
            self.queue.push(Action::SettleResource { claim, applied });
        }
    }

    /// Answers the client, unless it is gone.
    fn reply(&mut self, http: HttpAnswer) {
        if !self.gone {
            self.queue.push(Action::Answer(http));
        }
    }

    fn warn(&mut self, warning: Warning) {
        self.queue.push(Action::Warn(warning));
    }

    fn out_of_order(&mut self, state: State<O, H>, what: &'static str) {
        self.state = state;
        self.warn(Warning::OutOfOrder(what));
    }
}

#[cfg(test)]
mod tests;
