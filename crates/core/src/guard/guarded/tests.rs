//! The machine driven through each path a request can take, as a host would drive it.

use super::*;
use crate::guard::sequencer::Probe;
use crate::order::OrderRule;
use crate::policy::FailureMode;
use crate::record::{StoredBody, StoredResponse};
use crate::request::budget::Budget;
use crate::store::StoreError;
use crate::{request::fingerprint::Fingerprint, time::UnixMillis};
use alloc::rc::Rc;
use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;

/// The host's resource claim (`O`) and kept request (`H`), as the machine sees them: opaque.
type Machine = Guarded<u8, &'static str>;
type Act = Action<u8, &'static str>;

const KEY: StorageKey = StorageKey::from_stored([1; 32]);
const OWNER: OwnerToken = OwnerToken([2; 16]);
const TOKEN: VerifiedToken = VerifiedToken {
    expires_at: UnixMillis(9_000),
    use_key: StorageKey::from_stored([3; 32]),
};

fn claim() -> Claim {
    Claim {
        key: KEY,
        fingerprint: Fingerprint([4; 32]),
        owner: OWNER,
        payers: Payers::NONE,
    }
}

fn ordered() -> Ordered {
    let json = r#"{"routes": [{"prefix": "/hooks", "kind": "callback", "key_from": [{"header": "x-delivery"}],
        "order": {"unsigned": "allow", "resource": {"header": "x-order"}, "event": {"header": "x-topic"},
                  "table": {"initial": "new", "transitions": [["new", "pay", "paid"]]}}}]}"#;
    let policy = Policy::from_json(json, &|_| None).unwrap_or_else(|e| panic!("{e}"));
    let headers = [("x-topic", &b"pay"[..]), ("x-order", b"o-1")];
    let probe = Probe::start(&policy.routes[0], headers).unwrap_or_else(|| panic!("no probe"));
    let ordered = probe.finish().unwrap_or_else(|_| panic!("no resource"));
    let ordered = ordered.unwrap_or_else(|| panic!("not ordered"));
    let _: &Arc<OrderRule> = &ordered.rule;
    ordered
}

/// Takes every action and event the machine has given.
fn take(machine: &mut Machine) -> (Vec<Act>, Vec<Event>) {
    assert!(machine.is_whole());
    let events = machine.events().iter().collect();
    (core::iter::from_fn(|| machine.poll()).collect(), events)
}

/// Hands the machine an input and takes what that input gave (dropping what came before).
macro_rules! given {
    ($m:ident . $($call:tt)*) => {{
        let _ = take(&mut $m);
        $m.$($call)*;
        take(&mut $m)
    }};
}

/// A request of `kind` whose claim is asked, with what it gave taken.
fn asked(
    policy: &Policy,
    kind: RouteKind,
    course: Course<Ordered>,
    held: Option<&'static str>,
) -> Machine {
    let held = held.map(|held| (held, relay(&Rc::new(Budget::default()), "10.0.0.1")));
    let mut machine = Machine::claim(policy, kind, claim(), course, held);
    assert_eq!(take(&mut machine).0, [Action::Ask(Ask::Claim(claim()))]);
    machine
}

/// An exchange's part of the relay budget `budget`, charged to `peer`: empty until its claim.
fn relay(budget: &Rc<Budget>, peer: &str) -> Reservation {
    Reservation::new(Rc::clone(budget), Rc::from(peer.as_bytes()))
}

fn forwarded() -> Result<ClaimOutcome, ProtocolError> {
    Ok(ClaimOutcome::Forward {
        owner: OWNER,
        takeover: false,
    })
}

fn released() -> Act {
    Action::Finish {
        key: KEY,
        owner: OWNER,
        facts: ResponseFacts::NeverReached,
        cause: DoubtCause::Other,
    }
}

fn status(action: Option<&Act>) -> Option<u16> {
    match action {
        Some(Action::Answer(http)) => Some(http.status),
        _ => None,
    }
}

#[test]
fn a_claimed_request_goes_out_and_its_answer_finishes_the_claim() {
    let policy = Policy::defaults();
    let course = Course::claimed(None, None);
    let mut machine = Machine::claim(&policy, RouteKind::Api, claim(), course, None);
    assert_eq!(take(&mut machine).0, [Action::Ask(Ask::Claim(claim()))]);
    let (acts, events) = given!(machine.answered(Reply::Claim(forwarded()), &policy));
    assert_eq!(acts, [Action::Forward]);
    assert_eq!(events, [Event::Claimed]);
    assert!(machine.is_forwarded());

    let head = [
        (":status", &b"201"[..]),
        ("content-type", b"application/json"),
    ];
    assert_eq!(
        given!(machine.upstream_head(Capture::head(head, &policy))).0,
        []
    );
    assert!(machine.upstream_wants(2));
    machine.upstream_chunk(Some(b"{}"));
    let (acts, _) = given!(machine.ended(true, || panic!("the answer is complete")));
    let [Action::Finish { facts, owner, .. }] = &acts[..] else {
        panic!("{acts:?}")
    };
    assert_eq!(*owner, OWNER);
    assert!(
        matches!(facts, ResponseFacts::Upstream { status: 201, body: Some(b), .. } if b == b"{}")
    );
    assert!(!machine.is_forwarded());
    // Over: a second end (the stream's log after its last byte) finishes nothing.
    assert_eq!(given!(machine.ended(false, || panic!("over"))).0, []);
}

#[test]
fn a_request_that_ends_without_its_answer_is_finished_with_what_the_host_saw() {
    let policy = Policy::defaults();
    let mut machine = asked(&policy, RouteKind::Api, Course::claimed(None, None), None);
    let _ = given!(machine.answered(Reply::Claim(forwarded()), &policy));
    // A head came, but the stream ended before the body did (client gone).
    let _ = given!(machine.upstream_head(Capture::head([(":status", &b"200"[..])], &policy)));
    let out = given!(machine.ended(false, || (ResponseFacts::InDoubt, DoubtCause::ClientGone)));
    let expected = Action::Finish {
        key: KEY,
        owner: OWNER,
        facts: ResponseFacts::InDoubt,
        cause: DoubtCause::ClientGone,
    };
    assert_eq!(out.0, [expected]);
}

#[test]
fn a_callback_route_keeps_only_a_2xx_answer() {
    let policy = Policy::defaults();
    let course = Course::claimed(None, None);
    let mut machine = asked(&policy, RouteKind::Callback, course, None);
    let _ = given!(machine.answered(Reply::Claim(forwarded()), &policy));
    let _ = given!(machine.upstream_head(Capture::head([(":status", &b"500"[..])], &policy)));
    let (acts, _) = given!(machine.ended(true, || panic!("complete")));
    assert_eq!(acts, [released()]);
}

#[test]
fn an_answer_from_the_store_ends_the_request_here() {
    let policy = Policy::defaults();
    let stored = StoredResponse {
        status: 201,
        headers: Vec::new(),
        body: StoredBody::Kept(b"{\"id\":1}".to_vec()),
        seal: None,
    };
    let mut machine = asked(
        &policy,
        RouteKind::Api,
        Course::claimed(None, Some(TOKEN)),
        None,
    );
    let (acts, events) =
        given!(machine.answered(Reply::Claim(Ok(ClaimOutcome::Replay(stored))), &policy));
    assert_eq!(events, [Event::Replayed]);
    let [Action::Answer(http)] = &acts[..] else {
        panic!("{acts:?}")
    };
    assert_eq!((http.status, &http.body[..]), (201, &b"{\"id\":1}"[..]));
    // Over: nothing is forwarded, and a late answer is a host's mistake, said so.
    assert!(!machine.is_forwarded());
    let late = given!(machine.answered(Reply::Claim(forwarded()), &policy));
    assert_eq!(
        late.0,
        [Action::Warn(Warning::OutOfOrder("a store answer"))]
    );
}

#[test]
fn the_event_is_ordered_then_the_token_used_and_a_refusal_gives_back_all_it_claimed() {
    let mut policy = Policy::defaults();
    policy.on_store_error = FailureMode::PassThrough;
    let course = Course::claimed(Some(ordered()), Some(TOKEN));
    let mut machine = asked(&policy, RouteKind::Callback, course, None);
    let (acts, _) = given!(machine.answered(Reply::Claim(forwarded()), &policy));
    assert_eq!(
        acts,
        [Action::Sequence {
            ordered: ordered(),
            key: KEY,
            owner: OWNER,
            payers: Payers::NONE,
        }]
    );
    let (acts, _) = given!(machine.ordered(Ruling::Forward(Some(7))));
    assert_eq!(
        acts,
        [Action::Ask(Ask::Consume {
            use_key: TOKEN.use_key,
            expires_at: TOKEN.expires_at,
            payers: Payers::NONE
        })]
    );
    // The token's use cannot be recorded: refused whatever the failure mode, and the most
    // actions one input gives (an `Out` holds four).
    let failed = Err(ProtocolError::Store(StoreError::Unavailable("down".into())));
    let (acts, events) = given!(machine.answered(Reply::Consume(failed), &policy));
    assert_eq!(events, [Event::StoreError]);
    assert_eq!(acts.len(), 4, "{acts:?}");
    assert!(matches!(acts[0], Action::Warn(Warning::StoreFailed(_))));
    assert_eq!(acts[1], released());
    assert_eq!(
        acts[2],
        Action::SettleResource {
            claim: 7,
            applied: false
        }
    );
    assert_eq!(status(acts.get(3)), Some(503));
}

#[test]
fn an_event_the_ordering_guard_answers_releases_the_delivery() {
    let policy = Policy::defaults();
    let course = Course::claimed(Some(ordered()), None);
    let mut machine = asked(&policy, RouteKind::Callback, course, None);
    let _ = given!(machine.answered(Reply::Claim(forwarded()), &policy));
    let early = HttpAnswer {
        status: 409,
        headers: Vec::new(),
        body: Vec::new(),
    };
    let (acts, _) = given!(machine.ordered(Ruling::Answer(early.clone())));
    assert_eq!(acts, [released(), Action::Answer(early)]);
}

#[test]
fn an_applied_event_is_marked_and_settled_with_the_answer() {
    let policy = Policy::defaults();
    let course = Course::claimed(Some(ordered()), None);
    let mut machine = asked(&policy, RouteKind::Callback, course, None);
    let _ = given!(machine.answered(Reply::Claim(forwarded()), &policy));
    assert_eq!(
        given!(machine.ordered(Ruling::Forward(Some(7)))).0,
        [Action::Forward]
    );
    let head = given!(machine.upstream_head(Capture::head([(":status", &b"204"[..])], &policy)));
    assert_eq!(head.0, [Action::MarkApplied]);
    let (acts, _) = given!(machine.ended(true, || panic!("complete")));
    assert_eq!(
        acts[0],
        Action::SettleResource {
            claim: 7,
            applied: true
        }
    );
    assert!(matches!(
        acts[1],
        Action::Finish {
            facts: ResponseFacts::Upstream { status: 204, .. },
            ..
        }
    ));
}

#[test]
fn a_detached_request_is_handed_to_its_exchange_or_given_back() {
    let policy = Policy::defaults();
    let start = || {
        let mut machine = asked(
            &policy,
            RouteKind::Api,
            Course::claimed(None, None),
            Some("kept"),
        );
        let (acts, _) = given!(machine.answered(Reply::Claim(forwarded()), &policy));
        // The exchange's answer is reserved from the relay budget before it is sent.
        let mut reserved = relay(&Rc::new(Budget::default()), "10.0.0.1");
        assert!(reserved.grow(policy.max_relay_body, policy.relay_limits()));
        assert_eq!(
            acts,
            [Action::Detach {
                key: KEY,
                owner: OWNER,
                held: Kept {
                    held: "kept",
                    body: Vec::new(),
                    reserved: None,
                    relay: reserved,
                },
                order: None
            }]
        );
        machine
    };
    let mut sent = start();
    assert_eq!(given!(sent.sent(Sent::Waiting)).0, []);

    let mut sent = start();
    let (acts, _) = given!(sent.sent(Sent::Failed { order: Some(7) }));
    assert_eq!(
        acts[..2],
        [
            released(),
            Action::SettleResource {
                claim: 7,
                applied: false
            }
        ]
    );
    assert_eq!(status(acts.get(2)), Some(503));

    // Sent, but its answer would find nothing: in doubt, so held until the lease ends.
    let mut sent = start();
    let (acts, _) = given!(sent.sent(Sent::Lost));
    assert!(matches!(
        acts[0],
        Action::Finish {
            facts: ResponseFacts::InDoubt,
            ..
        }
    ));
    let Some(Action::Answer(http)) = acts.get(1) else {
        panic!("{acts:?}")
    };
    let retry_after: String = http
        .headers
        .iter()
        .find(|(name, _)| name == "retry-after")
        .map(|(_, value)| value.clone())
        .unwrap_or_default();
    assert_eq!(retry_after, policy.lease.retry_after_secs().to_string());
}

/// The relay budget holds two exchanges' answers, a peer's part one: an exchange that does not
/// fit is never sent — its claim released (the retry runs), its token not used, answered 503
/// `relay_budget_exceeded` — and one fits again once an exchange in flight has ended.
#[test]
fn a_detached_exchange_over_the_relay_budget_is_released_unsent() {
    let mut policy = Policy::defaults();
    policy.relay_budget = 2 * policy.max_relay_body;
    policy.relay_budget_per_peer = policy.max_relay_body;
    let budget = Rc::new(Budget::default());
    // A claim won on a detached route that also uses a token: what its answer gave.
    let won = |peer: &str| {
        let held = Some(("kept", relay(&budget, peer)));
        let course = Course::claimed(None, Some(TOKEN));
        let mut machine = Machine::claim(&policy, RouteKind::Api, claim(), course, held);
        let given = given!(machine.answered(Reply::Claim(forwarded()), &policy));
        (machine, given)
    };
    // Its token is used next (then it is sent): the machine holds the exchange's part meanwhile.
    let sent = |(_, (acts, _)): &(Machine, (Vec<Act>, Vec<Event>))| {
        matches!(&acts[..], [Action::Ask(Ask::Consume { .. })])
    };
    let refused = |(_, (acts, events)): (Machine, (Vec<Act>, Vec<Event>))| {
        let [finish, Action::Answer(http)] = &acts[..] else {
            panic!("{acts:?}")
        };
        assert_eq!(
            finish,
            &released(),
            "the claim is released: nothing was sent"
        );
        assert_eq!(events, [Event::Claimed, Event::RelayBudgetExceeded]);
        let body = String::from_utf8_lossy(&http.body);
        assert!(body.contains("relay_budget_exceeded"), "{body}");
        assert_eq!((http.status, http.header("retry-after")), (503, Some("1")));
    };
    let first = won("10.0.0.1");
    assert!(sent(&first), "{:?}", first.1);
    // The same peer's second exchange is past its part; another peer's fits the VM's total.
    refused(won("10.0.0.1"));
    let second = won("10.0.0.2");
    assert!(sent(&second), "{:?}", second.1);
    refused(won("10.0.0.3"));
    assert_eq!(
        budget.used(),
        2 * policy.max_relay_body,
        "refusals reserved nothing"
    );
    // The first exchange ends (its machine, holding its part, is dropped with it): room again.
    drop(first);
    assert!(sent(&won("10.0.0.3")));
    assert_eq!(budget.used(), policy.max_relay_body);
}

#[test]
fn a_request_without_a_key_uses_its_token_then_passes() {
    let mut machine = Machine::unguarded(&Policy::defaults(), Some(TOKEN), Payers::NONE);
    assert!(matches!(
        take(&mut machine).0[..],
        [Action::Ask(Ask::Consume { .. })]
    ));
    let (acts, events) = given!(machine.answered(
        Reply::Consume(Ok(ConsumeOutcome::Consumed)),
        &Policy::defaults(),
    ));
    assert_eq!(acts, [Action::Pass]);
    assert_eq!(events, [Event::TokenConsumed, Event::Passthrough]);

    let mut machine = Machine::unguarded(&Policy::defaults(), None, Payers::NONE);
    let (acts, events) = take(&mut machine);
    assert_eq!(
        (acts, events),
        (vec![Action::Pass], vec![Event::Passthrough])
    );
}

#[test]
fn a_store_that_cannot_decide_passes_the_request_when_the_failure_mode_says_so() {
    let mut policy = Policy::defaults();
    policy.on_store_error = FailureMode::PassThrough;
    let mut machine = asked(
        &policy,
        RouteKind::Api,
        Course::claimed(Some(ordered()), Some(TOKEN)),
        None,
    );
    let failed = Err(ProtocolError::Contention);
    let (acts, events) = given!(machine.answered(Reply::Claim(failed), &policy));
    assert_eq!(events, [Event::StoreError, Event::Passthrough]);
    // Nothing claimed, so no event to order; the token is still used once.
    assert!(matches!(acts[0], Action::Warn(Warning::StoreFailed(_))));
    assert!(matches!(acts[1], Action::Ask(Ask::Consume { .. })));
    let (acts, events) =
        given!(machine.answered(Reply::Consume(Ok(ConsumeOutcome::Consumed)), &policy));
    assert_eq!(
        (acts, events),
        (vec![Action::Pass], vec![Event::TokenConsumed])
    );
}

/// A request let on because the store could not decide is marked degraded, by reason, for its
/// answer's header and its own counter; one passed for lack of a key is not.
#[test]
fn a_pass_the_store_could_not_decide_is_degraded_one_without_a_key_is_not() {
    let mut policy = Policy::defaults();
    policy.on_store_full = FailureMode::PassThrough;
    policy.on_store_error = FailureMode::PassThrough;
    let full = Ok(ClaimOutcome::StoreFull {
        retry_after: Span::from_secs(1),
    });
    let failed = Err(ProtocolError::Store(StoreError::Unavailable("down".into())));
    for (outcome, why) in [
        (full, Degraded::StoreFull),
        (failed, Degraded::StoreUnavailable),
    ] {
        let mut machine = asked(&policy, RouteKind::Api, Course::claimed(None, None), None);
        assert_eq!(machine.degraded(), None);
        let (acts, _) = given!(machine.answered(Reply::Claim(outcome), &policy));
        assert_eq!(acts.last(), Some(&Action::Pass));
        assert_eq!(machine.degraded(), Some(why));
    }
    let machine = Machine::unguarded(&policy, None, Payers::NONE);
    assert_eq!(machine.degraded(), None);
    // Claimed, replayed, refused: never degraded.
    let mut machine = asked(&policy, RouteKind::Api, Course::claimed(None, None), None);
    let _ = given!(machine.answered(Reply::Claim(Ok(ClaimOutcome::Mismatch)), &policy));
    assert_eq!(machine.degraded(), None);
}

#[test]
fn a_clock_the_host_cannot_read_answers_503_and_gives_back_the_claim() {
    let policy = Policy::defaults();
    let mut machine = asked(
        &policy,
        RouteKind::Api,
        Course::claimed(None, Some(TOKEN)),
        None,
    );
    let _ = given!(machine.answered(Reply::Claim(forwarded()), &policy));
    let (acts, _) = given!(machine.clock_failed());
    assert_eq!(acts[0], released());
    assert_eq!(status(acts.get(1)), Some(503));
}

#[test]
fn an_input_the_request_does_not_wait_for_is_said_and_changes_nothing() {
    let policy = Policy::defaults();
    let mut machine = asked(&policy, RouteKind::Api, Course::claimed(None, None), None);
    let wrong = given!(machine.answered(Reply::Consume(Ok(ConsumeOutcome::Consumed)), &policy));
    assert_eq!(
        wrong.0,
        [Action::Warn(Warning::OutOfOrder("a store answer"))]
    );
    let wrong = given!(machine.sent(Sent::Waiting));
    assert_eq!(
        wrong.0,
        [Action::Warn(Warning::OutOfOrder("a detached exchange"))]
    );
    let wrong = given!(machine.ordered(Ruling::Forward(None)));
    assert_eq!(
        wrong.0,
        [Action::Warn(Warning::OutOfOrder("an ordering decision"))]
    );
    // Still claiming: the right answer is taken.
    let (acts, _) = given!(machine.answered(Reply::Claim(forwarded()), &policy));
    assert_eq!(acts, [Action::Forward]);
}

/// The client gone at each point of the request's life.
mod gone;
