//! Configuration of how a claimed request reaches the upstream (issue 12): `upstream` and the
//! per-route `forward`, `cluster`, `upstream_timeout`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use idemgate_core::policy::{Detached, Forward, Policy};
use idemgate_core::time::Span;

fn compile(text: &str) -> Result<Policy, String> {
    Policy::from_json(text, &|_| None).map_err(|e| e.to_string())
}

#[test]
fn without_a_cluster_routes_use_the_router() {
    let policy = compile(r#"{"routes":[{"prefix":"/"}]}"#).unwrap();
    assert_eq!(policy.routes[0].forward, Forward::Router);
    assert_eq!(compile("{}").unwrap().routes[0].forward, Forward::Router);
}

#[test]
fn with_a_cluster_detached_is_the_default() {
    let policy = compile(
        r#"{"upstream":{"cluster":"backend","timeout":"3s"},"lease":"10s",
            "routes":[{"prefix":"/a"},{"prefix":"/b","forward":"router"},
                      {"prefix":"/c","cluster":"other","upstream_timeout":"1s"}]}"#,
    )
    .unwrap();
    assert_eq!(
        policy.routes[0].forward,
        Forward::Detached(Detached {
            cluster: "backend".into(),
            timeout: Span::from_secs(3)
        })
    );
    assert_eq!(policy.routes[1].forward, Forward::Router);
    assert_eq!(
        policy.routes[2].forward,
        Forward::Detached(Detached {
            cluster: "other".into(),
            timeout: Span::from_secs(1)
        })
    );
    // The default route list follows `upstream` too.
    let policy = compile(r#"{"upstream":{"cluster":"backend"}}"#).unwrap();
    assert_eq!(
        policy.routes[0].forward,
        Forward::Detached(Detached {
            cluster: "backend".into(),
            timeout: Span::from_secs(15)
        })
    );
    assert_eq!(policy.max_relay_body, 1024 * 1024);
}

#[test]
fn a_timeout_not_shorter_than_the_lease_is_refused_naming_the_field() {
    let e = compile(r#"{"upstream":{"cluster":"b","timeout":"60s"}}"#).unwrap_err();
    assert!(e.contains("`upstream.timeout`"), "{e}");
    assert!(e.contains("shorter than `lease`"), "{e}");
    let e = compile(r#"{"lease":"4s","upstream":{"cluster":"b","timeout":"3s"},"routes":[{"prefix":"/","upstream_timeout":"5s"}]}"#)
        .unwrap_err();
    assert!(e.contains("`routes[0].upstream_timeout`"), "{e}");
    // The default timeout (15 s) against a short lease.
    let e = compile(r#"{"lease":"10s","upstream":{"cluster":"b"}}"#).unwrap_err();
    assert!(e.contains("`upstream.timeout`"), "{e}");
    assert!(compile(r#"{"lease":"4s","upstream":{"cluster":"b","timeout":"3s"}}"#).is_ok());
}

#[test]
fn inconsistent_routes_are_refused_naming_the_field() {
    let e = compile(r#"{"routes":[{"prefix":"/","forward":"detached"}]}"#).unwrap_err();
    assert!(e.contains("`routes[0].cluster`"), "{e}");
    let e = compile(r#"{"routes":[{"prefix":"/","forward":"router","cluster":"b"}]}"#).unwrap_err();
    assert!(e.contains("`routes[0].cluster`"), "{e}");
    let e = compile(r#"{"upstream":{"cluster":""}}"#).unwrap_err();
    assert!(e.contains("`upstream.cluster`"), "{e}");
    let e = compile(r#"{"upstream":{"cluster":"b","port":1}}"#).unwrap_err();
    assert!(e.contains("upstream.port"), "{e}");
    let e = compile(r#"{"routes":[{"prefix":"/","forward":"sideways"}]}"#).unwrap_err();
    assert!(e.contains("routes[0].forward"), "{e}");
    let e = compile(r#"{"upstream":{"cluster":"b","max_body":"5GiB"}}"#).unwrap_err();
    assert!(e.contains("`upstream.max_body`"), "{e}");
}
