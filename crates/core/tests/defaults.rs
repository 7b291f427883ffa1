//! `Policy::defaults()` is built directly; the compiled empty configuration must be the same
//! policy, field by field (so neither can drift from the other).
#![allow(clippy::unwrap_used)]

use idemgate_core::policy::Policy;

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
        capacity,
        shares,
        on_store_full,
        on_store_error,
        token,
        store,
    } = direct;
    assert_eq!(header, &compiled.header, "{text:?}: header");
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
    assert_eq!(capacity, &compiled.capacity, "{text:?}: capacity");
    assert_eq!(shares, &compiled.shares, "{text:?}: shares");
    assert_eq!(on_store_full, &compiled.on_store_full, "{text:?}");
    assert_eq!(on_store_error, &compiled.on_store_error, "{text:?}");
    assert_eq!(store, &compiled.store, "{text:?}: store");
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
    // A tenth of the store for each address and each identity (issue 23): of its records, and
    // of its memory bound — 10,000 × (64 KiB body + 60 KiB headers + 160 B) — in bytes.
    let tenth = Some(idemgate_core::store::share::Share {
        records: 1_000,
        bytes: 127_136_000,
    });
    assert_eq!((policy.shares.identity, policy.shares.peer), (tenth, tenth));
}

/// Four address groups (four IPv6 /64s cost an attacker next to nothing) each holding their whole
/// part of the hashing budget still leave room for another client's largest body: by default a
/// part is less than a quarter of the budget.
#[test]
fn four_address_groups_cannot_take_the_default_hashing_budget() {
    use idemgate_core::request::budget::{HashingBudget, Limits, Reservation};
    use std::rc::Rc;
    for text in ["{}", r#"{"hashing_budget": "8MiB"}"#] {
        let policy = Policy::from_json(text, &|_| None).unwrap();
        let limits = Limits::of(&policy);
        let budget = Rc::new(HashingBudget::default());
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
            fifth.grow(policy.max_request_body, limits),
            "{text}: four groups took the whole budget ({} of {})",
            budget.used(),
            limits.total
        );
    }
}
