//! One run of the machine along a path of inputs, and what the model saw of it from its actions.

use super::inputs::{
    claim_outcome, consume_outcome, ordered_event, Input, Machine, Shape, KEY, OWNER, RESOURCE,
    TOKEN,
};
use idemgate_core::answer::HttpAnswer;
use idemgate_core::client::payer::Payers;
use idemgate_core::decision::{DoubtCause, ResponseFacts};
use idemgate_core::events::Event;
use idemgate_core::guard::{Action, Capture, Claim, Course, Reply, Ruling, Sent, Warning};
use idemgate_core::policy::Policy;
use idemgate_core::request::budget::{Budget, Reservation};
use idemgate_core::request::fingerprint::Fingerprint;
use std::rc::Rc;

/// What the model saw of the request, from its actions alone.
#[derive(Debug, Default, Clone)]
pub(crate) struct Seen {
    /// What the request waits for: a claim, a token use, an ordering decision, a send.
    pub(crate) waits: Option<&'static str>,
    pub(crate) won: bool,
    pub(crate) consumed: bool,
    pub(crate) let_on: bool,
    pub(crate) answered: bool,
    /// Forwarded, passed or detached (and then whether the exchange went out).
    pub(crate) out: Option<&'static str>,
    pub(crate) exchange: bool,
    /// A detached exchange went out but its answer can find nothing: in doubt.
    pub(crate) lost: bool,
    pub(crate) headed: Option<Option<u16>>,
    /// Body chunks handed in (the exploration stops at two: one read, one the host could not).
    pub(crate) chunks: u8,
    pub(crate) finishes: Vec<ResponseFacts>,
    pub(crate) resource: Option<u32>,
    pub(crate) settles: Vec<bool>,
    pub(crate) resource_to_exchange: bool,
    /// The client left: nothing is answered or sent for it any more.
    pub(crate) gone: bool,
}

impl Seen {
    pub(crate) fn fated(&self) -> bool {
        self.answered || self.out.is_some()
    }
}

pub(crate) struct Run {
    pub(crate) shape: Shape,
    policy: Policy,
    machine: Machine,
    pub(crate) seen: Seen,
}

impl Run {
    pub(crate) fn start(shape: Shape) -> Run {
        let mut policy = Policy::defaults();
        policy.on_store_error = shape.failure;
        policy.on_store_full = shape.failure;
        let token = shape.token.then_some(TOKEN);
        let machine = if shape.keyed {
            let claim = Claim {
                key: KEY,
                fingerprint: Fingerprint([4; 32]),
                owner: OWNER,
                payers: Payers::NONE,
            };
            let course = Course::claimed(shape.ordered.then(ordered_event), token);
            let relay = Reservation::new(Rc::new(Budget::default()), Rc::from(&b"10.0.0.1"[..]));
            let held = shape.detached.then_some(("kept", relay));
            Machine::claim(&policy, shape.kind, claim, course, held)
        } else {
            Machine::unguarded(&policy, token, Payers::NONE)
        };
        let mut run = Run {
            shape,
            policy,
            machine,
            seen: Seen::default(),
        };
        let (actions, events) = run.take();
        run.check(actions, &events, &[], None);
        run
    }

    /// Whether the model says the request waits for `input` now.
    fn awaits(&self, input: Input) -> bool {
        let seen = &self.seen;
        let forwarded = seen.out == Some("forward") && seen.finishes.is_empty();
        match input {
            Input::Claim(_) => seen.waits == Some("claim"),
            Input::Consume(_) => seen.waits == Some("consume"),
            Input::Order(_) => seen.waits == Some("order"),
            Input::Sent(_) => seen.waits == Some("send"),
            Input::ClockFailed => matches!(seen.waits, Some("claim" | "consume")),
            Input::Head(_) => forwarded && seen.headed.is_none(),
            Input::Chunk(_) => forwarded && seen.headed.is_some(),
            Input::Ended(_) => forwarded,
            // A client can leave at any time, once.
            Input::Gone => !seen.gone,
        }
    }

    /// Every action and event the machine has given, taken.
    fn take(&mut self) -> (Vec<Action<u32, &'static str>>, Vec<Event>) {
        assert!(
            self.machine.is_whole(),
            "more actions than the machine holds"
        );
        let events = self.machine.events().iter().collect();
        (std::iter::from_fn(|| self.machine.poll()).collect(), events)
    }

    /// Hands `input` to the machine.
    fn feed(&mut self, input: Input) {
        let m = &mut self.machine;
        match input {
            Input::Claim(case) => m.answered(Reply::Claim(claim_outcome(case)), &self.policy),
            Input::Consume(case) => m.answered(Reply::Consume(consume_outcome(case)), &self.policy),
            Input::Order(0) => m.ordered(Ruling::Forward(Some(RESOURCE))),
            Input::Order(1) => m.ordered(Ruling::Forward(None)),
            Input::Order(_) => m.ordered(Ruling::Answer(HttpAnswer {
                status: 409,
                headers: Vec::new(),
                body: Vec::new(),
            })),
            Input::Sent(0) => m.sent(Sent::Waiting),
            // The host hands back the resource claim the detach took, if it took one.
            Input::Sent(1) => m.sent(Sent::Failed {
                order: self
                    .seen
                    .resource
                    .filter(|_| self.seen.resource_to_exchange),
            }),
            Input::Sent(_) => m.sent(Sent::Lost),
            Input::Head(status) => {
                let capture = match status {
                    Some(status) => {
                        let status = status.to_string();
                        Capture::head([(":status", status.as_bytes())], &self.policy)
                    }
                    None => Capture::unreadable(&self.policy),
                };
                m.upstream_head(capture)
            }
            Input::Chunk(readable) => {
                if m.upstream_wants(2) {
                    m.upstream_chunk(readable.then_some(&b"{}"[..]));
                }
            }
            Input::Ended(complete) => m.ended(complete, || {
                (ResponseFacts::InDoubt, DoubtCause::ClientGone)
            }),
            Input::ClockFailed => m.clock_failed(),
            Input::Gone => m.gone(),
        }
    }

    /// Feeds `input` and checks what came out; `false`: it was not awaited, was said to be, and
    /// changed nothing.
    pub(crate) fn step(&mut self, input: Input, path: &[Input]) -> bool {
        let awaited = self.awaits(input);
        let before = format!("{:?}", self.machine);
        self.feed(input);
        let (actions, events) = self.take();
        if !awaited {
            // A host's mistake is said; an upstream event for a request not forwarded (or over),
            // or its client leaving twice, is nothing to it.
            let said = matches!(actions[..], [Action::Warn(Warning::OutOfOrder(_))]);
            let upstream = matches!(
                input,
                Input::Head(_) | Input::Chunk(_) | Input::Ended(_) | Input::Gone
            );
            assert!(
                said || (upstream && actions.is_empty()),
                "{:?} {path:?} then {input:?}: not awaited, yet {actions:?}",
                self.shape
            );
            assert_eq!(
                before,
                format!("{:?}", self.machine),
                "{path:?} then {input:?}: not awaited, yet the machine changed"
            );
            return false;
        }
        let seen = &mut self.seen;
        match input {
            Input::Claim(0 | 1) => seen.won = true,
            Input::Consume(0) => seen.consumed = true,
            Input::Order(0) => (seen.let_on, seen.resource) = (true, Some(RESOURCE)),
            Input::Order(1) => seen.let_on = true,
            Input::Head(status) => seen.headed = Some(status),
            Input::Chunk(_) => seen.chunks += 1,
            Input::Sent(0) => seen.exchange = true,
            Input::Sent(2) => seen.lost = true,
            Input::Gone => seen.gone = true,
            _ => {}
        }
        // The client leaving answers nothing the request waits for.
        if !matches!(input, Input::Gone) {
            seen.waits = None;
        }
        self.check(actions, &events, path, Some(input));
        assert_eq!(
            self.machine.is_orphaned(),
            self.seen.gone && self.seen.waits.is_some(),
            "{:?} {path:?} then {input:?}: orphaned is gone and waiting",
            self.shape
        );
        true
    }
}
