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

// conformance: D8, S9
/// `docs/semantics.md` §6: the `problems` section writes every problem the edge makes — the
/// `type` under its base, `Link: <docs>; rel="describedby"`, Stripe's codes — while the HTTP
/// meaning stays; `Stripe-Should-Retry` says whether a retry helps, and a replay is final.
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn problems_carry_the_configured_type_base_link_and_stripe_codes() {
    let upstream = Upstream::start();
    let config = CONFIG.replacen(
        '{',
        r#"{ "problems": { "type_base": "https://errors.example.com/problems/",
             "describedby": "https://docs.example.com/idempotency", "compat": "stripe" },"#,
        1,
    );
    let envoy = Envoy::start(&Setup::new(&config, upstream.port));
    let link = Some("<https://docs.example.com/idempotency>; rel=\"describedby\"");

    let missing = Request::new("POST", "/orders").json("{}").send(envoy.port);
    assert_eq!(missing.status, 400, "{}", missing.text());
    assert_eq!(missing.header("link"), link);
    assert_eq!(missing.header("stripe-should-retry"), Some("false"));
    assert_eq!(
        missing.json()["type"],
        "https://errors.example.com/problems/key_missing"
    );

    // In flight: Stripe's code, and a retry helps.
    let port = envoy.port;
    let slow = std::thread::spawn(move || {
        Request::post("/orders", "pb-1")
            .script("delay=1500")
            .send(port)
    });
    std::thread::sleep(std::time::Duration::from_millis(400));
    let busy = Request::post("/orders", "pb-1").send(envoy.port);
    assert_eq!(busy.status, 409, "{}", busy.text());
    assert_eq!(busy.header("link"), link);
    assert_eq!(busy.header("stripe-should-retry"), Some("true"));
    assert!(busy.has_header("retry-after"));
    let body = busy.json();
    assert_eq!(body["code"], "idempotency_key_in_use");
    assert_eq!(body["error"]["code"], "idempotency_key_in_use");
    assert_eq!(body["error"]["type"], "idempotency_error");
    assert_eq!(
        body["type"],
        "https://errors.example.com/problems/request_in_flight"
    );
    assert_eq!(slow.join().map(|r| r.status).ok(), Some(201));

    // A stored 500 replays as final: the Stripe SDKs would otherwise retry it.
    let failed = Request::post("/orders", "pb-2")
        .script("status=500")
        .send(envoy.port);
    assert_eq!(failed.status, 500);
    assert_eq!(
        failed.header("stripe-should-retry"),
        None,
        "the upstream's own answer"
    );
    let replay = Request::post("/orders", "pb-2").send(envoy.port);
    assert_eq!(replay.status, 500);
    assert!(replay.replayed());
    assert_eq!(replay.header("stripe-should-retry"), Some("false"));
    assert_eq!(
        replay.header("link"),
        None,
        "a replay is not a problem the edge made"
    );
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn without_a_problems_section_problems_are_as_before_with_no_link() {
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(CONFIG, upstream.port));
    let missing = Request::new("POST", "/orders").json("{}").send(envoy.port);
    assert_eq!(missing.status, 400, "{}", missing.text());
    assert_eq!(missing.header("link"), None);
    assert_eq!(missing.header("stripe-should-retry"), Some("false"));
    assert_eq!(missing.json()["type"], "urn:idemgate:problem:key_missing");
    assert_eq!(missing.json()["code"], "key_missing");
}
