//! Configuration of how a claimed request reaches the upstream (detached, then back into Envoy):
//! `upstream` (`reentry`, or the explicit `cluster_skipping_routes_and_filters`) and the per-route
//! `forward` and `upstream_timeout`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::policy::{Detached, Forward, Policy, Via};
use crate::time::Span;
use std::prelude::rust_2021::{String, ToString};

fn compile(text: &str) -> Result<Policy, String> {
    Policy::from_json(text, &|_| None).map_err(|e| e.to_string())
}

fn detached(cluster: &str, via: Via, secs: u64) -> Forward {
    Forward::Detached(Detached {
        cluster: cluster.into(),
        via,
        timeout: Span::from_secs(secs),
    })
}

#[test]
fn without_a_destination_routes_use_the_router() {
    let policy = compile(r#"{"routes":[{"prefix":"/"}]}"#).unwrap();
    assert_eq!(policy.routes[0].forward, Forward::Router);
    assert_eq!(compile("{}").unwrap().routes[0].forward, Forward::Router);
}

#[test]
fn with_reentry_detached_is_the_default() {
    let policy = compile(
        r#"{"upstream":{"reentry":"idemgate_reentry","timeout":"3s"},"lease":"10s",
            "routes":[{"prefix":"/a"},{"prefix":"/b","forward":"router"},
                      {"prefix":"/c","upstream_timeout":"1s"}]}"#,
    )
    .unwrap();
    assert_eq!(
        policy.routes[0].forward,
        detached("idemgate_reentry", Via::Reentry, 3)
    );
    assert_eq!(policy.routes[1].forward, Forward::Router);
    assert_eq!(
        policy.routes[2].forward,
        detached("idemgate_reentry", Via::Reentry, 1)
    );
    // The default route list follows `upstream` too.
    let policy = compile(r#"{"upstream":{"reentry":"back"}}"#).unwrap();
    assert_eq!(policy.routes[0].forward, detached("back", Via::Reentry, 15));
    assert_eq!(policy.max_relay_body, 8 * 1024 * 1024);
}

#[test]
fn skipping_routes_and_filters_is_an_explicit_choice_that_says_so() {
    let policy = compile(r#"{"upstream":{"cluster_skipping_routes_and_filters":"app"}}"#).unwrap();
    assert_eq!(
        policy.routes[0].forward,
        detached("app", Via::SkippingRoutesAndFilters, 15)
    );
    let e = compile(r#"{"upstream":{"reentry":"r","cluster_skipping_routes_and_filters":"app"}}"#)
        .unwrap_err();
    assert!(
        e.contains("`upstream.cluster_skipping_routes_and_filters`") && e.contains("pick one"),
        "{e}"
    );
}

/// Before re-entry `upstream.cluster` sent claimed requests around Envoy's routes and the filters
/// after idemgate without saying so: a configuration that still names it is refused with the way
/// forward, never read as one of the two new meanings.
#[test]
fn the_old_cluster_fields_are_refused_with_the_way_forward() {
    let e = compile(r#"{"upstream":{"cluster":"app"}}"#).unwrap_err();
    assert!(e.contains("`upstream.cluster`"), "{e}");
    assert!(e.contains("`upstream.reentry`"), "{e}");
    assert!(
        e.contains("`upstream.cluster_skipping_routes_and_filters`"),
        "{e}"
    );
    let e = compile(r#"{"upstream":{"reentry":"r"},"routes":[{"prefix":"/","cluster":"b"}]}"#)
        .unwrap_err();
    assert!(e.contains("`routes[0].cluster`"), "{e}");
    assert!(e.contains("route configuration picks the cluster"), "{e}");
}

#[test]
fn a_timeout_not_shorter_than_the_lease_is_refused_naming_the_field() {
    let e = compile(r#"{"upstream":{"reentry":"b","timeout":"60s"}}"#).unwrap_err();
    assert!(e.contains("`upstream.timeout`"), "{e}");
    assert!(e.contains("shorter than `lease`"), "{e}");
    let e = compile(r#"{"lease":"4s","upstream":{"reentry":"b","timeout":"3s"},"routes":[{"prefix":"/","upstream_timeout":"5s"}]}"#)
        .unwrap_err();
    assert!(e.contains("`routes[0].upstream_timeout`"), "{e}");
    // The default timeout (15 s) against a short lease.
    let e = compile(r#"{"lease":"10s","upstream":{"reentry":"b"}}"#).unwrap_err();
    assert!(e.contains("`upstream.timeout`"), "{e}");
    assert!(compile(r#"{"lease":"4s","upstream":{"reentry":"b","timeout":"3s"}}"#).is_ok());
}

#[test]
fn inconsistent_routes_are_refused_naming_the_field() {
    let e = compile(r#"{"routes":[{"prefix":"/","forward":"detached"}]}"#).unwrap_err();
    assert!(e.contains("`routes[0].forward`"), "{e}");
    assert!(e.contains("`upstream.reentry`"), "{e}");
    let e = compile(
        r#"{"upstream":{"reentry":"r"},"routes":[{"prefix":"/","forward":"router","upstream_timeout":"1s"}]}"#,
    )
    .unwrap_err();
    assert!(e.contains("`routes[0].upstream_timeout`"), "{e}");
    let e = compile(r#"{"upstream":{"reentry":""}}"#).unwrap_err();
    assert!(e.contains("`upstream.reentry`"), "{e}");
    let e = compile(r#"{"upstream":{"cluster_skipping_routes_and_filters":""}}"#).unwrap_err();
    assert!(
        e.contains("`upstream.cluster_skipping_routes_and_filters`"),
        "{e}"
    );
    let e = compile(r#"{"upstream":{"reentry":"b","port":1}}"#).unwrap_err();
    assert!(e.contains("upstream.port"), "{e}");
    let e = compile(r#"{"routes":[{"prefix":"/","forward":"sideways"}]}"#).unwrap_err();
    assert!(e.contains("routes[0].forward"), "{e}");
    let e = compile(r#"{"upstream":{"reentry":"b","max_body":"5GiB"}}"#).unwrap_err();
    assert!(e.contains("`upstream.max_body`"), "{e}");
}

/// A timeout with nothing detached to bound is refused, whatever its value: a typo in it must not
/// pass unread until someone adds `upstream.reentry` (a malformed one was accepted then).
#[test]
fn a_timeout_without_a_detached_destination_is_refused() {
    let e = compile(r#"{"routes":[{"prefix":"/","upstream_timeout":"soon"}]}"#).unwrap_err();
    assert!(e.contains("`routes[0].upstream_timeout`"), "{e}");
    assert!(e.contains("`upstream.reentry`"), "{e}");
    let e = compile(r#"{"routes":[{"prefix":"/","upstream_timeout":"1s"}]}"#).unwrap_err();
    assert!(e.contains("`routes[0].upstream_timeout`"), "{e}");
    let e = compile(r#"{"upstream":{"timeout":"1s"}}"#).unwrap_err();
    assert!(e.contains("`upstream.timeout`"), "{e}");
    // With a destination both are read (and a malformed one refused for its value).
    let e = compile(
        r#"{"upstream":{"reentry":"b"},"routes":[{"prefix":"/","upstream_timeout":"soon"}]}"#,
    )
    .unwrap_err();
    assert!(e.contains("`routes[0].upstream_timeout`"), "{e}");
}
