//! The machine's first state: the request's body taken in, chunk by chunk, its key's claim made at
//! its end. Each chunk is charged before the host reads it (`max_request_body`, each kept copy
//! reserved from the hashing budget), then fed to the fingerprint, a body key source, the ordering
//! guard's [`Probe`] and the detached exchange's copy. A request whose headers end the stream
//! takes no chunk: its body ends at once.

use super::{Action, After, Ask, Claim, Event, Events, Guarded, Kept, State};
use crate::answer::EdgeAnswer;
use crate::client::payer::Payers;
use crate::client::signature::Freshness;
use crate::guard::sequencer::Probe;
use crate::guard::{BodyRefusal, Course, Intake, Taken, VerifiedToken};
use crate::policy::{Policy, RouteKind};
use crate::record::OwnerToken;
use crate::request::budget::Reservation;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

/// What a guarded request starts its life with once its headers are read.
pub(crate) struct Intaking {
    /// The body's intake ([`Intake::new`] counts the copies the machine keeps).
    pub(crate) intake: Intake,
    /// This stream's part of the hashing budget.
    pub(crate) reservation: Reservation,
    /// On a route that orders its events: what the sequencer reads of the request.
    pub(crate) probe: Option<Probe>,
    /// The one-time token the request carries, verified, on routes that require one.
    pub(crate) token: Option<VerifiedToken>,
    /// The host's fresh owner token for the claim.
    pub(crate) owner: OwnerToken,
    /// Who the request's records are charged to.
    pub(crate) payers: Payers,
}

/// The body being taken in.
pub(super) struct Taking<H> {
    intake: Intake,
    reservation: Reservation,
    probe: Option<Probe>,
    /// The detached exchange's copy of the body (`None` on the router path).
    body: Option<Vec<u8>>,
    /// Bytes [`Guarded::body_wants`] charged that no chunk has brought yet: a chunk over this
    /// was read without being charged, and is not taken in.
    allowed: u64,
    token: Option<VerifiedToken>,
    owner: OwnerToken,
    /// The host's part of a detached request, with the exchange's part of the relay budget.
    held: Option<(H, Reservation)>,
}

/// The intake's fingerprint state has no `Debug`: the rest of the state is shown.
impl<H: fmt::Debug> fmt::Debug for Taking<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Taking")
            .field("reservation", &self.reservation.bytes())
            .field("allowed", &self.allowed)
            .field("body", &self.body.as_ref().map(Vec::len))
            .field("token", &self.token)
            .field("owner", &self.owner)
            .field("held", &self.held.as_ref().map(|(held, _)| held))
            .finish_non_exhaustive()
    }
}

impl<O, H> Guarded<O, H> {
    /// A guarded request on a route of `kind` whose headers are read: its body is taken in
    /// ([`Guarded::body_wants`], [`Guarded::body_chunk`], [`Guarded::body_end`]), then its key
    /// claimed. `held`: the host's part of the request a detached route sends itself, and the
    /// exchange's (empty) part of the relay budget, reserved once the claim is won.
    pub(crate) fn take(
        policy: &Policy,
        kind: RouteKind,
        intaking: Intaking,
        held: Option<(H, Reservation)>,
    ) -> Self {
        let Intaking {
            intake,
            reservation,
            probe,
            token,
            owner,
            payers,
        } = intaking;
        let taking = Taking {
            intake,
            reservation,
            probe,
            body: held.is_some().then(Vec::new),
            allowed: 0,
            token,
            owner,
            held,
        };
        Guarded::new(policy, kind, payers, State::Taking(Box::new(taking)))
    }

    /// The same, on `route`: a duplicate of a request in flight waits as the route says.
    pub(crate) fn take_on(
        policy: &Policy,
        route: &crate::policy::Route,
        intaking: Intaking,
        held: Option<(H, Reservation)>,
    ) -> Self {
        let mut guarded = Guarded::take(policy, route.kind, intaking, held);
        guarded.wait = route.wait;
        guarded
    }

    /// Whether the body is still being taken in.
    pub fn is_taking(&self) -> bool {
        matches!(self.state, State::Taking(_))
    }

    /// Whether the host may read the next `size` bytes of the body: `false` when they are over
    /// `max_request_body` or the hashing budget (then the request is answered).
    pub fn body_wants(&mut self, size: u64) -> bool {
        let State::Taking(taking) = &mut self.state else {
            return false;
        };
        match taking.intake.charge(size, &mut taking.reservation) {
            Ok(()) => {
                taking.allowed = taking.allowed.saturating_add(size);
                true
            }
            Err(refusal) => {
                self.refuse(&refusal);
                false
            }
        }
    }

    /// A body chunk [`Guarded::body_wants`] let the host read; `None`: it could not be read (the
    /// fingerprint would be of a payload nobody sent, so the request is answered). A chunk
    /// larger than what was charged and not yet brought is a host's mistake: said, not taken in
    /// (it would pass `max_request_body` and the hashing budget unseen).
    pub fn body_chunk(&mut self, chunk: Option<&[u8]>) {
        let State::Taking(taking) = &mut self.state else {
            return self.warn(super::Warning::OutOfOrder("a body chunk"));
        };
        if let Some(chunk) = chunk {
            let size = chunk.len() as u64;
            if size > taking.allowed {
                return self.warn(super::Warning::OutOfOrder("a body chunk not charged first"));
            }
            taking.allowed -= size;
        }
        let Some(chunk) = chunk else {
            self.state = State::Over;
            let http = self.edge_answer(&EdgeAnswer::RequestUnreadable);
            return self.queue.push(Action::Answer(http));
        };
        if let Err(refusal) = taking.intake.update(chunk) {
            return self.refuse(&refusal);
        }
        if let Some(body) = &mut taking.body {
            body.extend_from_slice(chunk);
        }
        if let Some(probe) = &mut taking.probe {
            probe.update(chunk);
        }
    }

    /// The body is complete: its key and fingerprint are claimed — or the request answered (a
    /// body refused, a tracked event without its resource), or passed (no key in the body on a
    /// route where it is optional).
    pub fn body_end(&mut self) {
        let taking = match core::mem::replace(&mut self.state, State::Over) {
            State::Taking(taking) => taking,
            state => return self.out_of_order(state, "the body's end"),
        };
        let Taking {
            intake,
            mut reservation,
            probe,
            body,
            token,
            owner,
            held,
            allowed: _,
        } = *taking;
        // The detached exchange's copy outlives the intake: its bytes stay reserved, with the
        // kept request, until the host's exchange ends; the rest is given back when
        // `reservation` goes at the end of this function.
        let held = held.map(|(held, relay)| {
            let body = body.unwrap_or_default();
            let reserved = Some(reservation.split(body.len() as u64));
            Kept {
                held,
                body,
                reserved,
                relay,
            }
        });
        let (key, fingerprint) = match intake.finish() {
            Ok(Taken::Claim {
                key,
                fingerprint,
                freshness: Freshness::Fresh,
            }) => (key, fingerprint),
            // Only what is stored for it may answer a late delivery: it claims nothing, takes no
            // course (no event ordered, no token used) and is never sent.
            Ok(Taken::Claim {
                key,
                fingerprint,
                freshness: Freshness::Late,
            }) => {
                self.state = State::Looking { key };
                return self
                    .queue
                    .push(Action::Ask(Ask::Replay { key, fingerprint }));
            }
            Ok(Taken::Unguarded) => {
                let after = After::Pass {
                    event: Some(Event::Passthrough),
                };
                return self.go(Course::unguarded(token), after, None);
            }
            Err(refusal) => return self.refuse(&refusal),
        };
        // The event and its resource are read before any store write: a tracked event without
        // a resource id is refused without a claim.
        let ordered = match probe.map(Probe::finish).transpose() {
            Ok(ordered) => ordered.flatten(),
            Err(missing) => {
                self.queue.count(Events::of(&[Event::OrderResourceMissing]));
                return self
                    .queue
                    .push(Action::Answer(missing.answer(&self.problems)));
            }
        };
        let claim = Claim {
            key,
            fingerprint,
            owner,
            payers: self.payers,
        };
        let course = Course::claimed(ordered, token);
        if self.wait.is_some() {
            self.reask = Some(Box::new(claim));
        }
        self.state = State::Claiming { key, course, held };
        self.queue.push(Action::Ask(Ask::Claim(claim)));
    }

    /// Answers a request refused for its body.
    fn refuse(&mut self, refusal: &BodyRefusal) {
        self.state = State::Over;
        self.queue.count(refusal.events());
        self.queue
            .push(Action::Answer(refusal.answer(&self.problems)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::identity::ClientIdentity;
    use crate::client::scope::KeyPrefix;
    use crate::decision::admission::admit;
    use crate::guard::{start, Reply, Start};
    use crate::request::budget::Budget;
    use crate::request::fingerprint::FingerprintBuilder;
    use crate::store::protocol::ClaimOutcome;
    use crate::time::UnixMillis;
    use alloc::format;
    use alloc::rc::Rc;

    type Machine = Guarded<u8, &'static str>;
    type Act = Action<u8, &'static str>;

    /// One route, a 10-byte `max_request_body`.
    fn policy() -> Policy {
        let json = r#"{"max_request_body": 10, "routes": [{"prefix": "/orders"}]}"#;
        Policy::from_json(json, &|_| None).unwrap()
    }

    /// A `POST /orders` with key `k`, its body fingerprinted raw; `copies` kept by the machine.
    fn intaking(policy: &Policy, copies: u64, budget: &Rc<Budget>) -> Intaking {
        let headers = [("idempotency-key", "\"k\"")];
        let lookup = |name: &str| crate::testing::header_values(&headers, name);
        let admission = admit(&policy.routes[0], &lookup, UnixMillis(0)).unwrap();
        let client = ClientIdentity {
            source: "header:authorization".into(),
            value: b"Bearer alice".to_vec(),
            verified: false,
        };
        let Start::Keyed(key) = start(admission, Some(client), KeyPrefix::of, "POST", "/orders")
        else {
            panic!("not keyed")
        };
        let content = [("content-type", &b"application/octet-stream"[..])];
        let fingerprint = FingerprintBuilder::new(&policy.fingerprint, "POST", "/orders", content);
        Intaking {
            intake: Intake::new(key, fingerprint, copies, policy),
            reservation: Reservation::new(Rc::clone(budget), Rc::from(&b"10.0.0.1"[..])),
            probe: None,
            token: None,
            owner: OwnerToken([2; 16]),
            payers: Payers::NONE,
        }
    }

    fn take(machine: &mut Machine) -> (Vec<Act>, Vec<Event>) {
        let events = machine.events().iter().collect();
        (core::iter::from_fn(|| machine.poll()).collect(), events)
    }

    #[test]
    fn a_detached_body_is_kept_whole_and_only_its_copy_stays_reserved_until_sent() {
        let (policy, budget) = (policy(), Rc::new(Budget::default()));
        let intaking = intaking(&policy, 1, &budget);
        let relay = Reservation::new(Rc::new(Budget::default()), Rc::from(&b"10.0.0.1"[..]));
        let held = Some(("kept", relay));
        let mut machine = Machine::take(&policy, RouteKind::Api, intaking, held);
        for chunk in [&b"abcd"[..], b"efg"] {
            assert!(machine.body_wants(chunk.len() as u64));
            machine.body_chunk(Some(chunk));
        }
        assert!(machine.is_taking() && machine.expects_more());
        assert_eq!(
            budget.used(),
            14,
            "each copy (the intake's, the kept one) charged"
        );
        machine.body_end();
        assert_eq!(
            budget.used(),
            7,
            "the intake's copy given back at the body's end"
        );
        let (acts, _) = take(&mut machine);
        let [Action::Ask(Ask::Claim(claim))] = &acts[..] else {
            panic!("{acts:?}")
        };
        assert_eq!(claim.owner, OwnerToken([2; 16]));
        let forward = ClaimOutcome::Forward {
            owner: claim.owner,
            takeover: false,
        };
        machine.answered(Reply::Claim(Ok(forward)), &policy);
        let (acts, events) = take(&mut machine);
        assert_eq!(events, [Event::Claimed]);
        let [Action::Detach { held, .. }] = &acts[..] else {
            panic!("{acts:?}")
        };
        assert_eq!((held.held, &held.body[..]), ("kept", &b"abcdefg"[..]));
        assert_eq!(budget.used(), 7, "the exchange's copy is still reserved");
        drop(acts);
        assert_eq!(budget.used(), 0, "and given back with it");
    }

    #[test]
    fn a_body_over_the_limit_is_refused_before_it_is_read() {
        let (policy, budget) = (policy(), Rc::new(Budget::default()));
        let mut machine =
            Machine::take(&policy, RouteKind::Api, intaking(&policy, 0, &budget), None);
        assert!(machine.body_wants(6));
        machine.body_chunk(Some(b"123456"));
        assert!(!machine.body_wants(6), "12 bytes are over 10");
        assert!(!machine.is_taking() && !machine.expects_more());
        let (acts, events) = take(&mut machine);
        assert_eq!(events, [Event::BodyTooLarge]);
        assert!(
            matches!(&acts[..], [Action::Answer(http)] if http.status == 413),
            "{acts:?}"
        );
        // Over: the end of a body it refused asks nothing of the store.
        machine.body_end();
        let (acts, _) = take(&mut machine);
        assert!(matches!(
            &acts[..],
            [Action::Warn(super::super::Warning::OutOfOrder(_))]
        ));
    }

    #[test]
    fn a_chunk_the_host_cannot_read_is_answered_never_fingerprinted_short() {
        let (policy, budget) = (policy(), Rc::new(Budget::default()));
        let mut machine =
            Machine::take(&policy, RouteKind::Api, intaking(&policy, 0, &budget), None);
        assert!(machine.body_wants(4));
        machine.body_chunk(None);
        let (acts, _) = take(&mut machine);
        assert!(
            matches!(&acts[..], [Action::Answer(http)] if http.status == 503),
            "{acts:?}"
        );
        assert!(!machine.is_taking());
    }

    #[test]
    fn a_chunk_nothing_was_charged_for_is_out_of_order_and_never_taken_in() {
        let (policy, budget) = (policy(), Rc::new(Budget::default()));
        let mut machine =
            Machine::take(&policy, RouteKind::Api, intaking(&policy, 0, &budget), None);
        // A host that reads without asking would pass `max_request_body` (10) unseen.
        let before = format!("{machine:?}");
        machine.body_chunk(Some(b"0123456789abcdef"));
        let (acts, _) = take(&mut machine);
        assert!(
            matches!(
                &acts[..],
                [Action::Warn(super::super::Warning::OutOfOrder(_))]
            ),
            "{acts:?}"
        );
        assert_eq!(before, format!("{machine:?}"), "nothing taken in");
        // Charged for 4, handed 5: the same.
        assert!(machine.body_wants(4));
        let charged = format!("{machine:?}");
        machine.body_chunk(Some(b"01234"));
        let (acts, _) = take(&mut machine);
        assert!(matches!(&acts[..], [Action::Warn(_)]), "{acts:?}");
        assert_eq!(charged, format!("{machine:?}"));
        // What was charged is taken in, in any number of chunks.
        machine.body_chunk(Some(b"01"));
        machine.body_chunk(Some(b"23"));
        assert_eq!(take(&mut machine).0.len(), 0);
        machine.body_chunk(Some(b"4"));
        assert!(matches!(&take(&mut machine).0[..], [Action::Warn(_)]));
        assert!(machine.is_taking());
    }
}
