//! Issue 14 in the core: the rules behind the Envoy tests of `crates/envoy/tests/envoy/hardening.rs`,
//! host-independent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use idemgate_core::policy::Policy;

fn policy(json: &str) -> Policy {
    Policy::from_json(json, &|_| None).unwrap()
}

/// Finding 4: every spelling an upstream would route to `/payments` meets the `/payments` rule,
/// and gives the one path the storage key and the fingerprint use.
#[test]
fn every_spelling_of_a_guarded_path_meets_its_rule() {
    let policy = policy(
        r#"{"routes": [{"prefix": "/payments", "key": "required"},
                       {"prefix": "/Exact", "case_sensitive": true},
                       {"prefix": "/", "key": "optional"}]}"#,
    );
    for path in [
        "/payments",
        "//payments",
        "/payments;jsessionid=1",
        "/%70ayments",
        "/Payments",
        "/PAYMENTS/7?x=1",
        "/a/../payments",
        "/./payments",
        "\\payments",
    ] {
        let matched = policy.match_request("POST", path).unwrap();
        assert_eq!(matched.route.prefix, "/payments", "{path}");
        assert!(
            matched.path.starts_with("/payments"),
            "{path}: {}",
            matched.path
        );
    }
    assert_eq!(
        policy.match_request("POST", "//payments;x").unwrap().path,
        policy.match_request("POST", "/Payments").unwrap().path
    );
    // A case-sensitive rule keeps case, in matching and in the path it gives.
    assert_eq!(
        policy.match_request("POST", "/Exact/1").unwrap().path,
        "/Exact/1"
    );
    assert_eq!(
        policy
            .match_request("POST", "/exact/1")
            .unwrap()
            .route
            .prefix,
        "/"
    );
    // Methods still decide.
    assert!(policy.match_request("GET", "/payments").is_none());
}

use idemgate_core::decision::ResponseFacts;
use idemgate_core::fingerprint::Fingerprint;
use idemgate_core::key::IdempotencyKey;
use idemgate_core::protocol::{ClaimOutcome, Engine};
use idemgate_core::record::OwnerToken;
use idemgate_core::scope::{Scope, StorageKey};
use idemgate_core::store::MemoryStore;
use idemgate_core::time::{Span, UnixMillis};

const T0: UnixMillis = UnixMillis(1_700_000_000_000);

fn key_of(source: &str, value: &str, n: usize) -> StorageKey {
    let scope = Scope {
        source,
        value: value.as_bytes(),
    };
    let key = IdempotencyKey::parse(format!("k-{n}").as_bytes()).unwrap();
    StorageKey::derive(scope, "POST", "/orders", &key)
}

fn claim(engine: &mut Engine<'_, MemoryStore>, key: StorageKey, now: UnixMillis) -> ClaimOutcome {
    engine
        .claim(key, Fingerprint([1; 32]), OwnerToken([7; 16]), now)
        .unwrap()
}

/// Finding 2: a scope holds at most its share of a cell — half for a peer by default, and what
/// `scope_quota` says for an identified client — so a flood of fresh keys from one client leaves
/// room for everyone else. Before issue 14 the flooding client took the whole cell.
#[test]
fn one_client_holds_at_most_its_share_of_a_cell() {
    // One cell of 8: the peer's share is 4 (the default), an identified client's 2.
    let policy = policy(
        r#"{"capacity": 8, "records_per_cell": 8, "scope_quota": 2, "ttl": "1h", "lease": "10s"}"#,
    );
    let mut store = MemoryStore::new();
    let mut engine = Engine {
        store: &mut store,
        policy: &policy,
    };
    let mut forwarded = 0;
    let mut refused = None;
    for n in 0..50 {
        match claim(&mut engine, key_of("peer", "10.0.0.66", n), T0) {
            ClaimOutcome::Forward { owner, .. } => {
                forwarded += 1;
                let key = key_of("peer", "10.0.0.66", n);
                let done = ResponseFacts::Upstream {
                    status: 201,
                    headers: Vec::new(),
                    body: Some(Vec::new()),
                };
                engine.finish(key, owner, Some(done), T0).unwrap();
            }
            other => refused = Some(other),
        }
    }
    assert_eq!(forwarded, 4, "the peer's share of the cell");
    // Its own records are completed and live an hour: that is when it gets room again.
    assert_eq!(
        refused,
        Some(ClaimOutcome::QuotaExceeded {
            retry_after: Span::from_secs(3600)
        })
    );
    let mut bob = 0;
    for n in 0..10 {
        if let ClaimOutcome::Forward { .. } = claim(
            &mut engine,
            key_of("header:authorization", "Bearer bob", n),
            T0,
        ) {
            bob += 1;
        }
    }
    assert_eq!(bob, 2, "an identified client's share");
    // Two more clients still find room: 4 + 2 + 2 = 8, the whole cell.
    for (who, n) in [("Bearer carol", 0), ("Bearer carol", 1)] {
        let outcome = claim(&mut engine, key_of("header:authorization", who, n), T0);
        assert!(
            matches!(outcome, ClaimOutcome::Forward { .. }),
            "{who}: {outcome:?}"
        );
    }
    // Full now; the answer says when the first record frees its space (Bob's and Carol's claims
    // are in flight: their lease ends in 10 s).
    let outcome = claim(
        &mut engine,
        key_of("header:authorization", "Bearer erin", 0),
        T0,
    );
    assert_eq!(
        outcome,
        ClaimOutcome::StoreFull {
            retry_after: Span::from_secs(10)
        }
    );
}

/// Finding 2: an in-flight claim takes space only until its lease ends (after it, a retry could
/// take it over anyway); a full cell gives that space to a new claim. Before issue 14 the claim
/// held it for the whole TTL and the new claim got `store_full` with `Retry-After` = the lease.
#[test]
fn claims_hold_space_only_until_their_lease_ends() {
    let policy = policy(r#"{"capacity": 2, "records_per_cell": 2, "ttl": "1h", "lease": "5s"}"#);
    let mut store = MemoryStore::new();
    let mut engine = Engine {
        store: &mut store,
        policy: &policy,
    };
    let alice = |n| key_of("header:authorization", "Bearer alice", n);
    assert!(matches!(
        claim(&mut engine, alice(1), T0),
        ClaimOutcome::Forward { .. }
    ));
    assert!(matches!(
        claim(&mut engine, alice(2), T0),
        ClaimOutcome::Forward { .. }
    ));
    assert_eq!(
        claim(&mut engine, alice(3), T0.after(Span(1000))),
        ClaimOutcome::StoreFull {
            retry_after: Span(4000)
        }
    );
    let after_lease = T0.after(Span::from_secs(5));
    assert!(matches!(
        claim(&mut engine, alice(3), after_lease),
        ClaimOutcome::Forward { .. }
    ));
}
