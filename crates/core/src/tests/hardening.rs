//! Hardening in the core: the rules behind the Envoy tests of
//! `crates/envoy/tests/envoy/hardening.rs`, host-independent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::policy::Policy;

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

use crate::client::payer::Payers;
use crate::client::scope::{Scope, StorageKey};
use crate::record::OwnerToken;
use crate::request::fingerprint::Fingerprint;
use crate::request::key::IdempotencyKey;
use crate::store::protocol::ClaimOutcome;
use crate::store::MemoryStore;
use crate::time::{Span, UnixMillis};
use crate::Protocol;

const T0: UnixMillis = UnixMillis(1_700_000_000_000);

fn key_of(source: &str, value: &str, n: usize) -> StorageKey {
    let scope = Scope {
        source,
        value: value.as_bytes(),
    };
    let key = IdempotencyKey::parse(format!("k-{n}").as_bytes()).unwrap();
    StorageKey::derive(scope, "POST", "/orders", &key)
}

fn claim(
    protocol: &mut Protocol<'_, MemoryStore>,
    key: StorageKey,
    now: UnixMillis,
) -> ClaimOutcome {
    protocol
        .claim(
            key,
            Fingerprint([1; 32]),
            OwnerToken([7; 16]),
            Payers::NONE,
            now,
        )
        .unwrap()
}

/// Finding 2: an in-flight claim takes space only until its lease ends (after it, a retry could
/// take it over anyway); a full cell gives that space to a new claim. Before this fix the claim
/// held it for the whole TTL and the new claim got `store_full` with `Retry-After` = the lease.
#[test]
fn claims_hold_space_only_until_their_lease_ends() {
    let policy = policy(r#"{"capacity": 2, "records_per_cell": 2, "ttl": "1h", "lease": "5s"}"#);
    let mut store = MemoryStore::new();
    let mut protocol = Protocol {
        store: &mut store,
        policy: &policy,
    };
    let alice = |n| key_of("header:authorization", "Bearer alice", n);
    assert!(matches!(
        claim(&mut protocol, alice(1), T0),
        ClaimOutcome::Forward { .. }
    ));
    assert!(matches!(
        claim(&mut protocol, alice(2), T0),
        ClaimOutcome::Forward { .. }
    ));
    assert_eq!(
        claim(&mut protocol, alice(3), T0.after(Span(1000))),
        ClaimOutcome::StoreFull {
            retry_after: Span(4000)
        }
    );
    let after_lease = T0.after(Span::from_secs(5));
    assert!(matches!(
        claim(&mut protocol, alice(3), after_lease),
        ClaimOutcome::Forward { .. }
    ));
}
