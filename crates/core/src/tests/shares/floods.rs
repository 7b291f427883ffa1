//! Floods against the store: each flooder held at its share under pressure while the others are
//! served, a flood into an empty store held at the pressure, a full cell and a full store.

use super::support::{fill_past_pressure, policy, request, run, EXAMPLE, T0};
use crate::store::protocol::ClaimOutcome;
use crate::store::{Layout, MemoryStore};
use crate::time::Span;
use crate::Protocol;
use std::prelude::rust_2021::String;

/// The issue's floods, at a tenth of the example's capacity: made-up `Authorization` values from
/// one address, one `Authorization` from one address, and anonymous requests from two addresses,
/// into a store under pressure. Each flooder gets its share (a tenth) and then 429 with the TTL as
/// Retry-After; every other client still gets its requests through.
#[test]
fn no_flood_denies_the_store_to_others() {
    let policy = policy(EXAMPLE);
    assert_eq!(
        (
            policy.shares.identity.map(|s| s.records),
            policy.shares.peer.map(|s| s.records)
        ),
        (Some(100), Some(100))
    );
    type Flood = fn(usize) -> (Option<String>, &'static str);
    let floods: [(&str, Flood); 3] = [
        ("one identity", |_| {
            (Some("Bearer mallory".into()), "10.0.0.66")
        }),
        ("made-up identities", |n| {
            (Some(format!("Bearer m-{n}")), "10.0.0.66")
        }),
        ("two addresses", |n| {
            (None, if n % 2 == 0 { "10.0.0.66" } else { "10.0.0.67" })
        }),
    ];
    for (name, flood) in floods {
        let mut store = MemoryStore::new();
        let mut protocol = Protocol {
            store: &mut store,
            policy: &policy,
        };
        fill_past_pressure(&mut protocol, &policy);
        let (mut stored, mut refused) = (0, None);
        for n in 0..1_400 {
            let (who, from) = flood(n);
            match run(
                &mut protocol,
                &request(&policy, who.as_deref(), from, n),
                n,
                T0,
            ) {
                ClaimOutcome::Forward { .. } => stored += 1,
                ClaimOutcome::QuotaExceeded { retry_after, .. } => refused = Some(retry_after),
                other => panic!("{name}: {other:?}"),
            }
        }
        let addresses = if name == "two addresses" { 2 } else { 1 };
        assert_eq!(stored, 100 * addresses, "{name}: the flooder's share");
        assert_eq!(refused, Some(Span::from_secs(24 * 3600)), "{name}");
        // Everyone else: another address with its own Authorization, another anonymous address,
        // and a verified identity — each its own share.
        for (i, (who, from)) in [
            (Some("Bearer alice"), "10.0.0.1"),
            (Some("Bearer bob"), "10.0.0.2"),
            (None, "10.0.0.3"),
        ]
        .into_iter()
        .enumerate()
        {
            for n in 0..20 {
                let r = request(&policy, who, from, 10_000 + i * 100 + n);
                let outcome = run(&mut protocol, &r, 10_000 + n, T0);
                assert!(
                    matches!(outcome, ClaimOutcome::Forward { .. }),
                    "{name}: {who:?} {from}: {outcome:?}"
                );
            }
        }
    }
}

/// A flood into an empty store is served beyond its share only until the store reaches its
/// pressure (30 % of the example's 1,024 slots: 308 records); then it is held like any flood, and
/// the others still get their requests through.
#[test]
fn a_flood_into_an_empty_store_is_held_at_the_pressure() {
    let policy = policy(EXAMPLE);
    let mut store = MemoryStore::new();
    let mut protocol = Protocol {
        store: &mut store,
        policy: &policy,
    };
    let mut stored = 0;
    for n in 0..1_400 {
        let r = request(&policy, Some(&format!("Bearer m-{n}")), "10.0.0.66", n);
        match run(&mut protocol, &r, n, T0) {
            ClaimOutcome::Forward { .. } => stored += 1,
            ClaimOutcome::QuotaExceeded { retry_after, .. } => {
                assert_eq!(retry_after, Span::from_secs(24 * 3600));
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(stored, 308);
    for n in 0..20 {
        let r = request(&policy, Some("Bearer alice"), "10.0.0.1", 10_000 + n);
        let outcome = run(&mut protocol, &r, 10_000 + n, T0);
        assert!(
            matches!(outcome, ClaimOutcome::Forward { .. }),
            "{outcome:?}"
        );
    }
}

/// A cell full by chance while its store has room: a payer over its share under pressure is told
/// so (429), as it would be in any other cell — a flood never turns into `store_full` answers —
/// while a payer within its share gets `store_full`. Once the store itself is full, everyone does.
#[test]
fn a_full_cell_tells_a_flooder_its_share_and_a_full_store_tells_everyone() {
    let policy = policy(
        r#"{"capacity": 16, "records_per_cell": 8, "scope": ["peer"],
            "shares": {"peer": 2, "pressure": "0%"}}"#,
    );
    let layout = Layout {
        capacity: policy.capacity,
    };
    let mut store = MemoryStore::new();
    let mut protocol = Protocol {
        store: &mut store,
        policy: &policy,
    };
    // The n-th request of `from` whose key falls in `cell`.
    let in_cell = |from: &str, cell: u32, skip: usize| {
        (0..)
            .map(|n| (n, request(&policy, None, from, n)))
            .filter(|(_, r)| layout.cell_index(&r.key) == cell)
            .nth(skip)
            .unwrap()
    };
    let served = |protocol: &mut Protocol<'_, MemoryStore>, from: &str, cell: u32, skip: usize| {
        let (n, r) = in_cell(from, cell, skip);
        run(protocol, &r, n, T0)
    };
    for client in 0..8 {
        let from = format!("10.0.1.{client}");
        assert!(matches!(
            served(&mut protocol, &from, 0, 0),
            ClaimOutcome::Forward { .. }
        ));
    }
    for skip in 0..2 {
        assert!(matches!(
            served(&mut protocol, "10.0.0.66", 1, skip),
            ClaimOutcome::Forward { .. }
        ));
    }
    assert!(matches!(
        served(&mut protocol, "10.0.0.66", 0, 0),
        ClaimOutcome::QuotaExceeded { .. }
    ));
    assert!(matches!(
        served(&mut protocol, "10.0.0.1", 0, 0),
        ClaimOutcome::StoreFull { .. }
    ));
    // The rest of the store fills: now the flooder too is told the store is full.
    for client in 0..6 {
        let from = format!("10.0.2.{client}");
        assert!(matches!(
            served(&mut protocol, &from, 1, 0),
            ClaimOutcome::Forward { .. }
        ));
    }
    assert!(matches!(
        served(&mut protocol, "10.0.0.66", 0, 0),
        ClaimOutcome::StoreFull { .. }
    ));
}
