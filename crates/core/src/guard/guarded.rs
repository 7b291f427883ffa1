//! One request's life from the moment the whole of it is known — its key's claim, or no key at
//! all — to its settlement, as one sans-IO state machine in quinn-proto's shape (issue 22, item 1).
//!
//! The host hands in what happened: the store's answer to a question the machine asked
//! ([`Guarded::answered`]), the ordering guard's decision ([`Guarded::ordered`]), whether a
//! detached exchange went out ([`Guarded::sent`]), the upstream's head, body and end
//! ([`Guarded::upstream_head`], [`Guarded::upstream_chunk`], [`Guarded::ended`]), a clock it could
//! not read ([`Guarded::clock_failed`]). Each gives back an [`Out`]: the [`Action`]s to carry out,
//! in order, and the [`Event`]s to count. The host decides nothing: whether a store is local (it
//! answers at once) or remote (it answers later, the stream paused meanwhile) is the only thing
//! that differs between hosts, and the machine cannot tell.
//!
//! ```text
//!            ┌───────────── Answer (409, replay, 422, 429, 503, …) ─────────────┐
//! claim ──► Claiming ──► Ordering (the guard's decision) ──► Using (the token) ──► Forwarded ──► Over (Finish)
//!                          │          └─────────────────────────┴──► Sending (detached) ──► Over
//!                          └── a step refuses: Finish (released) + Answer ─────────────► Over
//! no key ─────────────► Using (the token) ──► Over (Pass)
//! ```
//!
//! Each state waits for one kind of input; any other is said ([`Warning::OutOfOrder`]) and
//! changes nothing.
//!
//! `O` is the host's claim on an ordered resource (settled when the upstream answers), `H` the
//! request a detached route keeps to send itself; the machine carries both without looking inside.

use super::{after_claim, after_use, Capture, Course, Event, Events, Next, Step, VerifiedToken};
use crate::answer::{answer, EdgeAnswer, HttpAnswer, RelayProblem};
use crate::decision::{DoubtCause, ResponseFacts};
use crate::fingerprint::Fingerprint;
use crate::order::{applies, Ordered};
use crate::policy::{Policy, RouteKind};
use crate::protocol::{ClaimOutcome, ConsumeOutcome, ProtocolError};
use crate::record::OwnerToken;
use crate::scope::StorageKey;
use crate::share::Payers;
use crate::time::{Span, UnixMillis};
use core::fmt;

/// A question for the store (the host's local store answers at once, a remote one later); its
/// answer comes back through [`Guarded::answered`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ask {
    /// Claim the key for this request ([`crate::protocol::Engine::claim`]).
    Claim(Claim),
    /// Use the request's one-time token, once ([`crate::protocol::Engine::consume`]).
    Consume {
        use_key: StorageKey,
        expires_at: UnixMillis,
        payers: Payers,
    },
}

/// A claim on a request's key, as [`crate::protocol::Engine::claim`] takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    pub key: StorageKey,
    pub fingerprint: Fingerprint,
    /// The host's fresh owner token for this request.
    pub owner: OwnerToken,
    pub payers: Payers,
}

/// The store's answer to an [`Ask`], of the same kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Claim(Result<ClaimOutcome, ProtocolError>),
    Consume(Result<ConsumeOutcome, ProtocolError>),
}

/// What the ordering guard decided for the request's event (the host asks it for
/// [`Action::Order`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision<O> {
    /// Let the request on; with the resource's claim, settled when the upstream answers.
    Forward(Option<O>),
    /// Answer it at the edge: nothing ran, so the delivery id's claim is released.
    Answer(HttpAnswer),
}

/// Whether a detached exchange went out ([`Action::Detach`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent<O> {
    /// It went out and its answer will find the exchange: the exchange settles the claim.
    Waiting,
    /// The host could not send it: the upstream never saw it. Its resource claim comes back.
    Failed { order: Option<O> },
    /// It went out, but its answer would find nothing to settle it with: in doubt.
    Lost,
}

/// Something for the host to do, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "the host carries out every action"]
pub enum Action<O, H> {
    /// Ask the store; the request waits for the [`Answer`].
    Ask(Ask),
    /// Ask the ordering guard about the event this claim delivers; the request waits for the
    /// [`Decision`].
    Order {
        ordered: Ordered,
        key: StorageKey,
        owner: OwnerToken,
    },
    /// Let the request go on to the upstream as the key's owner; its answer comes back through
    /// [`Guarded::upstream_head`].
    Forward,
    /// Let the request go on without idempotency: no claim is held.
    Pass,
    /// Send the kept request on a detached exchange that settles the claim itself; report
    /// through [`Guarded::sent`].
    Detach {
        key: StorageKey,
        owner: OwnerToken,
        held: H,
        order: Option<O>,
    },
    /// Answer the client with this: the request is over.
    Answer(HttpAnswer),
    /// Finish the claim with these facts ([`crate::protocol::Engine::finish`]); `cause` says why
    /// should they be in doubt.
    Finish {
        key: StorageKey,
        owner: OwnerToken,
        facts: ResponseFacts,
        cause: DoubtCause,
    },
    /// Settle the ordering guard's claim on the resource: the event applied, or not.
    SettleOrder { claim: O, applied: bool },
    /// Mark the upstream's answer as the one that applied the event (`idemgate-order: applied`).
    MarkApplied,
    /// Log this at warning level.
    Warn(Warning),
}

/// A warning for the host's log.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// The store could not decide.
    StoreFailed(ProtocolError),
    /// A stored answer for `key` failed its seal: never replayed.
    RecordCorrupt {
        key: StorageKey,
        error: ProtocolError,
    },
    /// The upstream's answer could not be read whole: in doubt.
    AnswerUnreadable,
    /// The host handed in something the request was not waiting for (a host bug): ignored.
    OutOfOrder(&'static str),
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::StoreFailed(e) => write!(f, "store failed: {e}"),
            Warning::RecordCorrupt { key, error } => write!(
                f,
                "key {}: {error}; not replayed (502 record_corrupt)",
                key.log_label()
            ),
            Warning::AnswerUnreadable => f.write_str(
                "the upstream answer could not be read whole (no valid :status, or a part the host did not hand over)",
            ),
            Warning::OutOfOrder(what) => write!(f, "{what} came while the request did not wait for it"),
        }
    }
}

/// What one input gave: at most four actions, in order, and the events to count. An action the
/// request waits on ([`Action::Ask`], [`Action::Order`], [`Action::Detach`]) is always the last:
/// its answer is the next input.
#[derive(Debug)]
#[must_use = "the host carries out every action and counts every event"]
pub struct Out<O, H> {
    actions: [Option<Action<O, H>>; 4],
    /// How many actions were given, so an `Out` that could not hold them all says so.
    given: u8,
    events: Events,
}

impl<O, H> Out<O, H> {
    fn new(events: Events) -> Self {
        Out {
            actions: [None, None, None, None],
            given: 0,
            events,
        }
    }

    fn one(action: Action<O, H>) -> Self {
        Out::new(Events::default()).then(action)
    }

    /// Adds an action after those already given. Every path gives at most four (see the test
    /// `no_input_gives_more_actions_than_an_out_holds`).
    fn then(mut self, action: Action<O, H>) -> Self {
        if let Some(slot) = self.actions.iter_mut().find(|slot| slot.is_none()) {
            *slot = Some(action);
        }
        self.given = self.given.saturating_add(1);
        self
    }

    /// Whether every action given is here (always, by the paths the machine has: host-tests'
    /// `guard` exploration checks it after every input of every path).
    pub fn is_whole(&self) -> bool {
        usize::from(self.given) <= self.actions.len()
    }

    /// The events to count.
    pub fn events(&self) -> Events {
        self.events
    }
}

impl<O, H> IntoIterator for Out<O, H> {
    type Item = Action<O, H>;
    type IntoIter = core::iter::Flatten<core::array::IntoIter<Option<Action<O, H>>, 4>>;

    fn into_iter(self) -> Self::IntoIter {
        self.actions.into_iter().flatten()
    }
}

/// Where the request goes once its course is run.
#[derive(Debug)]
enum After<H> {
    /// Out as the owner of the claim on `key`: on the router path, or (`held`) detached.
    Owner {
        key: StorageKey,
        owner: OwnerToken,
        held: Option<H>,
    },
    /// Out without idempotency; `event`: what to count then (`Passthrough` for an optional key
    /// not given; nothing when a failure mode already counted it).
    Pass { event: Option<Event> },
}

#[derive(Debug)]
enum State<O, H> {
    /// The claim is asked of the store.
    Claiming {
        key: StorageKey,
        course: Course<Ordered>,
        held: Option<H>,
    },
    /// On its course, waiting for the ordering guard's decision on its event.
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
}

impl<O, H> Guarded<O, H> {
    /// A request whose key is claimed now, on a route of `kind`: the first action asks the
    /// store. Once claimed, it takes `course` (the event's order, the token's use), then goes
    /// out — detached if the route keeps the request (`held`), else on the router path.
    pub fn claim(
        policy: &Policy,
        kind: RouteKind,
        claim: Claim,
        course: Course<Ordered>,
        held: Option<H>,
    ) -> (Self, Out<O, H>) {
        let guarded = Guarded {
            kind,
            payers: claim.payers,
            lease: policy.lease,
            state: State::Claiming {
                key: claim.key,
                course,
                held,
            },
        };
        (guarded, Out::one(Action::Ask(Ask::Claim(claim))))
    }

    /// A request with no key, on a route where the key is optional: out without idempotency,
    /// once its token (if the route requires one) is used.
    pub fn unguarded(token: Option<VerifiedToken>, payers: Payers) -> (Self, Out<O, H>) {
        let mut guarded = Guarded {
            kind: RouteKind::Api,
            payers,
            lease: Span::from_secs(0),
            state: State::Over,
        };
        let after = After::Pass {
            event: Some(Event::Passthrough),
        };
        let out = guarded.go(Course::unguarded(token), after, None, Events::default());
        (guarded, out)
    }

    /// Whether the request is forwarded on the router path and its answer still awaited.
    pub fn is_forwarded(&self) -> bool {
        matches!(self.state, State::Forwarded { .. })
    }

    /// The key this request claims or holds, for the host's log and a remote store's answer.
    pub fn key(&self) -> Option<StorageKey> {
        match &self.state {
            State::Claiming { key, .. }
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
            State::Ordering { .. } | State::Using { .. } | State::Over => None,
        }
    }

    /// The claim this request holds while it waits on its course: what a host gives back if
    /// the request's client is gone when the answer comes.
    pub fn held_claim(&self) -> Option<(StorageKey, OwnerToken)> {
        match &self.state {
            State::Ordering {
                after: After::Owner { key, owner, .. },
                ..
            }
            | State::Using {
                after: After::Owner { key, owner, .. },
                ..
            } => Some((*key, *owner)),
            _ => None,
        }
    }

    /// The store answered the question the last [`Action::Ask`] asked.
    pub fn answered(&mut self, reply: Answer, policy: &Policy) -> Out<O, H> {
        match (core::mem::replace(&mut self.state, State::Over), reply) {
            (State::Claiming { key, course, held }, Answer::Claim(outcome)) => {
                self.claimed(key, &outcome, course, held, policy)
            }
            (
                State::Using {
                    course,
                    after,
                    order,
                },
                Answer::Consume(outcome),
            ) => {
                let (refusal, events) = after_use(&outcome);
                match refusal {
                    None => self.go(course, after, order, events),
                    Some(refusal) => {
                        let mut out = Out::new(events);
                        if let EdgeAnswer::StoreFailed(e) = &refusal {
                            out = out.then(Action::Warn(Warning::StoreFailed((*e).clone())));
                        }
                        let http = answer(&refusal);
                        not_forwarded(out, after, order).then(Action::Answer(http))
                    }
                }
            }
            (state, _) => self.out_of_order(state, "a store answer"),
        }
    }

    /// The ordering guard decided the event the last [`Action::Order`] asked about.
    pub fn ordered(&mut self, decision: Decision<O>) -> Out<O, H> {
        match core::mem::replace(&mut self.state, State::Over) {
            State::Ordering { course, after } => match decision {
                Decision::Forward(order) => self.go(course, after, order, Events::default()),
                Decision::Answer(http) => not_forwarded(Out::new(Events::default()), after, None)
                    .then(Action::Answer(http)),
            },
            state => self.out_of_order(state, "an ordering decision"),
        }
    }

    /// Whether the detached exchange of the last [`Action::Detach`] went out.
    pub fn sent(&mut self, sent: Sent<O>) -> Out<O, H> {
        let (key, owner) = match core::mem::replace(&mut self.state, State::Over) {
            State::Sending { key, owner } => (key, owner),
            state => return self.out_of_order(state, "a detached exchange"),
        };
        match sent {
            Sent::Waiting => Out::new(Events::default()),
            Sent::Failed { order } => {
                let out = Out::one(self.finish(key, owner, ResponseFacts::NeverReached));
                settle_order(out, order, false).then(Action::Answer(answer(&EdgeAnswer::Relay(
                    RelayProblem::NotSent,
                ))))
            }
            // The claim holds until its lease ends, so a retry cannot run the request twice.
            Sent::Lost => Out::one(self.finish(key, owner, ResponseFacts::InDoubt)).then(
                Action::Answer(answer(&EdgeAnswer::Relay(RelayProblem::NoAnswer {
                    retry_after: self.lease,
                }))),
            ),
        }
    }

    /// The head of an answer that came from the upstream itself (an answer the proxy or a later
    /// filter made is an end without one: [`Guarded::ended`]).
    pub fn upstream_head(&mut self, head: Capture) -> Out<O, H> {
        let State::Forwarded { order, capture, .. } = &mut self.state else {
            return Out::new(Events::default());
        };
        if capture.is_some() {
            return Out::one(Action::Warn(Warning::OutOfOrder("a second upstream head")));
        }
        let applied = order.is_some() && head.status().is_some_and(applies);
        *capture = Some(head);
        let out = Out::new(Events::default());
        if applied {
            return out.then(Action::MarkApplied);
        }
        out
    }

    /// Whether the next `size` bytes of the upstream's body are kept for the record (read them
    /// and hand them to [`Guarded::upstream_chunk`]) or passed on unread.
    pub fn upstream_wants(&mut self, size: u64) -> bool {
        match &mut self.state {
            State::Forwarded {
                capture: Some(capture),
                ..
            } => capture.wants(size),
            _ => false,
        }
    }

    /// A body chunk [`Guarded::upstream_wants`] asked for; `None`: the host could not read it.
    pub fn upstream_chunk(&mut self, chunk: Option<&[u8]>) {
        if let State::Forwarded {
            capture: Some(capture),
            ..
        } = &mut self.state
        {
            capture.chunk(chunk);
        }
    }

    /// The forwarded request is over: its upstream answer `complete`, or not (the client gone,
    /// a reset, an answer made elsewhere) — then `without` says what the host observed.
    pub fn ended(
        &mut self,
        complete: bool,
        without: impl FnOnce() -> (ResponseFacts, DoubtCause),
    ) -> Out<O, H> {
        let (key, owner, order, capture) = match core::mem::replace(&mut self.state, State::Over) {
            State::Forwarded {
                key,
                owner,
                order,
                capture,
            } => (key, owner, order, capture),
            // Not forwarded: the upstream has nothing to end (a stream that waits for a store
            // gives back what it holds when that answer finds it gone).
            state => {
                self.state = state;
                return Out::new(Events::default());
            }
        };
        let capture = if complete { capture } else { None };
        let applied = capture
            .as_ref()
            .and_then(Capture::status)
            .is_some_and(applies);
        let out = settle_order(Out::new(Events::default()), order, applied);
        let (facts, cause, out) = match capture {
            Some(capture) => {
                let facts = capture.facts();
                let out = if facts == ResponseFacts::InDoubt {
                    out.then(Action::Warn(Warning::AnswerUnreadable))
                } else {
                    out
                };
                (facts, DoubtCause::Other, out)
            }
            None => {
                let (facts, cause) = without();
                (facts, cause, out)
            }
        };
        out.then(self.finish_with(key, owner, facts, cause))
    }

    /// The host could not read the clock a local store question needs: answered 503, and the
    /// claim the request holds given back (nothing was sent).
    pub fn clock_failed(&mut self) -> Out<O, H> {
        let out = match core::mem::replace(&mut self.state, State::Over) {
            State::Claiming { .. } => Out::new(Events::default()),
            State::Using { after, order, .. } => {
                not_forwarded(Out::new(Events::default()), after, order)
            }
            // Only a store question needs the clock: a request past them has no use for it.
            state => return self.out_of_order(state, "a clock failure"),
        };
        out.then(Action::Answer(answer(&EdgeAnswer::ClockUnavailable)))
    }

    fn claimed(
        &mut self,
        key: StorageKey,
        outcome: &Result<ClaimOutcome, ProtocolError>,
        course: Course<Ordered>,
        held: Option<H>,
        policy: &Policy,
    ) -> Out<O, H> {
        let (next, events) = after_claim(outcome, policy);
        match next {
            Next::Forward { owner, .. } => {
                let after = After::Owner { key, owner, held };
                self.go(course, after, None, events)
            }
            Next::Answer(edge) => {
                let out = Out::new(events);
                let out = match &edge {
                    EdgeAnswer::StoreFailed(e) if !e.allows_failure_mode() => {
                        out.then(Action::Warn(Warning::RecordCorrupt {
                            key,
                            error: (*e).clone(),
                        }))
                    }
                    EdgeAnswer::StoreFailed(e) => {
                        out.then(Action::Warn(Warning::StoreFailed((*e).clone())))
                    }
                    _ => out,
                };
                out.then(Action::Answer(answer(&edge)))
            }
            Next::Unguarded => {
                let out = Out::new(events);
                let out = match outcome {
                    Err(e) => out.then(Action::Warn(Warning::StoreFailed((*e).clone()))),
                    Ok(_) => out,
                };
                // Nothing is claimed, so no event to order: only the token is still used.
                let after = After::Pass { event: None };
                let course = Course::unguarded(course.into_token());
                let going = self.go(course, after, None, Events::default());
                going.into_iter().fold(out, Out::then)
            }
        }
    }

    /// Takes the course's next step.
    fn go(
        &mut self,
        mut course: Course<Ordered>,
        after: After<H>,
        order: Option<O>,
        events: Events,
    ) -> Out<O, H> {
        let out = Out::new(events);
        match course.step() {
            Step::Order(ordered) => {
                let After::Owner { key, owner, .. } = &after else {
                    // `Course::unguarded` never orders; an unowned request has nothing to order.
                    return self.go(course, after, order, events);
                };
                let action = Action::Order {
                    ordered,
                    key: *key,
                    owner: *owner,
                };
                // The event is the course's first step: no resource is claimed yet.
                self.state = State::Ordering { course, after };
                out.then(action)
            }
            Step::UseToken(token) => {
                self.state = State::Using {
                    course,
                    after,
                    order,
                };
                out.then(Action::Ask(Ask::Consume {
                    use_key: token.use_key,
                    expires_at: token.expires_at,
                    payers: self.payers,
                }))
            }
            Step::Go => match after {
                After::Owner {
                    key,
                    owner,
                    held: Some(held),
                } => {
                    self.state = State::Sending { key, owner };
                    out.then(Action::Detach {
                        key,
                        owner,
                        held,
                        order,
                    })
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
                    out.then(Action::Forward)
                }
                After::Pass { event } => {
                    self.state = State::Over;
                    let mut out = out;
                    if let Some(event) = event {
                        out.events = out.events.with(event);
                    }
                    out.then(Action::Pass)
                }
            },
        }
    }

    fn finish(&self, key: StorageKey, owner: OwnerToken, facts: ResponseFacts) -> Action<O, H> {
        self.finish_with(key, owner, facts, DoubtCause::Other)
    }

    /// The claim's finish, its facts screened by the route's kind (a callback route keeps only a
    /// 2xx answer).
    fn finish_with(
        &self,
        key: StorageKey,
        owner: OwnerToken,
        facts: ResponseFacts,
        cause: DoubtCause,
    ) -> Action<O, H> {
        Action::Finish {
            key,
            owner,
            facts: self.kind.screen(facts),
            cause,
        }
    }

    fn out_of_order(&mut self, state: State<O, H>, what: &'static str) -> Out<O, H> {
        self.state = state;
        Out::one(Action::Warn(Warning::OutOfOrder(what)))
    }
}

/// A step refused the request before it was sent: the upstream never saw it, so the claim it
/// holds is released and its resource claim given back.
fn not_forwarded<O, H>(out: Out<O, H>, after: After<H>, order: Option<O>) -> Out<O, H> {
    let out = match after {
        After::Owner { key, owner, .. } => out.then(Action::Finish {
            key,
            owner,
            facts: ResponseFacts::NeverReached,
            cause: DoubtCause::Other,
        }),
        After::Pass { .. } => out,
    };
    settle_order(out, order, false)
}

fn settle_order<O, H>(out: Out<O, H>, order: Option<O>, applied: bool) -> Out<O, H> {
    match order {
        Some(claim) => out.then(Action::SettleOrder { claim, applied }),
        None => out,
    }
}

#[cfg(test)]
mod tests;
