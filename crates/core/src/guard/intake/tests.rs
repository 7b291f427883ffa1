use super::*;
use crate::client::identity::ClientIdentity;
use crate::decision::admission::admit;
use crate::events::Event;
use crate::request::budget::{Budget, Reservation};
use crate::time::UnixMillis;
use alloc::format;
use alloc::rc::Rc;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;

const SCOPE: Scope<'static> = Scope {
    source: "header:authorization",
    value: b"Bearer alice",
};

/// A policy with one route, and a 10-byte `max_request_body`.
fn route_policy(route: &str) -> Policy {
    with_fingerprint("auto", route)
}

fn with_fingerprint(mode: &str, route: &str) -> Policy {
    Policy::from_json(
        &format!(
            r#"{{"max_request_body": 10, "fingerprint": {{"mode": "{mode}"}}, "routes": [{route}]}}"#
        ),
        &|_| None,
    )
    .unwrap()
}

/// Starts a `POST /orders` request with these headers through the policy's route; `asked` counts
/// the quota tags asked for.
fn begin(
    policy: &Policy,
    headers: &[(&str, &str)],
    client: Option<Scope<'_>>,
    asked: &Cell<u32>,
) -> Start {
    let lookup = |name: &str| crate::testing::header_values(headers, name);
    let admission = admit(&policy.routes[0], &lookup, UnixMillis(0)).unwrap();
    let tag = |scope: Scope<'_>| {
        asked.set(asked.get() + 1);
        KeyPrefix::of(scope)
    };
    let client = client.map(|scope| ClientIdentity {
        source: scope.source.into(),
        value: scope.value.to_vec(),
        verified: false,
    });
    start(admission, client, tag, "POST", "/orders")
}

fn intake(policy: &Policy, start: Start, host_copies: u64) -> Intake {
    let Start::Keyed(key) = start else {
        panic!("not keyed: {start:?}")
    };
    let headers = [("content-type", &b"application/json"[..])];
    let fingerprint = FingerprintBuilder::new(&policy.fingerprint, "POST", "/orders", headers);
    Intake::new(key, fingerprint, host_copies, policy)
}

/// A stream's reservation from a budget of its own, and the budget (to see what it holds).
fn reservation() -> (Rc<Budget>, Reservation) {
    let budget = Rc::new(Budget::default());
    (
        Rc::clone(&budget),
        Reservation::new(budget, Rc::from(&b"10.0.0.1"[..])),
    )
}

fn events(refusal: &BodyRefusal) -> Vec<Event> {
    refusal.events().iter().collect()
}

#[test]
fn a_header_key_is_the_storage_key_of_the_clients_scope_and_path() {
    let policy = route_policy(r#"{"prefix": "/orders"}"#);
    let asked = Cell::new(0);
    let start = begin(
        &policy,
        &[("idempotency-key", "\"k1\"")],
        Some(SCOPE),
        &asked,
    );
    let mut body = intake(&policy, start, 0);
    let (budget, mut reserved) = reservation();
    body.charge(4, &mut reserved).unwrap();
    assert_eq!(budget.used(), 4, "only the hasher keeps the body");
    body.update(b"{\"a\"").unwrap();
    body.charge(3, &mut reserved).unwrap();
    assert_eq!(budget.used(), 7);
    body.update(b":1}").unwrap();
    let Ok(Taken::Claim { key, .. }) = body.finish() else {
        panic!("no claim")
    };
    let parsed = crate::request::key::IdempotencyKey::parse(b"\"k1\"").unwrap();
    let expected = StorageKey::derive(SCOPE, "POST", "/orders", &parsed);
    assert_eq!(key, expected);
    assert_eq!(asked.get(), 1);
}

#[test]
fn without_a_key_or_a_scope_nothing_is_claimed_and_no_tag_is_asked_for() {
    let policy = route_policy(r#"{"prefix": "/orders", "key": "optional"}"#);
    let asked = Cell::new(0);
    assert!(matches!(
        begin(&policy, &[], Some(SCOPE), &asked),
        Start::Unguarded
    ));
    let keyed = [("idempotency-key", "\"k1\"")];
    assert!(matches!(
        begin(&policy, &keyed, None, &asked),
        Start::Unscoped
    ));
    let from_body = route_policy(r#"{"prefix": "/orders", "key_from": [{"json": "/id"}]}"#);
    assert!(matches!(
        begin(&from_body, &[], None, &asked),
        Start::Unscoped
    ));
    assert_eq!(asked.get(), 0);
}

#[test]
fn a_body_key_is_read_at_the_end_and_its_copy_is_charged() {
    let policy =
        route_policy(r#"{"prefix": "/orders", "key": "optional", "key_from": [{"json": "/id"}]}"#);
    let asked = Cell::new(0);
    let start = || begin(&policy, &[], Some(SCOPE), &asked);
    // The hasher, the key source's copy and the host's two (sequencer, detached exchange).
    let mut body = intake(&policy, start(), 2);
    let (budget, mut reserved) = reservation();
    body.charge(9, &mut reserved).unwrap();
    assert_eq!(budget.used(), 36);
    body.update(br#"{"id":"x"}"#[..9].as_ref()).unwrap();
    body.charge(1, &mut reserved).unwrap();
    assert_eq!(budget.used(), 40);
    body.update(b"}").unwrap();
    let Ok(Taken::Claim { key, .. }) = body.finish() else {
        panic!("no claim")
    };
    let parsed = crate::request::key::IdempotencyKey::parse(b"x").unwrap();
    let expected = StorageKey::derive(SCOPE, "POST", "/orders", &parsed);
    assert_eq!(key, expected);
    // A body without the id, on a route where the key is optional: forwarded unguarded.
    let mut body = intake(&policy, start(), 0);
    let (budget, mut reserved) = reservation();
    body.charge(2, &mut reserved).unwrap();
    assert_eq!(budget.used(), 4);
    body.update(b"{}").unwrap();
    assert_eq!(body.finish(), Ok(Taken::Unguarded));
    drop(reserved);
    assert_eq!(budget.used(), 0, "returned when the stream is done with it");
}

#[test]
fn each_refusal_has_its_answer_and_its_event() {
    let required =
        route_policy(r#"{"prefix": "/orders", "key": "required", "key_from": [{"json": "/id"}]}"#);
    let asked = Cell::new(0);
    let start = || begin(&required, &[], Some(SCOPE), &asked);

    // The limit is on the bytes seen: 10 pass, the 11th is refused before it is charged.
    let mut body = intake(&required, start(), 0);
    let (budget, mut reserved) = reservation();
    body.charge(10, &mut reserved).unwrap();
    assert_eq!(budget.used(), 20);
    let refusal = body.charge(1, &mut reserved).unwrap_err();
    assert_eq!(refusal, BodyRefusal::TooLarge { limit: 10 });
    assert_eq!(
        budget.used(),
        20,
        "nothing reserved for a body that is too large"
    );
    assert_eq!(
        refusal.answer(&crate::policy::ProblemStyle::DEFAULT).status,
        413
    );
    assert_eq!(events(&refusal), [Event::BodyTooLarge]);

    let mut body = intake(&required, start(), 0);
    body.charge(2, &mut reservation().1).unwrap();
    body.update(b"{}").unwrap();
    let refusal = body.finish().unwrap_err();
    assert!(matches!(
        refusal,
        BodyRefusal::Admission(Refusal::MissingKey { .. })
    ));
    assert_eq!(
        refusal.answer(&crate::policy::ProblemStyle::DEFAULT).status,
        400
    );
    assert_eq!(events(&refusal), [Event::MissingKey]);

    let header_key = with_fingerprint("json", r#"{"prefix": "/orders"}"#);
    let keyed = [("idempotency-key", "\"k1\"")];
    let mut body = intake(
        &header_key,
        begin(&header_key, &keyed, Some(SCOPE), &asked),
        0,
    );
    body.charge(3, &mut reservation().1).unwrap();
    let refusal = match body.update(b"{{{") {
        Err(refusal) => refusal,
        Ok(()) => body.finish().unwrap_err(),
    };
    assert!(matches!(refusal, BodyRefusal::Invalid(_)));
    assert_eq!(
        refusal.answer(&crate::policy::ProblemStyle::DEFAULT).status,
        400
    );
    assert_eq!(events(&refusal), [Event::InvalidBody]);

    // Over the peer's part of the hashing budget (a quarter of it by default): refused, and
    // nothing of the chunk reserved.
    let mut small = route_policy(r#"{"prefix": "/orders"}"#);
    small.hashing_budget = 100;
    small.hashing_budget_per_peer = 10;
    let mut body = intake(&small, begin(&small, &keyed, Some(SCOPE), &asked), 2);
    let (budget, mut reserved) = reservation();
    body.charge(3, &mut reserved).unwrap();
    assert_eq!(budget.used(), 9, "three copies of 3 bytes");
    let refusal = body.charge(1, &mut reserved).unwrap_err();
    assert_eq!(refusal, BodyRefusal::OverBudget);
    assert_eq!(budget.used(), 9);
    assert_eq!(
        refusal.answer(&crate::policy::ProblemStyle::DEFAULT).status,
        503
    );
    assert_eq!(events(&refusal), [Event::HashingBudgetExceeded]);
}

proptest::proptest! {
    /// However the host's body arrives — in any cuts, with the key in the body or in a header —
    /// the intake takes it to the same claim as in one piece, and the budget holds each kept copy
    /// of every byte until the stream lets its reservation go.
    #[test]
    fn the_chunks_of_a_body_never_change_its_claim(
        id in "[a-z0-9]{1,8}",
        pad in "[a-z ]{0,40}",
        cuts in proptest::collection::vec(0usize..64, 0..6),
        from_body in proptest::bool::ANY,
        host_copies in 0u64..3,
    ) {
        let mut policy = route_policy(if from_body {
            r#"{"prefix": "/orders", "key_from": [{"json": "/id"}]}"#
        } else {
            r#"{"prefix": "/orders"}"#
        });
        policy.max_request_body = 1 << 20;
        let body = format!(r#"{{"pad":"{pad}","id":"{id}"}}"#);
        let header = format!("\"{id}\"");
        let headers: Vec<(&str, &str)> = if from_body { vec![] } else { vec![("idempotency-key", &header)] };
        let asked = Cell::new(0);
        let take = |pieces: &[&[u8]]| {
            let mut intake = intake(&policy, begin(&policy, &headers, Some(SCOPE), &asked), host_copies);
            let (budget, mut reserved) = reservation();
            for piece in pieces {
                intake.charge(piece.len() as u64, &mut reserved).unwrap();
                intake.update(piece).unwrap();
            }
            let held = budget.used();
            let taken = intake.finish();
            drop(reserved);
            (taken, held, budget.used())
        };
        let whole = take(&[body.as_bytes()]);
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
        points.sort_unstable();
        let mut pieces = Vec::new();
        let mut at = 0;
        for point in points.into_iter().chain([body.len()]) {
            pieces.push(&body.as_bytes()[at..point]);
            at = point;
        }
        let cut = take(&pieces);
        proptest::prop_assert_eq!(&cut, &whole);
        let claimed = matches!(whole.0, Ok(Taken::Claim { .. }));
        proptest::prop_assert!(claimed, "no claim: {:?}", whole.0);
        let copies = 1 + u64::from(from_body) + host_copies;
        proptest::prop_assert_eq!(whole.1, body.len() as u64 * copies);
        proptest::prop_assert_eq!(whole.2, 0);
    }
}
