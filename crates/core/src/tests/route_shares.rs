//! A callback route's own budget (`routes[].share`) in the core: the route is the payer of its
//! deliveries' records, within its own share while the store is under pressure — by default the
//! whole store, so a provider's volume is never held at an identity's tenth. On a route that
//! checks no signature, the sender's address group pays too.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::client::identity::{ClientIdentity, ScopeHashes};
use crate::client::payer::Payers;
use crate::client::scope::{Scope, StorageKey};
use crate::decision::ResponseFacts;
use crate::policy::{Policy, Route};
use crate::record::OwnerToken;
use crate::request::fingerprint::Fingerprint;
use crate::request::key::IdempotencyKey;
use crate::store::protocol::{ClaimOutcome, FinishOutcome};
use crate::store::MemoryStore;
use crate::time::UnixMillis;
use crate::Protocol;
use std::prelude::rust_2021::Vec;

const T0: UnixMillis = UnixMillis(1_700_000_000_000);

/// A store of 4,000 records in cells of 64 (so that no cell fills by chance), whose shares
/// (a tenth: 400 records) bind from a tenth full; `route` is the callback route's JSON members.
fn policy(route: &str) -> Policy {
    let json = format!(
        r#"{{"capacity": 4000, "records_per_cell": 64, "shares": {{"pressure": "10%"}},
            "routes": [{{"prefix": "/hooks", "kind": "callback",
                         "key_from": [{{"header": "webhook-id"}}] {route}}},
                       {{"prefix": "/orders"}}]}}"#
    );
    Policy::from_json(&json, &|_| None).unwrap_or_else(|e| panic!("{e}"))
}

/// What a request is charged to and claims.
struct Request {
    key: StorageKey,
    payers: Payers,
}

/// Delivery `n` to the callback route from `address`, its payers as the guard makes them: the
/// route itself (within its own share), and the address group unless the route is signed.
fn delivery(policy: &Policy, address: &str, n: usize) -> Request {
    let route: &Route = &policy.routes[0];
    let scope = route.own_scope().unwrap();
    let client = ClientIdentity {
        source: scope.source.into(),
        value: scope.value.to_vec(),
        verified: route.signature.is_some(),
    };
    let group = policy.shares.peer_group(address);
    let payers = client
        .payers(
            &policy.shares,
            || Ok(Some(&group[..])),
            &ScopeHashes::default(),
            route.share,
        )
        .unwrap();
    let id = IdempotencyKey::parse(format!("evt-{n}").as_bytes()).unwrap();
    Request {
        key: StorageKey::derive(scope, "POST", "/hooks", &id),
        payers,
    }
}

/// Request `n` of an API client of its own address to `/orders`.
fn order(policy: &Policy, address: &str, n: usize) -> Request {
    let scope = Scope {
        source: "peer",
        value: address.as_bytes(),
    };
    let group = policy.shares.peer_group(address);
    let id = IdempotencyKey::parse(format!("k-{n}").as_bytes()).unwrap();
    Request {
        key: StorageKey::derive(scope, "POST", "/orders", &id),
        payers: policy.shares.payers(scope, false, Some(&group)),
    }
}

fn owner(n: usize) -> OwnerToken {
    let mut bytes = [0; 16];
    bytes[..8].copy_from_slice(&(n as u64).to_le_bytes());
    OwnerToken(bytes)
}

/// Claims `r` and, when forwarded, stores a 200.
fn run(protocol: &mut Protocol<'_, MemoryStore>, r: &Request, n: usize) -> ClaimOutcome {
    let outcome = protocol
        .claim(r.key, Fingerprint([1; 32]), owner(n), r.payers, T0)
        .unwrap();
    if let ClaimOutcome::Forward { owner, .. } = outcome {
        let facts = ResponseFacts::Upstream {
            status: 200,
            headers: Vec::new(),
            body: Some(b"ok".to_vec()),
        };
        let done = protocol.finish(r.key, owner, Some(facts), T0).unwrap();
        assert_eq!(done, FinishOutcome::Stored);
    }
    outcome
}

/// Puts the store past its pressure: 500 records of 50 API clients, each far within its share.
fn fill_past_pressure(protocol: &mut Protocol<'_, MemoryStore>, policy: &Policy) {
    for client in 0..50 {
        let address = format!("10.9.0.{client}");
        for n in 0..10 {
            let i = 1_000_000 + client * 100 + n;
            let outcome = run(protocol, &order(policy, &address, i), i);
            assert!(
                matches!(outcome, ClaimOutcome::Forward { .. }),
                "{outcome:?}"
            );
        }
    }
}

/// Counts the forwarded deliveries of `n` distinct events, each from its own address (so no
/// address group is the one that binds), and the first refusal.
fn deliver(
    protocol: &mut Protocol<'_, MemoryStore>,
    policy: &Policy,
    n: usize,
) -> (usize, Option<ClaimOutcome>) {
    let mut served = 0;
    let mut first_refusal = None;
    for i in 0..n {
        let address = format!("10.{}.{}.1", i / 250, i % 250);
        match run(protocol, &delivery(policy, &address, i), i) {
            ClaimOutcome::Forward { .. } => served += 1,
            refused => {
                first_refusal.get_or_insert(refused);
            }
        }
    }
    (served, first_refusal)
}

#[test]
fn a_callback_route_with_its_own_share_is_held_at_it_under_pressure() {
    let policy = policy(r#", "share": 250"#);
    assert_eq!(policy.routes[0].share.map(|s| s.records), Some(250));
    assert_eq!(policy.routes[1].share, None);
    let mut store = MemoryStore::new();
    let mut protocol = Protocol {
        store: &mut store,
        policy: &policy,
    };
    fill_past_pressure(&mut protocol, &policy);
    let (served, refusal) = deliver(&mut protocol, &policy, 400);
    assert_eq!(served, 250, "the route's share, and not one delivery more");
    assert!(
        matches!(refusal, Some(ClaimOutcome::QuotaExceeded { .. })),
        "{refusal:?}"
    );
    // An API client is still served: the route's share is the route's alone.
    let outcome = run(&mut protocol, &order(&policy, "10.200.0.1", 7), 7);
    assert!(
        matches!(outcome, ClaimOutcome::Forward { .. }),
        "{outcome:?}"
    );
}

#[test]
fn a_callback_route_by_default_has_the_whole_store_even_under_pressure() {
    let policy = policy("");
    assert_eq!(policy.routes[0].share, None);
    let identity = policy.shares.identity.map(|s| s.records);
    assert_eq!(identity, Some(400));
    let mut store = MemoryStore::new();
    let mut protocol = Protocol {
        store: &mut store,
        policy: &policy,
    };
    fill_past_pressure(&mut protocol, &policy);
    // Far past an identity's share (400): a provider is not one client among many.
    let (served, refusal) = deliver(&mut protocol, &policy, 1_500);
    assert_eq!((served, refusal), (1_500, None));
}

#[test]
fn an_unsigned_route_charges_the_senders_address_and_a_signed_one_does_not() {
    // Unsigned: one address sending made-up deliveries is held at its address group's share
    // (400) under pressure, though the route's own budget is the whole store.
    let unsigned = policy("");
    let mut store = MemoryStore::new();
    let mut protocol = Protocol {
        store: &mut store,
        policy: &unsigned,
    };
    fill_past_pressure(&mut protocol, &unsigned);
    let mut served = 0;
    for i in 0..600 {
        let r = delivery(&unsigned, "192.0.2.66", i);
        assert_eq!(
            r.payers.tags().count(),
            1,
            "the address group, not the route"
        );
        if matches!(run(&mut protocol, &r, i), ClaimOutcome::Forward { .. }) {
            served += 1;
        }
    }
    assert_eq!(served, 400);
    // Another sender still gets through.
    let outcome = run(
        &mut protocol,
        &delivery(&unsigned, "192.0.2.7", 9_999),
        9_999,
    );
    assert!(
        matches!(outcome, ClaimOutcome::Forward { .. }),
        "{outcome:?}"
    );

    // Signed: the provider's signature makes the route the payer alone.
    let signed = policy(r#", "signature": {"scheme": "github", "secret": "a-github-secret"}"#);
    let r = delivery(&signed, "192.0.2.66", 0);
    assert_eq!(
        r.payers,
        Payers::NONE,
        "nobody: the route's budget is the store"
    );
    let shared =
        policy(r#", "share": 250, "signature": {"scheme": "github", "secret": "a-github-secret"}"#);
    assert_eq!(delivery(&shared, "192.0.2.66", 0).payers.tags().count(), 1);
}
