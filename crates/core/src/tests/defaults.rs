//! `Policy::defaults()` is built directly; the compiled empty configuration must be the same
//! policy, field by field (so neither can drift from the other).
#![allow(clippy::unwrap_used)]

use crate::policy::Policy;
use std::prelude::rust_2021::Vec;

/// Field by field, as values. The destructuring names every field, so a field added to `Policy`
/// fails to compile here until it is compared too.
fn assert_same(direct: &Policy, compiled: &Policy, text: &str) {
    let Policy {
        header,
        routes,
        scope,
        fingerprint,
        ttl,
        lease,
        replay_headers,
        store_rule,
        max_request_body,
        hashing_budget,
        hashing_budget_per_peer,
        max_response_body,
        max_relay_body,
        relay_budget,
        relay_budget_per_peer,
        capacity,
        shares,
        on_store_full,
        on_store_error,
        token,
        store,
        published,
        problems,
    } = direct;
    assert_eq!(header, &compiled.header, "{text:?}: header");
    assert_eq!(problems, &compiled.problems, "{text:?}: problems");
    assert_eq!(routes, &compiled.routes, "{text:?}: routes");
    assert_eq!(scope, &compiled.scope, "{text:?}: scope");
    assert_eq!(fingerprint, &compiled.fingerprint, "{text:?}: fingerprint");
    assert_eq!(ttl, &compiled.ttl, "{text:?}: ttl");
    assert_eq!(lease, &compiled.lease, "{text:?}: lease");
    assert_eq!(replay_headers, &compiled.replay_headers, "{text:?}: replay");
    assert_eq!(store_rule, &compiled.store_rule, "{text:?}: store rule");
    assert_eq!(max_request_body, &compiled.max_request_body, "{text:?}");
    assert_eq!(hashing_budget, &compiled.hashing_budget, "{text:?}");
    assert_eq!(
        hashing_budget_per_peer, &compiled.hashing_budget_per_peer,
        "{text:?}"
    );
    assert_eq!(max_response_body, &compiled.max_response_body, "{text:?}");
    assert_eq!(max_relay_body, &compiled.max_relay_body, "{text:?}");
    assert_eq!(relay_budget, &compiled.relay_budget, "{text:?}");
    assert_eq!(
        relay_budget_per_peer, &compiled.relay_budget_per_peer,
        "{text:?}"
    );
    assert_eq!(capacity, &compiled.capacity, "{text:?}: capacity");
    assert_eq!(shares, &compiled.shares, "{text:?}: shares");
    assert_eq!(on_store_full, &compiled.on_store_full, "{text:?}");
    assert_eq!(on_store_error, &compiled.on_store_error, "{text:?}");
    assert_eq!(store, &compiled.store, "{text:?}: store");
    assert_eq!(published, &compiled.published, "{text:?}: policy path");
    // A token policy holds a secret, which has no `==` (on purpose): the defaults issue none.
    assert!(
        token.is_none() && compiled.token.is_none(),
        "{text:?}: token"
    );
}

#[test]
fn the_defaults_are_the_compiled_empty_configuration() {
    let direct = Policy::defaults();
    for text in ["{}", "", "  \n"] {
        let compiled = Policy::from_json(text, &|_| None).unwrap();
        assert_same(&direct, &compiled, text);
    }
}

#[test]
fn the_defaults_guard_posts_and_patches_everywhere() {
    let policy = Policy::defaults();
    assert_eq!(policy.routes.len(), 1);
    assert!(policy.route_for("POST", "/orders").is_some());
    assert!(policy.route_for("PATCH", "/anything/else").is_some());
    assert!(policy.route_for("GET", "/orders").is_none());
    assert_eq!(policy.capacity.cells, 1250);
    assert_eq!(policy.capacity.per_cell, 8);
    // A tenth of the store for each address and each identity: of its records, and
    // of its byte bound (`max_memory`, 256 MiB) in bytes.
    let tenth = Some(crate::client::payer::Share {
        records: 1_000,
        bytes: 26_843_545,
    });
    assert_eq!((policy.shares.identity, policy.shares.peer), (tenth, tenth));
    assert_eq!(policy.shares.memory, 256 * 1024 * 1024);
    // Answers of a mebibyte are kept whole, and relayed whole up to 8 MiB.
    assert_eq!(policy.max_response_body, 1024 * 1024);
    assert_eq!(policy.max_relay_body, 8 * 1024 * 1024);
    // 64 exchanges' answers in transit per worker, an eighth of them (eight) per peer group.
    assert_eq!(policy.relay_budget, 512 * 1024 * 1024);
    assert_eq!(policy.relay_budget_per_peer, 64 * 1024 * 1024);
}

/// Four address groups, each holding its whole part of a budget of `limits`, still leave room
/// for another client's `one` (its largest body, its exchange): four IPv6 /64s cost an attacker
/// next to nothing.
fn four_groups_leave_room(text: &str, limits: crate::request::budget::Limits, one: u64) {
    use crate::request::budget::{Budget, Reservation};
    use std::rc::Rc;
    let budget = Rc::new(Budget::default());
    let group = |n: u8| Reservation::new(Rc::clone(&budget), Rc::from(&[n][..]));
    let held: Vec<Reservation> = (0..4)
        .map(|n| {
            let mut part = group(n);
            assert!(part.grow(limits.per_peer, limits), "{text}: group {n}");
            part
        })
        .collect();
    assert_eq!(held.len(), 4);
    let mut fifth = group(4);
    assert!(
        fifth.grow(one, limits),
        "{text}: four groups took the whole budget ({} of {})",
        budget.used(),
        limits.total
    );
}

/// By default a part of the hashing budget is less than a quarter of it.
#[test]
fn four_address_groups_cannot_take_the_default_hashing_budget() {
    for text in ["{}", r#"{"hashing_budget": "8MiB"}"#] {
        let policy = Policy::from_json(text, &|_| None).unwrap();
        let limits = policy.hashing_limits();
        four_groups_leave_room(text, limits, policy.max_request_body);
    }
}

/// The same for the relay budget, by default and with a smaller `upstream.max_body`.
#[test]
fn four_address_groups_cannot_take_the_default_relay_budget() {
    for text in ["{}", r#"{"upstream": {"max_body": "1MiB"}}"#] {
        let policy = Policy::from_json(text, &|_| None).unwrap();
        let limits = policy.relay_limits();
        four_groups_leave_room(text, limits, policy.max_relay_body);
    }
}
