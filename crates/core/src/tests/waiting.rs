//! A duplicate of a request in flight (same scope, key and payload) on a route that waits
//! (`in_flight.wait`): through the whole guard over the local store, as the filter drives it.
//! It is parked, asks the store again each time it is woken, and gets the first's answer as a
//! replay; past its deadline, over the host's bounds or with another payload it gets what it
//! gets today (409, 409, 422), and a client gone stops it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::edge::Edge;
use crate::decision::ResponseFacts;
use crate::guard::{self, Action, Ask, Event, Guarded, Headed, Reply};
use crate::record::OwnerToken;
use crate::time::Span;
use crate::{MemoryStore, Policy, Protocol, UnixMillis};
use std::prelude::rust_2021::{String, ToString, Vec};

const T0: UnixMillis = UnixMillis(1_700_000_000_000);

fn edge() -> Edge {
    Edge::at(T0)
}

/// `/orders` waits 5 s (the top level's default); `/quick` says it does not.
fn policy() -> Policy {
    let json = r#"{"lease": "30s", "in_flight": {"wait": "5s"},
        "routes": [{"prefix": "/orders"}, {"prefix": "/quick", "in_flight": {"wait": "0s"}}]}"#;
    Policy::from_json(json, &|_| None).unwrap()
}

type Machine = Guarded<(), ()>;

/// A request on `path` with key `k` and `body`, taken in: its first action asks its claim.
fn request(policy: &Policy, edge: &Edge, path: &str, body: &str) -> Machine {
    let headers = [
        (":method", &b"POST"[..]),
        (":path", path.as_bytes()),
        ("authorization", b"Bearer alice"),
        ("idempotency-key", b"\"k\""),
        ("content-type", b"application/json"),
    ];
    let (headed, _) = guard::head(policy, headers, true, edge);
    let Headed::Keyed(keyed) = headed else {
        panic!("not keyed: {headed:?}")
    };
    let mut machine = keyed.take::<(), ()>(policy, |_| ());
    assert!(machine.body_wants(body.len() as u64));
    machine.body_chunk(Some(body.as_bytes()));
    machine.body_end();
    machine
}

/// What the machine did with one round of actions, the store answering at `now`.
#[derive(Debug, Default, PartialEq)]
struct Round {
    asks: usize,
    parked: bool,
    forwarded: bool,
    answer: Option<(u16, Option<String>, Vec<u8>)>,
    events: Vec<Event>,
}

fn run(machine: &mut Machine, store: &mut MemoryStore, policy: &Policy, now: UnixMillis) -> Round {
    let mut round = Round::default();
    while let Some(action) = machine.poll() {
        let mut protocol = Protocol {
            store: &mut *store,
            policy,
        };
        match action {
            Action::Ask(Ask::Claim(c)) => {
                round.asks += 1;
                let outcome = protocol.claim(c.key, c.fingerprint, c.owner, c.payers, now);
                machine.answered(Reply::Claim(outcome), policy);
            }
            Action::Park { payer, .. } => {
                assert!(
                    payer.is_some(),
                    "a waiter takes its payer's share of the room"
                );
                round.parked = true;
            }
            Action::Forward => round.forwarded = true,
            Action::Answer(http) => {
                let retry = http.header("retry-after").map(ToString::to_string);
                round.answer = Some((http.status, retry, http.body));
            }
            other => panic!("not on this route: {other:?}"),
        }
    }
    round.events = machine.events().iter().collect();
    round
}

/// The first request's answer reaches the store: 201 `{"id":1}`.
fn first_answers(
    first: &mut Machine,
    store: &mut MemoryStore,
    policy: &Policy,
    facts: ResponseFacts,
) {
    let key = first.key().unwrap();
    let owner = OwnerToken([1; 16]);
    let mut protocol = Protocol { store, policy };
    protocol
        .finish(key, owner, Some(facts), T0.after(Span(300)))
        .unwrap();
}

fn created() -> ResponseFacts {
    ResponseFacts::Upstream {
        status: 201,
        headers: Vec::new(),
        body: Some(b"{\"id\":1}".to_vec()),
    }
}

/// The first request in flight and its duplicate parked at `T0`.
fn parked(policy: &Policy, edge: &Edge, store: &mut MemoryStore) -> (Machine, Machine) {
    let mut first = request(policy, edge, "/orders", "{\"sku\":1}");
    assert!(run(&mut first, store, policy, T0).forwarded);
    let mut second = request(policy, edge, "/orders", "{\"sku\":1}");
    let round = run(&mut second, store, policy, T0);
    assert!(round.parked && round.answer.is_none(), "{round:?}");
    assert!(round.events.is_empty(), "no 409 counted: {round:?}");
    assert!(second.is_waiting());
    second.parked(true, T0);
    (first, second)
}

#[test]
fn a_duplicate_waits_and_gets_the_first_answer_as_a_replay() {
    let (policy, edge, mut store) = (policy(), edge(), MemoryStore::new());
    let (mut first, mut second) = parked(&policy, &edge, &mut store);
    // Woken while the first is still in flight: it asks again and stays parked.
    second.wake(T0.after(Span(100)));
    let round = run(&mut second, &mut store, &policy, T0.after(Span(100)));
    assert_eq!((round.asks, round.answer.is_none()), (1, true), "{round:?}");
    assert_eq!(round.events, [Event::Waited], "its parking, counted once");
    assert!(second.is_waiting());
    first_answers(&mut first, &mut store, &policy, created());
    second.wake(T0.after(Span(400)));
    let round = run(&mut second, &mut store, &policy, T0.after(Span(400)));
    let (status, _, body) = round.answer.clone().unwrap();
    assert_eq!((status, &body[..]), (201, &b"{\"id\":1}"[..]));
    assert_eq!(round.events, [Event::Replayed]);
    assert!(!second.is_waiting());
    // Wakes that cross its answer change nothing.
    second.wake(T0.after(Span(500)));
    assert_eq!(run(&mut second, &mut store, &policy, T0).asks, 0);
}

#[test]
fn on_its_timer_a_waiter_asks_again_after_a_pause_that_doubles_up_to_400_ms() {
    let (policy, edge, mut store) = (policy(), edge(), MemoryStore::new());
    let (mut first, mut second) = parked(&policy, &edge, &mut store);
    let mut asked_at = Vec::new();
    for at in (0..=1_200).step_by(10) {
        second.tick(T0.after(Span(at)));
        if run(&mut second, &mut store, &policy, T0.after(Span(at))).asks == 1 {
            asked_at.push(at);
        }
    }
    assert_eq!(asked_at, [50, 150, 350, 750, 1_150]);
    // An announcement asks at once, whatever the pause.
    first_answers(&mut first, &mut store, &policy, created());
    second.wake(T0.after(Span(1_160)));
    let round = run(&mut second, &mut store, &policy, T0.after(Span(1_160)));
    assert_eq!(round.answer.unwrap().0, 201);
}

#[test]
fn a_released_first_lets_the_waiter_run_it() {
    let (policy, edge, mut store) = (policy(), edge(), MemoryStore::new());
    let (mut first, mut second) = parked(&policy, &edge, &mut store);
    first_answers(&mut first, &mut store, &policy, ResponseFacts::NeverReached);
    second.wake(T0.after(Span(400)));
    let round = run(&mut second, &mut store, &policy, T0.after(Span(400)));
    assert!(round.forwarded && round.answer.is_none(), "{round:?}");
    assert_eq!(round.events, [Event::Waited, Event::Claimed]);
}

#[test]
fn at_its_deadline_the_waiter_gets_409_with_the_lease_left() {
    let (policy, edge, mut store) = (policy(), edge(), MemoryStore::new());
    let (_first, mut second) = parked(&policy, &edge, &mut store);
    second.wake(T0.after(Span(5_000)));
    let round = run(&mut second, &mut store, &policy, T0.after(Span(5_000)));
    assert_eq!(round.asks, 0, "no question past the deadline");
    let (status, retry, _) = round.answer.unwrap();
    // The lease (30 s) ends 25 s after the deadline.
    assert_eq!((status, retry.as_deref()), (409, Some("25")));
    assert_eq!(
        round.events,
        [Event::Waited, Event::Conflict, Event::WaitExpired]
    );
}

#[test]
fn the_409_at_the_deadline_counts_the_lease_the_store_told_last() {
    // The first is released and a third request claims the key 1 s in: the waiter, asking
    // again then, learns of the new lease (30 s from then), and its 409 says what is left of
    // that one, not of the lease it saw when it was parked.
    let (policy, edge, mut store) = (policy(), edge(), MemoryStore::new());
    let (mut first, mut second) = parked(&policy, &edge, &mut store);
    first_answers(&mut first, &mut store, &policy, ResponseFacts::NeverReached);
    let mut third = request(&policy, &edge, "/orders", "{\"sku\":1}");
    let round = run(&mut third, &mut store, &policy, T0.after(Span(1_000)));
    assert!(round.forwarded, "{round:?}");
    second.wake(T0.after(Span(1_000)));
    let round = run(&mut second, &mut store, &policy, T0.after(Span(1_000)));
    assert_eq!((round.asks, round.answer.is_none()), (1, true), "{round:?}");
    second.tick(T0.after(Span(5_000)));
    let round = run(&mut second, &mut store, &policy, T0.after(Span(5_000)));
    let (status, retry, _) = round.answer.unwrap();
    assert_eq!((status, retry.as_deref()), (409, Some("26")));
}

#[test]
fn an_in_doubt_first_is_waited_for_until_the_deadline_then_409() {
    // Kept in flight (its outcome in doubt): the record stays in flight, so the waiter is
    // answered as before, at its deadline.
    let (policy, edge, mut store) = (policy(), edge(), MemoryStore::new());
    let (mut first, mut second) = parked(&policy, &edge, &mut store);
    first_answers(&mut first, &mut store, &policy, ResponseFacts::InDoubt);
    second.wake(T0.after(Span(1_000)));
    let round = run(&mut second, &mut store, &policy, T0.after(Span(1_000)));
    assert_eq!((round.asks, round.answer.is_none()), (1, true));
    second.wake(T0.after(Span(6_000)));
    let round = run(&mut second, &mut store, &policy, T0.after(Span(6_000)));
    assert_eq!(round.answer.unwrap().0, 409);
}

#[test]
fn a_waiter_over_the_bounds_gets_409_at_once() {
    let (policy, edge, mut store) = (policy(), edge(), MemoryStore::new());
    let mut first = request(&policy, &edge, "/orders", "{\"sku\":1}");
    run(&mut first, &mut store, &policy, T0);
    let mut second = request(&policy, &edge, "/orders", "{\"sku\":1}");
    assert!(run(&mut second, &mut store, &policy, T0).parked);
    second.parked(false, T0);
    let round = run(&mut second, &mut store, &policy, T0);
    let (status, retry, _) = round.answer.unwrap();
    assert_eq!((status, retry.as_deref()), (409, Some("30")));
    assert_eq!(round.events, [Event::Conflict, Event::WaitFull]);
    assert!(!second.is_waiting());
}

#[test]
fn another_payload_is_422_and_a_route_that_does_not_wait_409_at_once() {
    let (policy, edge, mut store) = (policy(), edge(), MemoryStore::new());
    let mut first = request(&policy, &edge, "/orders", "{\"sku\":1}");
    run(&mut first, &mut store, &policy, T0);
    let mut other = request(&policy, &edge, "/orders", "{\"sku\":2}");
    let round = run(&mut other, &mut store, &policy, T0);
    assert_eq!((round.parked, round.answer.unwrap().0), (false, 422));

    let mut first = request(&policy, &edge, "/quick", "{\"sku\":1}");
    run(&mut first, &mut store, &policy, T0);
    let mut second = request(&policy, &edge, "/quick", "{\"sku\":1}");
    let round = run(&mut second, &mut store, &policy, T0);
    assert_eq!((round.parked, round.answer.unwrap().0), (false, 409));
}

#[test]
fn a_client_gone_stops_waiting_and_is_answered_nothing() {
    let (policy, edge, mut store) = (policy(), edge(), MemoryStore::new());
    let (mut first, mut second) = parked(&policy, &edge, &mut store);
    second.gone();
    assert!(!second.is_waiting() && !second.is_orphaned());
    second.wake(T0.after(Span(100)));
    // Nothing asked, nothing answered: only its parking is counted.
    let round = run(&mut second, &mut store, &policy, T0);
    assert_eq!(round.events, [Event::Waited]);
    assert_eq!(
        Round {
            events: Vec::new(),
            ..round
        },
        Round::default()
    );

    // Gone while it asks again: the answer is taken, nothing is answered.
    let mut third = request(&policy, &edge, "/orders", "{\"sku\":1}");
    assert!(run(&mut third, &mut store, &policy, T0).parked);
    third.parked(true, T0);
    third.wake(T0.after(Span(100)));
    let Some(Action::Ask(Ask::Claim(c))) = third.poll() else {
        panic!("not asked")
    };
    third.gone();
    assert!(third.is_orphaned());
    first_answers(&mut first, &mut store, &policy, created());
    let mut protocol = Protocol {
        store: &mut store,
        policy: &policy,
    };
    let outcome = protocol.claim(c.key, c.fingerprint, c.owner, c.payers, T0.after(Span(400)));
    third.answered(Reply::Claim(outcome), &policy);
    let round = run(&mut third, &mut store, &policy, T0);
    assert_eq!(round.answer, None);
    assert!(!third.is_orphaned());
}

#[test]
fn the_wait_is_read_per_route_bounded_and_shorter_than_the_lease() {
    let wait = |json: &str| Policy::from_json(json, &|_| None).map(|policy| policy.routes[0].wait);
    assert_eq!(wait(r#"{"routes": [{"prefix": "/"}]}"#).unwrap(), None);
    assert_eq!(
        wait(r#"{"in_flight": {"wait": "2s"}, "routes": [{"prefix": "/"}]}"#).unwrap(),
        Some(Span::from_secs(2))
    );
    assert_eq!(
        wait(r#"{"in_flight": {"wait": "2s"}, "routes": [{"prefix": "/", "in_flight": {"wait": "3s"}}]}"#)
            .unwrap(),
        Some(Span::from_secs(3))
    );
    assert_eq!(
        wait(r#"{"in_flight": {"wait": "2s"}, "routes": [{"prefix": "/", "in_flight": {"wait": null}}]}"#)
            .unwrap(),
        Some(Span::from_secs(2)),
        "null is not given"
    );
    assert_eq!(
        wait(r#"{"in_flight": {"wait": "2s"}}"#).unwrap(),
        Some(Span::from_secs(2)),
        "the default route waits too"
    );
    for (json, field) in [
        (r#"{"in_flight": {"wait": "soon"}}"#, "in_flight.wait"),
        (
            r#"{"in_flight": {"wait": "61s"}, "lease": "120s"}"#,
            "in_flight.wait",
        ),
        (
            r#"{"lease": "5s", "routes": [{"prefix": "/", "in_flight": {"wait": "5s"}}]}"#,
            "routes[0].in_flight.wait",
        ),
    ] {
        let error = wait(json).unwrap_err();
        assert!(
            std::format!("{error}").contains(&std::format!("`{field}`")),
            "{json}: {error}"
        );
    }
    for (json, at) in [
        (r#"{"in_flight": {"wiat": "1s"}}"#, "in_flight"),
        (r#"{"in_flight": {"wait": 5}}"#, "in_flight.wait"),
        (
            r#"{"routes": [{"prefix": "/", "in_flight": []}]}"#,
            "routes[0].in_flight",
        ),
    ] {
        let error = wait(json).unwrap_err();
        assert!(std::format!("{error}").contains(at), "{json}: {error}");
    }
}
