//! `docs/semantics.md` §12: the edge publishes its idempotency policy, written from the
//! configuration it runs, at `policy_path` — and with `policy_path: false` the same request is
//! the upstream's, untouched.

use crate::client::Request;
use crate::harness::{Envoy, Setup};
use crate::upstream::Upstream;

const CONFIG: &str = r#"{
  "routes": [
    { "prefix": "/orders", "methods": ["POST"], "key": "required" },
    { "prefix": "/optional" }
  ],
  "ttl": "2h",
  "lease": "20s"
}"#;

// conformance: D3
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn the_policy_is_published_from_the_configuration() {
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(CONFIG, upstream.port));
    let published = Request::new("GET", "/.well-known/idempotency").send(envoy.port);
    assert_eq!(published.status, 200, "{}", published.text());
    assert_eq!(published.header("content-type"), Some("application/json"));
    let doc = published.json();
    assert_eq!(doc["header"], "idempotency-key");
    assert_eq!(doc["expires_after_seconds"], 7200);
    assert_eq!(doc["in_flight_lease_seconds"], 20);
    let routes: Vec<(String, String)> = doc["routes"]
        .as_array()
        .unwrap_or_else(|| panic!("no routes in {doc}"))
        .iter()
        .map(|r| (r["prefix"].to_string(), r["key"].to_string()))
        .collect();
    assert_eq!(
        routes,
        [
            ("\"/orders\"".to_string(), "\"required\"".to_string()),
            ("\"/optional\"".to_string(), "\"optional\"".to_string()),
        ]
    );
    assert_eq!(upstream.total(), 0, "the edge answers it itself");

    // Guarded requests are as before: the document changes nothing else.
    assert_eq!(
        Request::post("/orders", "pub-1").send(envoy.port).status,
        201
    );
    assert_eq!(
        Request::new("GET", "/.well-known/other")
            .send(envoy.port)
            .status,
        201,
        "another path is the upstream's (the test upstream answers 201)"
    );
    assert_eq!(upstream.total(), 2);
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn with_policy_path_false_the_path_is_the_upstreams() {
    let upstream = Upstream::start();
    let config = CONFIG.replacen('{', r#"{ "policy_path": false,"#, 1);
    let envoy = Envoy::start(&Setup::new(&config, upstream.port));
    let passed = Request::new("GET", "/.well-known/idempotency").send(envoy.port);
    // The upstream's answer (the test upstream answers 201 with its sequence number).
    assert_eq!(passed.status, 201, "{}", passed.text());
    assert_eq!(upstream.path_hits("/.well-known/idempotency"), 1);
    assert_eq!(passed.json()["seq"], 1, "{}", passed.text());
}
