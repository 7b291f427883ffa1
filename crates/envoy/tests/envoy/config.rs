//! A bad configuration makes Envoy refuse the filter, with a log line naming the field and the
//! reason; the shipped example validates.

use crate::client::Request;
use crate::floods::example_filter;
use crate::harness::{filter_wasm, validate, yaml, Envoy, Setup, TempDir};
use crate::upstream::Upstream;
use std::path::Path;

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn bad_configurations_are_rejected_naming_the_field() {
    let dir = TempDir::new();
    let wasm = filter_wasm();
    let check = |name: &str, filter: &str| {
        let path = dir.0.join(format!("{name}.yaml"));
        std::fs::write(&path, yaml(&Setup::new(filter, 9), &wasm)).expect("write");
        validate(&path, &[])
    };
    let (ok, log) = check(
        "good",
        r#"{ "routes": [{ "prefix": "/orders", "key": "required" }] }"#,
    );
    assert!(ok, "a good configuration validates:\n{log}");
    // The sequencer on an unsigned route, said explicitly; a callback route's own share.
    let (ok, log) = check(
        "unsigned-order-allowed",
        r#"{ "routes": [{ "prefix": "/hooks", "kind": "callback", "share": "5%",
             "key_from": [{ "header": "webhook-id" }],
             "order": { "unsigned": "allow", "resource": { "json": "/data/order" },
                        "event": { "json": "/type" },
                        "table": { "transitions": [["new", "pay", "paid"]] } } }] }"#,
    );
    assert!(ok, "an explicit unsigned sequencer validates:\n{log}");
    for (name, filter, field) in [
        ("lease", r#"{ "lease": "forever" }"#, "`lease`"),
        (
            "prefix",
            r#"{ "routes": [{ "prefix": "orders" }] }"#,
            "`routes[0].prefix`",
        ),
        ("order", r#"{ "ttl": "1h", "lease": "2h" }"#, "`lease`"),
        ("unknown", r#"{ "leese": "1s" }"#, "`leese`: unknown field"),
        (
            "secret",
            r#"{ "token": { "secret_env": "IDEMGATE_NOT_SET" } }"#,
            "`token.secret_env`",
        ),
        ("json", r#"{ "routes": "#, "configuration is not valid"),
        (
            "unsigned-order",
            r#"{ "routes": [{ "prefix": "/hooks", "kind": "callback",
                 "key_from": [{ "header": "webhook-id" }],
                 "order": { "resource": { "json": "/data/order" }, "event": { "json": "/type" },
                            "table": { "transitions": [["new", "pay", "paid"]] } } }] }"#,
            "`routes[0].order`: on a route without a `signature`",
        ),
        (
            "api-share",
            r#"{ "routes": [{ "prefix": "/orders", "share": 300 }] }"#,
            "`routes[0].share`: only applies to routes of kind \"callback\"",
        ),
    ] {
        let (ok, log) = check(name, filter);
        assert!(!ok, "{name}: a bad configuration must be refused");
        let line = log
            .lines()
            .find(|l| l.contains("rejected: "))
            .unwrap_or_else(|| panic!("{name}: no rejection line in:\n{log}"));
        assert!(
            line.contains(field),
            "{name}: the log line names {field}: {line}"
        );
    }
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn the_example_configuration_validates() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/envoy/envoy.yaml");
    let text = std::fs::read_to_string(&example).expect("examples/envoy/envoy.yaml");
    let wasm = filter_wasm();
    let dir = TempDir::new();
    let path = dir.0.join("example.yaml");
    std::fs::write(
        &path,
        text.replace(
            "target/wasm32-wasip1/release/idemgate_envoy.wasm",
            &wasm.display().to_string(),
        ),
    )
    .expect("write");
    let env = [(
        "IDEMGATE_TOKEN_SECRET".to_string(),
        "example-secret-at-least-16-bytes".to_string(),
    )];
    let (ok, log) = validate(&path, &env);
    assert!(ok, "examples/envoy/envoy.yaml must validate:\n{log}");
}

/// A Stripe route appended to the example's routes, after its catch-all `/`: a route Envoy's
/// first-match rule never reaches, so its signature would never be checked.
const STRIPE_ROUTE: &str = r#"{ "prefix": "/hooks/stripe", "preset": "stripe", "signature": { "secret": "whsec_a-stripe-secret-for-the-test" } }"#;

/// What the hidden route's refusal must name: the route and the one that hides it.
fn names_both_routes(log: &str) -> bool {
    log.lines().any(|line| {
        line.contains("rejected: ")
            && line.contains("`routes[3]`")
            && line.contains("`/hooks/stripe`")
            && line.contains("routes[2] (`/`)")
    })
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_signed_route_after_the_catch_all_is_refused_at_start() {
    let env = [(
        "IDEMGATE_TOKEN_SECRET".to_string(),
        "example-secret-at-least-16-bytes".to_string(),
    )];
    // The shipped file itself, with the route appended after `{ "prefix": "/", ... }`.
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/envoy/envoy.yaml");
    let text = std::fs::read_to_string(&example).expect("examples/envoy/envoy.yaml");
    let catch_all = r#"{ "prefix": "/", "key": "optional" }"#;
    assert_eq!(
        text.matches(catch_all).count(),
        1,
        "the example's catch-all"
    );
    let line = text
        .lines()
        .find(|line| line.contains(catch_all))
        .expect("the catch-all's line");
    let indent = &line[..line.len() - line.trim_start().len()];
    let dir = TempDir::new();
    let path = dir.0.join("example.yaml");
    std::fs::write(
        &path,
        text.replace(catch_all, &format!("{catch_all},\n{indent}{STRIPE_ROUTE}"))
            .replace(
                "target/wasm32-wasip1/release/idemgate_envoy.wasm",
                &filter_wasm().display().to_string(),
            ),
    )
    .expect("write");
    let (ok, log) = validate(&path, &env);
    assert!(
        !ok && names_both_routes(&log),
        "must be refused naming both routes:\n{log}"
    );

    // And a running Envoy with the example's configuration: it must not start. Were it to start,
    // an unsigned delivery would show what the hidden route lets through.
    let mut filter: serde_json::Value =
        serde_json::from_str(&example_filter()).expect("the example's configuration");
    let route: serde_json::Value = serde_json::from_str(STRIPE_ROUTE).expect("JSON");
    filter["routes"].as_array_mut().expect("routes").push(route);
    let upstream = Upstream::start();
    let mut setup = Setup::new(&filter.to_string(), upstream.port);
    setup.vm_env = env.to_vec();
    match Envoy::try_start(&setup) {
        Err(log) => assert!(
            names_both_routes(&log),
            "refused, naming both routes:\n{log}"
        ),
        Ok(envoy) => {
            let unsigned = Request::new("POST", "/hooks/stripe")
                .json(r#"{"id":"evt_forged","type":"payment_intent.succeeded"}"#)
                .send(envoy.port);
            panic!(
                "Envoy started with a route it can never reach: an unsigned POST /hooks/stripe got {} and reached the app {} time(s)",
                unsigned.status,
                upstream.path_hits("/hooks/stripe")
            );
        }
    }
}
