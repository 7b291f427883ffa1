//! One guarded request's life from the end of its headers to its settlement, as one sans-IO
//! state machine in quinn-proto's shape.
//!
//! The host hands in what happened: its body, chunk by chunk ([`Guarded::body_wants`],
//! [`Guarded::body_chunk`], [`Guarded::body_end`]: `taking`), the store's answer to a question
//! the machine asked ([`Guarded::answered`]), the ordering guard's decision
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
    after_claim, after_late, after_use, Capture, Course, Event, Events, Next, Step, VerifiedToken,
};
use crate::answer::{answer, EdgeAnswer, HttpAnswer, RelayProblem};
use crate::client::scope::StorageKey;
use crate::decision::{DoubtCause, ResponseFacts};
use crate::guard::ordering::{applies, settlement, Ordered};
use crate::policy::{Policy, RouteKind};
use crate::record::OwnerToken;
use crate::request::budget::Reservation;
use crate::request::fingerprint::Fingerprint;
use crate::store::protocol::{ClaimOutcome, ConsumeOutcome, ProtocolError};
use crate::store::share::{Payers, ShareRefusal};
use crate::time::{Span, UnixMillis};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

mod taking;
pub use taking::Intaking;

/// A question for the store (the host's local store answers at once, a remote one later); its
/// answer comes back through [`Guarded::answered`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ask {
    /// Claim the key for this request ([`crate::store::protocol::Engine::claim`]).
    Claim(Claim),
    /// Look the key up for a late delivery, writing nothing
    /// ([`crate::store::protocol::Engine::replay`]); answered as a claim is
    /// ([`Answer::Claim`]).
    Replay {
        key: StorageKey,
        fingerprint: Fingerprint,
    },
    /// Use the request's one-time token, once ([`crate::store::protocol::Engine::consume`]).
    Consume {
        use_key: StorageKey,
        expires_at: UnixMillis,
        payers: Payers,
    },
}

/// A claim on a request's key, as [`crate::store::protocol::Engine::claim`] takes it.
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
#[derive(Debug, PartialEq, Eq)]
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
        /// Who pays for a new resource record: the delivery claim's payers.
        payers: Payers,
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
        held: Kept<H>,
        order: Option<O>,
    },
    /// Answer the client with this: the request is over.
    Answer(HttpAnswer),
    /// Finish the claim with these facts ([`crate::store::protocol::Engine::finish`]); `cause` says
    /// why should they be in doubt.
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

/// The request a detached route keeps to send itself: the host's part of it (`held`: where it
/// goes, its headers) and its body as taken in, whose bytes stay reserved from the hashing
/// budget (`reserved`) until the exchange that sends it ends: the host keeps the reservation
/// with the exchange, as the proxy keeps the body it sends. `relay` is the exchange's part of
/// the relay budget, empty until the claim is won and `upstream.max_body` from then on; the host
/// keeps it with the exchange until its answer has been read.
#[derive(Debug)]
pub struct Kept<H> {
    pub held: H,
    pub body: Vec<u8>,
    pub reserved: Option<Reservation>,
    pub relay: Reservation,
}

/// The same request kept: the same part and body, with as many bytes reserved.
impl<H: PartialEq> PartialEq for Kept<H> {
    fn eq(&self, other: &Self) -> bool {
        let bytes = |kept: &Self| {
            let body = kept.reserved.as_ref().map(Reservation::bytes);
            (body, kept.relay.bytes())
        };
        self.held == other.held && self.body == other.body && bytes(self) == bytes(other)
    }
}

impl<H: Eq> Eq for Kept<H> {}

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
    /// A payer was refused for its share (429): which share, and the payer's hashed label.
    OverShare(ShareRefusal),
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
            Warning::OverShare(refusal) => write!(f, "{refusal}"),
        }
    }
}

/// The actions an input gave, taken in order by [`Guarded::poll`]. An action the request waits on
/// ([`Action::Ask`], [`Action::Order`], [`Action::Detach`]) is always the last of its input's:
/// its answer is the next input. No input gives more than four.
#[derive(Debug)]
struct Queue<O, H> {
    actions: [Option<Action<O, H>>; 4],
    /// The next to take, and how many were given since the queue was last empty.
    next: u8,
    given: u8,
    events: Events,
    /// More actions or events were given than the queue holds (never, by the paths the machine
    /// has: host-tests' `guard` exploration checks [`Guarded::is_whole`] after every input).
    overflow: bool,
}

impl<O, H> Queue<O, H> {
    fn push(&mut self, action: Action<O, H>) {
        if self.next == self.given {
            // All taken (the host hands in an answer while it carries out the last action).
            (self.next, self.given) = (0, 0);
        }
        match self.actions.get_mut(usize::from(self.given)) {
            Some(slot) => {
                *slot = Some(action);
                self.given += 1;
            }
            None => self.overflow = true,
        }
    }

    fn count(&mut self, events: Events) {
        for event in events.iter() {
            match self.events.with(event) {
                Some(more) => self.events = more,
                None => self.overflow = true,
            }
        }
    }

    /// The next action; when none is left the queue starts over empty.
    fn pop(&mut self) -> Option<Action<O, H>> {
        if self.next >= self.given {
            (self.next, self.given) = (0, 0);
            return None;
        }
        let action = self.actions.get_mut(usize::from(self.next))?.take();
        self.next += 1;
        action
    }
}

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
    queue: Queue<O, H>,
    /// The client is gone ([`Guarded::gone`]): nothing is sent or answered for it any more.
    gone: bool,
}

impl<O, H> Guarded<O, H> {
    fn new(kind: RouteKind, payers: Payers, lease: Span, state: State<O, H>) -> Self {
        Guarded {
            kind,
            payers,
            lease,
            state,
            queue: Queue {
                actions: [None, None, None, None],
                next: 0,
                given: 0,
                events: Events::default(),
                overflow: false,
            },
            gone: false,
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
        let key = claim.key;
        let held = held.map(|(held, relay)| Kept {
            held,
            body: Vec::new(),
            reserved: None,
            relay,
        });
        let state = State::Claiming { key, course, held };
        let mut guarded = Guarded::new(kind, claim.payers, policy.lease, state);
        guarded.queue.push(Action::Ask(Ask::Claim(claim)));
        guarded
    }

    /// A request with no key, on a route where the key is optional: out without idempotency,
    /// once its token (if the route requires one) is used.
    pub fn unguarded(token: Option<VerifiedToken>, payers: Payers) -> Self {
        let lease = Span::from_secs(0);
        let mut guarded = Guarded::new(RouteKind::Api, payers, lease, State::Over);
        let after = After::Pass {
            event: Some(Event::Passthrough),
        };
        guarded.go(Course::unguarded(token), after, None);
        guarded
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
            State::Taking(_) | State::Ordering { .. } | State::Using { .. } | State::Over => None,
        }
    }

    /// The store answered the question the last [`Action::Ask`] asked.
    pub fn answered(&mut self, reply: Answer, policy: &Policy) {
        match (core::mem::replace(&mut self.state, State::Over), reply) {
            (State::Claiming { key, course, held }, Answer::Claim(outcome)) => {
                self.claimed(key, &outcome, course, held, policy)
            }
            (State::Looking { key }, Answer::Claim(outcome)) => self.looked(key, &outcome, policy),
            (
                State::Using {
                    course,
                    after,
                    order,
                },
                Answer::Consume(outcome),
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
                let http = answer(&refusal);
                self.not_forwarded(after, order);
                self.reply(http);
            }
            (state, _) => self.out_of_order(state, "a store answer"),
        }
    }

    /// The ordering guard decided the event the last [`Action::Order`] asked about.
    pub fn ordered(&mut self, decision: Decision<O>) {
        match core::mem::replace(&mut self.state, State::Over) {
            State::Ordering { course, after } => match decision {
                Decision::Forward(order) => self.go(course, after, order),
                Decision::Answer(http) => {
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
                self.reply(answer(&problem));
            }
            // The claim holds until its lease ends, so a retry cannot run the request twice.
            Sent::Lost => {
                self.finish(key, owner, ResponseFacts::InDoubt, DoubtCause::Other);
                let retry_after = self.lease;
                let problem = EdgeAnswer::Relay(RelayProblem::NoAnswer { retry_after });
                self.reply(answer(&problem));
            }
        }
    }

    /// The head of an answer that came from the upstream itself (an answer the proxy or a later
    /// filter made is an end without one: [`Guarded::ended`]).
    pub fn upstream_head(&mut self, head: Capture) {
        let State::Forwarded { order, capture, .. } = &mut self.state else {
            return;
        };
        if capture.is_some() {
            return self.warn(Warning::OutOfOrder("a second upstream head"));
        }
        let applied = order.is_some() && head.status().is_some_and(applies);
        *capture = Some(head);
        if applied {
            self.queue.push(Action::MarkApplied);
        }
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
    pub fn ended(&mut self, complete: bool, without: impl FnOnce() -> (ResponseFacts, DoubtCause)) {
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
                return;
            }
        };
        let capture = if complete { capture } else { None };
        let status = capture.as_ref().and_then(Capture::status);
        let (facts, cause) = match capture {
            Some(capture) => {
                let facts = capture.facts();
                if facts == ResponseFacts::InDoubt {
                    self.warn(Warning::AnswerUnreadable);
                }
                (facts, DoubtCause::Other)
            }
            None => without(),
        };
        match settlement(facts == ResponseFacts::InDoubt, status) {
            Some(applied) => self.settle_order(order, applied),
            // Dropped unsettled: the store's claim holds until its lease ends.
            None => drop(order),
        }
        self.finish(key, owner, facts, cause);
    }

    /// The client is gone (its stream reset or done before its answer). Whatever the request
    /// waits for — a store answer, the ordering guard's decision, whether its exchange went
    /// out — is still taken, but the request no longer goes on: a claim it wins or holds is
    /// released (the upstream never saw it), a resource claim given back, and nothing is
    /// answered. A body being taken in is dropped (nothing was claimed yet). A request already
    /// out is settled by its end ([`Guarded::ended`]), a detached exchange by its answer.
    pub fn gone(&mut self) {
        self.gone = true;
        if let State::Taking(_) = self.state {
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
            State::Claiming { .. } | State::Looking { .. } => {}
            State::Using { after, order, .. } => self.not_forwarded(after, order),
            // Only a store question needs the clock: a request past them has no use for it.
            state => return self.out_of_order(state, "a clock failure"),
        }
        let http = answer(&EdgeAnswer::ClockUnavailable);
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
                        return self.reply(answer(&EdgeAnswer::RelayBudgetExceeded));
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
                self.reply(answer(&edge));
            }
            Next::Unguarded => {
                if let Err(e) = outcome {
                    self.warn(Warning::StoreFailed(e.clone()));
                }
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
        self.reply(answer(&edge));
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
        match course.step() {
            Step::Order(ordered) => {
                let After::Owner { key, owner, .. } = &after else {
                    // `Course::unguarded` never orders; an unowned request has nothing to order.
                    return self.go(course, after, order);
                };
                let action = Action::Order {
                    ordered,
                    key: *key,
                    owner: *owner,
                    payers: self.payers,
                };
                // The event is the course's first step: no resource is claimed yet.
                self.state = State::Ordering { course, after };
                self.queue.push(action);
            }
            Step::UseToken(token) => {
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
            Step::Go => match after {
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
            self.queue.push(Action::SettleOrder { claim, applied });
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
