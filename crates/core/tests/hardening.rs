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
