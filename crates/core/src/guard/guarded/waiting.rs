//! A duplicate that waits for the first's answer (`in_flight.wait`): the store said the key is
//! in flight for the same payload, so instead of 409 the request is parked ([`Action::Park`]),
//! asks the store again each time the host wakes it, and is answered as any claim is once the
//! record is no longer in flight — replayed when the first's answer was stored, claimed and
//! forwarded when the first's claim was released. At its deadline, or when the host has no room
//! for another waiter, it gets the 409 it would have got at once. The host only parks and wakes:
//! every decision, and every reading of time, is here.

use super::{Action, Ask, Claim, Course, Event, Events, Guarded, Kept, State};
use crate::answer::{styled, EdgeAnswer};
use crate::guard::sequencer::Ordered;
use crate::time::{Span, UnixMillis};
use alloc::boxed::Box;

/// What a parked request keeps to ask again and to go on as its claim would have.
#[derive(Debug)]
pub(super) struct Parked<H> {
    pub(super) claim: Claim,
    pub(super) course: Course<Ordered>,
    pub(super) held: Option<Kept<H>>,
    /// When it stops waiting; `None` until the host says it is parked ([`Guarded::parked`]).
    pub(super) deadline: Option<UnixMillis>,
    /// The first's lease as the store last told it: until its end a 409's client should wait.
    pub(super) lease: Lease,
    /// When it last asked the store: the lease an answer tells is counted from then.
    pub(super) asked: UnixMillis,
    /// When it asks again unless woken before, and how long it waits after that ask.
    pub(super) next_ask: UnixMillis,
    pub(super) backoff: Span,
}

/// The first pause between a parked request's questions, doubled after each up to
/// [`MAX_BACKOFF`]: a short first request is answered within its 50 ms, and a long one costs its
/// store two or three questions a second per waiter. Where a record's end is announced (a local
/// store: [`Guarded::wake`]) the answer comes at once, whatever the pause.
/// The first's lease, as the last claim answered: how much was left, until the host says when
/// it parked the request; from then on, when it ends.
#[derive(Clone, Copy, Debug)]
pub(super) enum Lease {
    Left(Span),
    Ends(UnixMillis),
}

impl Lease {
    fn left(self, now: UnixMillis) -> Span {
        match self {
            Lease::Left(left) => left,
            Lease::Ends(end) => now.until(end),
        }
    }
}

const FIRST_BACKOFF: Span = crate::guard::Waiters::<()>::TICK;
const MAX_BACKOFF: Span = Span(400);

impl<O, H> Guarded<O, H> {
    /// The store said the key is in flight for this very payload, `retry_after` more, on a
    /// route that waits: the request is parked.
    pub(super) fn park(
        &mut self,
        claim: Claim,
        course: Course<Ordered>,
        held: Option<Kept<H>>,
        retry_after: Span,
    ) {
        self.state = State::Waiting(Box::new(Parked {
            claim,
            course,
            held,
            deadline: None,
            lease: Lease::Left(retry_after),
            asked: UnixMillis(0),
            next_ask: UnixMillis(0),
            backoff: FIRST_BACKOFF,
        }));
        let payer = claim.payers.tags().next();
        self.queue.push(Action::Park {
            key: claim.key,
            payer,
        });
    }

    /// Asked again, the store says the key is still in flight: parked again as it was (the
    /// host still holds it), until its deadline.
    pub(super) fn still_in_flight(&mut self, mut parked: Box<Parked<H>>, retry_after: Span) {
        parked.lease = Lease::Ends(parked.asked.after(retry_after));
        self.state = State::Waiting(parked);
    }

    /// The host carried out [`Action::Park`] at `now`: `admitted` if it had room for another
    /// waiter on the key and in the VM, else the request is answered 409 now.
    pub fn parked(&mut self, admitted: bool, now: UnixMillis) {
        let (State::Waiting(parked), Some(wait)) = (&mut self.state, self.wait) else {
            return self.warn(super::Warning::OutOfOrder("a parking"));
        };
        if parked.deadline.is_some() {
            return self.warn(super::Warning::OutOfOrder("a second parking"));
        }
        if !admitted {
            return self.give_up(now, Event::WaitFull);
        }
        self.queue.count(Events::of(&[Event::Waited]));
        parked.deadline = Some(now.after(wait));
        parked.lease = Lease::Ends(now.after(parked.lease.left(now)));
        parked.next_ask = now.after(parked.backoff);
    }

    /// The host wakes a parked request at `now`: the key's record was completed or released
    /// somewhere. Before its deadline it asks the store again; at it, it is answered 409. A
    /// request not parked (already asking, or over) ignores it: wakes may cross its answer.
    pub fn wake(&mut self, now: UnixMillis) {
        self.recheck(now, true);
    }

    /// The host's timer at `now` (every [`crate::guard::Waiters::TICK`] while it holds some): at its deadline the
    /// request is answered 409; once its pause is over it asks the store again, and pauses twice
    /// as long next time (up to 400 ms).
    pub fn tick(&mut self, now: UnixMillis) {
        self.recheck(now, false);
    }

    fn recheck(&mut self, now: UnixMillis, woken: bool) {
        let State::Waiting(parked) = &mut self.state else {
            return;
        };
        let Some(deadline) = parked.deadline else {
            return;
        };
        if now >= deadline {
            return self.give_up(now, Event::WaitExpired);
        }
        if !woken && now < parked.next_ask {
            return;
        }
        if !woken {
            parked.backoff = Span(parked.backoff.as_millis().saturating_mul(2)).min(MAX_BACKOFF);
        }
        parked.next_ask = now.after(parked.backoff);
        parked.asked = now;
        let ask = Action::Ask(Ask::Claim(parked.claim));
        let state = core::mem::replace(&mut self.state, State::Over);
        if let State::Waiting(parked) = state {
            self.state = State::Rechecking(parked);
        }
        self.queue.push(ask);
    }

    /// Whether the request is parked, waiting for the first's answer (or asking for it again):
    /// the host keeps it until it is answered, woken past its deadline, or its client is gone.
    pub fn is_waiting(&self) -> bool {
        matches!(self.state, State::Waiting(_) | State::Rechecking(_))
    }

    /// Stops waiting (`why`: no room, or the bound reached): the 409 the request would have got
    /// at once, with the first's lease left.
    fn give_up(&mut self, now: UnixMillis, why: Event) {
        let retry_after = match core::mem::replace(&mut self.state, State::Over) {
            State::Waiting(parked) => parked.lease.left(now),
            state => return self.out_of_order(state, "a give-up"),
        };
        self.queue.count(Events::of(&[Event::Conflict, why]));
        self.reply(styled(
            &EdgeAnswer::Conflict { retry_after },
            &self.problems,
        ));
    }
}
