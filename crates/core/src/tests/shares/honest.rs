//! Clients below their share are never refused, wherever their keys hash and however busy.

use super::support::{policy, request, run, T0};
use crate::store::protocol::ClaimOutcome;
use crate::store::{share, Layout, MemoryStore};
use crate::Protocol;

/// The opposite failure: a client below its share is never refused, wherever its keys hash —
/// the old per-cell share refused about one in four thousand of them by chance.
#[test]
fn a_client_below_its_share_is_never_refused() {
    let policy = policy(
        r#"{"capacity": 100000, "records_per_cell": 8, "shares": {"peer": 5000, "pressure": "0%"}}"#,
    );
    let mut store = MemoryStore::new();
    let mut protocol = Protocol {
        store: &mut store,
        policy: &policy,
    };
    for n in 0..5_000 {
        let outcome = run(
            &mut protocol,
            &request(&policy, None, "127.0.0.1", n),
            n,
            T0,
        );
        assert!(
            matches!(outcome, ClaimOutcome::Forward { .. }),
            "{n}: {outcome:?}"
        );
    }
    let over = run(
        &mut protocol,
        &request(&policy, None, "127.0.0.1", 5_000),
        5_000,
        T0,
    );
    assert!(
        matches!(over, ClaimOutcome::QuotaExceeded { .. }),
        "{over:?}"
    );
    let layout = Layout {
        capacity: policy.capacity,
    };
    let tag = request(&policy, None, "127.0.0.1", 0)
        .payers
        .tags()
        .next()
        .unwrap();
    let held = share::held(protocol.store, &layout, tag, T0).unwrap();
    assert_eq!(held.records, 5_000);
}

/// The shipped defaults (capacity 10,000, a tenth per payer, records for 24 h): one client — one
/// `Authorization`, one address — sending 1,500 requests with fresh keys in a day is served every
/// one. Its share binds only once the store is half full, which its 1,500 records are far from.
#[test]
fn a_busy_client_is_served_while_the_store_has_room() {
    let policy = policy("{}");
    assert_eq!(policy.shares.peer.map(|s| s.records), Some(1_000));
    let mut store = MemoryStore::new();
    let mut protocol = Protocol {
        store: &mut store,
        policy: &policy,
    };
    for n in 0..1_500 {
        let r = request(&policy, Some("Bearer merchant"), "10.0.0.5", n);
        let outcome = run(&mut protocol, &r, n, T0);
        assert!(
            matches!(outcome, ClaimOutcome::Forward { .. }),
            "request {n}: {outcome:?}"
        );
    }
    let layout = Layout {
        capacity: policy.capacity,
    };
    let group = request(&policy, Some("Bearer merchant"), "10.0.0.5", 0)
        .payers
        .tags()
        .next()
        .unwrap();
    assert_eq!(
        share::held(&mut store, &layout, group, T0).unwrap().records,
        1_500
    );
}
