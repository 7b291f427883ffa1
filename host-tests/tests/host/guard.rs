//! The core's request machine (`idemgate_core::guard::Guarded`) under every
//! order of inputs a host can hand it: for each route shape (kind, ordered events, one-time token,
//! detached, failure modes), every sequence of store answers, ordering decisions, sends, upstream
//! heads, body chunks, ends and clock failures, depth first. An input the request does not wait
//! for must be said (`Warning::OutOfOrder`) and change nothing; after every input the actions so
//! far must keep the request's promises, checked by a model that watches only the actions:
//!
//! - its fate is decided once: one answer, or one of forward / pass / detach (an answer after a
//!   detach only if the exchange never went out);
//! - it goes out only as the owner of a won claim, after its event was let on and its token used;
//!   it passes only without a claim, after its token was used;
//! - a won claim is finished at most once, released if the request never went out, and (at the
//!   end of every path) finished or handed to its exchange; a callback route keeps only a 2xx;
//! - the resource claim the sequencer gave is settled once, as applied only by a 2xx answer
//!   that came to its end, or handed to the exchange; when the outcome is in doubt (sent with
//!   nothing to hear its answer, or an answer that never came whole) it is never given back but
//!   left to its lease with the key's claim.

use idemgate_core::answer::HttpAnswer;
use idemgate_core::client::payer::Payers;
use idemgate_core::client::scope::StorageKey;
use idemgate_core::decision::{DoubtCause, ResponseFacts};
use idemgate_core::events::Event;
use idemgate_core::guard::sequencer::{Ordered, Probe};
use idemgate_core::guard::{
    Action, Ask, Capture, Claim, Course, Guarded, Reply, Ruling, Sent, VerifiedToken, Warning,
};
use idemgate_core::policy::{FailureMode, Policy, RouteKind};
use idemgate_core::record::seal::SealError;
use idemgate_core::record::{OwnerToken, StoredBody, StoredResponse};
use idemgate_core::request::budget::{Budget, Reservation};
use idemgate_core::request::fingerprint::Fingerprint;
use idemgate_core::store::protocol::{ClaimOutcome, ConsumeOutcome, ProtocolError};
use idemgate_core::time::{Span, UnixMillis};
use std::rc::Rc;

/// The host's resource claim (a number the model hands out) and kept request.
type Machine = Guarded<u32, &'static str>;

const KEY: StorageKey = StorageKey::from_stored([1; 32]);
const OWNER: OwnerToken = OwnerToken([2; 16]);
const RESOURCE: u32 = 77;
const TOKEN: VerifiedToken = VerifiedToken {
    expires_at: UnixMillis(9_000),
    use_key: StorageKey::from_stored([3; 32]),
};

/// One route shape.
#[derive(Debug, Clone, Copy)]
struct Shape {
    /// `false`: a request without a key on an optional-key route.
    keyed: bool,
    kind: RouteKind,
    ordered: bool,
    token: bool,
    detached: bool,
    failure: FailureMode,
}

/// What a host can hand the machine.
#[derive(Debug, Clone, Copy)]
enum Input {
    Claim(u8),
    Consume(u8),
    Order(u8),
    Sent(u8),
    Head(Option<u16>),
    Chunk(bool),
    Ended(bool),
    ClockFailed,
    /// The client left.
    Gone,
}

const INPUTS: &[Input] = &[
    Input::Claim(0),
    Input::Claim(1),
    Input::Claim(2),
    Input::Claim(3),
    Input::Claim(4),
    Input::Claim(5),
    Input::Claim(6),
    Input::Claim(7),
    Input::Consume(0),
    Input::Consume(1),
    Input::Consume(2),
    Input::Consume(3),
    Input::Order(0),
    Input::Order(1),
    Input::Order(2),
    Input::Sent(0),
    Input::Sent(1),
    Input::Sent(2),
    Input::Head(Some(201)),
    Input::Head(Some(500)),
    Input::Head(None),
    Input::Chunk(true),
    Input::Chunk(false),
    Input::Ended(true),
    Input::Ended(false),
    Input::ClockFailed,
    Input::Gone,
];

fn claim_outcome(case: u8) -> Result<ClaimOutcome, ProtocolError> {
    let retry_after = Span::from_secs(2);
    Ok(match case {
        0 => ClaimOutcome::Forward {
            owner: OWNER,
            takeover: false,
        },
        1 => ClaimOutcome::Forward {
            owner: OWNER,
            takeover: true,
        },
        2 => ClaimOutcome::Conflict { retry_after },
        3 => ClaimOutcome::Replay(StoredResponse {
            status: 201,
            headers: Vec::new(),
            body: StoredBody::Kept(b"{}".to_vec()),
            seal: None,
        }),
        4 => ClaimOutcome::Mismatch,
        5 => ClaimOutcome::StoreFull { retry_after },
        6 => return Err(ProtocolError::Contention),
        _ => return Err(ProtocolError::Tampered(SealError::Missing)),
    })
}

fn consume_outcome(case: u8) -> Result<ConsumeOutcome, ProtocolError> {
    Ok(match case {
        0 => ConsumeOutcome::Consumed,
        1 => ConsumeOutcome::AlreadyUsed,
        2 => ConsumeOutcome::QuotaExceeded {
            retry_after: Span::from_secs(1),
            share: None,
        },
        _ => return Err(ProtocolError::Contention),
    })
}

fn ordered_event() -> Ordered {
    let json = r#"{"routes": [{"prefix": "/hooks", "kind": "callback", "key_from": [{"header": "x-delivery"}],
        "order": {"unsigned": "allow", "resource": {"header": "x-order"}, "event": {"header": "x-topic"},
                  "table": {"initial": "new", "transitions": [["new", "pay", "paid"]]}}}]}"#;
    let policy = Policy::from_json(json, &|_| None).unwrap();
    let headers = [("x-topic", &b"pay"[..]), ("x-order", b"o-1")];
    Probe::start(&policy.routes[0], headers)
        .unwrap()
        .finish()
        .unwrap()
        .unwrap()
}

/// What the model saw of the request, from its actions alone.
#[derive(Debug, Default, Clone)]
struct Seen {
    /// What the request waits for: a claim, a token use, an ordering decision, a send.
    waits: Option<&'static str>,
    won: bool,
    consumed: bool,
    let_on: bool,
    answered: bool,
    /// Forwarded, passed or detached (and then whether the exchange went out).
    out: Option<&'static str>,
    exchange: bool,
    /// A detached exchange went out but its answer can find nothing: in doubt.
    lost: bool,
    headed: Option<Option<u16>>,
    /// Body chunks handed in (the exploration stops at two: one read, one the host could not).
    chunks: u8,
    finishes: Vec<ResponseFacts>,
    resource: Option<u32>,
    settles: Vec<bool>,
    resource_to_exchange: bool,
    /// The client left: nothing is answered or sent for it any more.
    gone: bool,
}

impl Seen {
    fn fated(&self) -> bool {
        self.answered || self.out.is_some()
    }
}

struct Run {
    shape: Shape,
    policy: Policy,
    machine: Machine,
    seen: Seen,
}

impl Run {
    fn start(shape: Shape) -> Run {
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
            Machine::unguarded(token, Payers::NONE)
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
    fn step(&mut self, input: Input, path: &[Input]) -> bool {
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

    fn check(
        &mut self,
        actions: Vec<Action<u32, &'static str>>,
        events: &[Event],
        path: &[Input],
        input: Option<Input>,
    ) {
        let shape = self.shape;
        let at = || format!("{shape:?} {path:?} then {input:?}");
        // A claim is counted when it is won, a token's use when it is recorded; never otherwise.
        let won_now = matches!(input, Some(Input::Claim(0 | 1)));
        assert_eq!(events.contains(&Event::Claimed), won_now, "{}", at());
        let used_now = matches!(input, Some(Input::Consume(0)));
        assert_eq!(events.contains(&Event::TokenConsumed), used_now, "{}", at());
        let n = actions.len();
        for (i, action) in actions.into_iter().enumerate() {
            let seen = &mut self.seen;
            if matches!(
                action,
                Action::Ask(_) | Action::Sequence { .. } | Action::Detach { .. }
            ) {
                assert_eq!(i + 1, n, "{}: a waiting action is not the last", at());
            }
            if matches!(
                action,
                Action::Ask(_)
                    | Action::Sequence { .. }
                    | Action::Detach { .. }
                    | Action::Forward
                    | Action::Pass
                    | Action::Answer(_)
            ) {
                assert!(!seen.gone, "{}: {action:?} for a client gone", at());
            }
            match action {
                Action::Ask(Ask::Claim(claim)) => {
                    assert!(shape.keyed && seen.waits.is_none(), "{}", at());
                    assert_eq!((claim.key, claim.owner), (KEY, OWNER));
                    seen.waits = Some("claim");
                }
                // Only a late signed delivery looks its key up, and no shape here is one.
                Action::Ask(Ask::Replay { .. }) => panic!("{}: a look-up, not a claim", at()),
                Action::Ask(Ask::Consume { use_key, .. }) => {
                    assert!(shape.token && !seen.consumed && !seen.fated(), "{}", at());
                    assert_eq!(use_key, TOKEN.use_key);
                    assert!(
                        !shape.ordered || !seen.won || seen.let_on,
                        "{}: token before order",
                        at()
                    );
                    seen.waits = Some("consume");
                }
                Action::Sequence { key, owner, .. } => {
                    assert!(shape.ordered && seen.won && !seen.let_on, "{}", at());
                    assert!(
                        !seen.consumed,
                        "{}: the token used before the event was let on",
                        at()
                    );
                    assert_eq!((key, owner), (KEY, OWNER));
                    seen.waits = Some("order");
                }
                Action::Forward | Action::Detach { .. } => {
                    assert!(!seen.fated(), "{}: fated twice", at());
                    assert!(seen.won, "{}: out without a claim", at());
                    assert!(
                        !shape.token || seen.consumed,
                        "{}: out before its token's use",
                        at()
                    );
                    assert!(
                        !shape.ordered || seen.let_on,
                        "{}: out before its event",
                        at()
                    );
                    if let Action::Detach {
                        key,
                        owner,
                        held,
                        order,
                    } = action
                    {
                        assert!(shape.detached, "{}", at());
                        assert_eq!((key, owner, held.held), (KEY, OWNER, "kept"));
                        assert_eq!(order, seen.resource, "{}", at());
                        seen.resource_to_exchange = order.is_some();
                        seen.out = Some("detach");
                        seen.waits = Some("send");
                    } else {
                        assert!(!shape.detached, "{}", at());
                        seen.out = Some("forward");
                    }
                }
                Action::Pass => {
                    assert!(!seen.fated(), "{}: fated twice", at());
                    assert!(!seen.won, "{}: passed while holding a claim", at());
                    assert!(
                        !shape.token || seen.consumed,
                        "{}: passed before its token's use",
                        at()
                    );
                    assert!(
                        !shape.keyed || shape.failure == FailureMode::PassThrough,
                        "{}",
                        at()
                    );
                    seen.out = Some("pass");
                }
                Action::Answer(_) => {
                    assert!(!seen.answered, "{}: answered twice", at());
                    let undone_detach = seen.out == Some("detach") && !seen.exchange;
                    assert!(
                        seen.out.is_none() || undone_detach,
                        "{}: answered after going out",
                        at()
                    );
                    seen.answered = true;
                }
                Action::Finish {
                    key, owner, facts, ..
                } => {
                    assert!(seen.won, "{}: finished a claim it did not win", at());
                    assert_eq!((key, owner), (KEY, OWNER));
                    assert!(seen.finishes.is_empty(), "{}: finished twice", at());
                    assert!(
                        !seen.exchange,
                        "{}: finished what the exchange settles",
                        at()
                    );
                    let went = seen.out == Some("forward") || seen.out == Some("detach");
                    if !went
                        || (seen.out == Some("detach") && matches!(input, Some(Input::Sent(1))))
                    {
                        assert_eq!(facts, ResponseFacts::NeverReached, "{}: never sent", at());
                    }
                    if shape.kind == RouteKind::Callback {
                        if let ResponseFacts::Upstream { status, .. } = facts {
                            assert!((200..300).contains(&status), "{}", at());
                        }
                    }
                    seen.finishes.push(facts);
                }
                Action::SettleResource { claim, applied } => {
                    assert_eq!(
                        Some(claim),
                        seen.resource,
                        "{}: settled a claim never given",
                        at()
                    );
                    assert!(seen.settles.is_empty(), "{}: settled twice", at());
                    assert!(
                        !applied
                            || (matches!(seen.headed, Some(Some(200..=299)))
                                && matches!(input, Some(Input::Ended(true)))),
                        "{}: applied without a 2xx answer come to its end",
                        at()
                    );
                    seen.settles.push(applied);
                }
                Action::MarkApplied => {
                    let head = matches!(input, Some(Input::Head(Some(200..=299))));
                    assert!(seen.resource.is_some() && head, "{}", at());
                }
                Action::Warn(Warning::OutOfOrder(_)) => {
                    panic!("{}: an awaited input said out of order", at())
                }
                Action::Warn(_) => {}
            }
        }
    }

    /// At the end of a path (nothing awaited any more): nothing the request holds is left behind.
    fn check_end(&self, path: &[Input]) {
        let seen = &self.seen;
        let shape = self.shape;
        assert!(
            seen.fated() || seen.gone,
            "{shape:?} {path:?}: ended without a fate"
        );
        if seen.won {
            assert!(
                seen.finishes.len() == 1 || seen.exchange,
                "{shape:?} {path:?}: a won claim left behind"
            );
        }
        if seen.resource.is_some() && seen.let_on {
            // Left to its lease only when the outcome is in doubt: the event may still run.
            let in_doubt = seen.finishes.contains(&ResponseFacts::InDoubt);
            assert!(
                seen.settles.len() == 1 || seen.exchange || seen.lost || in_doubt,
                "{shape:?} {path:?}: a resource claim left behind"
            );
            assert!(
                !in_doubt || seen.settles.is_empty(),
                "{shape:?} {path:?}: a resource given back while its event is in doubt"
            );
        }
    }
}

/// Depth-first over every awaited input at every step; returns the paths explored to their end.
fn explore(shape: Shape, path: &mut Vec<Input>, ends: &mut usize) {
    let mut run = Run::start(shape);
    for (i, input) in path.iter().enumerate() {
        assert!(
            run.step(*input, &path[..i]),
            "a replayed path is deterministic"
        );
    }
    let mut any = false;
    for input in INPUTS {
        let mut probe = Run::start(shape);
        for input in path.iter() {
            probe.step(*input, &[]);
        }
        if matches!(input, Input::Chunk(_)) && probe.seen.chunks >= 2 {
            continue;
        }
        if probe.step(*input, path) {
            any = true;
            path.push(*input);
            explore(shape, path, ends);
            path.pop();
        }
    }
    if !any {
        run.check_end(path);
        *ends += 1;
    }
}

#[test]
fn every_order_of_inputs_keeps_the_requests_promises() {
    let mut shapes = Vec::new();
    for token in [false, true] {
        shapes.push(Shape {
            keyed: false,
            kind: RouteKind::Api,
            ordered: false,
            token,
            detached: false,
            failure: FailureMode::Reject,
        });
        for kind in [RouteKind::Api, RouteKind::Callback] {
            for ordered in [false, true] {
                for detached in [false, true] {
                    for failure in [FailureMode::Reject, FailureMode::PassThrough] {
                        shapes.push(Shape {
                            keyed: true,
                            kind,
                            ordered,
                            token,
                            detached,
                            failure,
                        });
                    }
                }
            }
        }
    }
    let mut ends = 0;
    for shape in &shapes {
        explore(*shape, &mut Vec::new(), &mut ends);
    }
    // Every shape has many ends: a path per store outcome at least.
    assert!(ends > shapes.len() * 8, "{ends} paths explored");
    eprintln!(
        "{} shapes, {ends} paths explored to their end",
        shapes.len()
    );
}
