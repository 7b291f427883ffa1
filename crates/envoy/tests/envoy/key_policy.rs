//! Per-route key rules in a real Envoy: a browser-minted key (a UUID in the standard header) on a
//! route whose keys are `ord_…` and whose mismatches are ignored passes to the upstream exactly as
//! the same request without a key does — never a 400 or a 422 — while the site's own keys stay
//! guarded; and keys that are the client's across routes (`key_scope: "client"`) are 422
//! `key_reused` on another endpoint, which never runs.

use crate::client::Request;
use crate::harness::{Envoy, Setup};
use crate::upstream::Upstream;

const CONFIG: &str = r#"{
  "routes": [
    { "prefix": "/orders", "methods": ["POST"],
      "key_format": { "prefix": "ord_" }, "key_mismatch": "ignore" },
    { "prefix": "/carts", "methods": ["POST"], "key_format": { "prefix": "ord_" } },
    { "prefix": "/payments", "methods": ["POST"], "key_scope": "client" },
    { "prefix": "/refunds", "methods": ["POST"], "key_scope": "client" }
  ],
  "fingerprint": { "mode": "raw" },
  "lease": "2s"
}"#;

/// What a browser adds to a form POST of its own accord: a UUID, as a structured-field string.
const BROWSER_KEY: &str = "\"6ba7b810-9dad-11d1-80b4-00c04fd430c8\"";

fn order(body: &str) -> Request {
    Request::new("POST", "/orders").json(body)
}

// conformance: D10
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_browser_minted_key_on_an_ignore_route_passes_like_no_key() {
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(CONFIG, upstream.port));
    let port = envoy.port;

    // The browser's key, twice with different bodies (a second form POST): both reach the
    // upstream, neither is refused, replayed or a 422.
    for body in ["{\"qty\":1}", "{\"qty\":2}"] {
        let seen = order(body)
            .header("idempotency-key", BROWSER_KEY)
            .send(port);
        assert_eq!(seen.status, 201, "{body}: {}", seen.text());
        assert!(!seen.replayed(), "{body}");
    }
    assert_eq!(upstream.path_hits("/orders"), 2);
    // The header reaches the upstream untouched: ignoring it is the edge's business only.
    let browser = upstream.seen_with_key(BROWSER_KEY.trim_matches('"'));
    assert_eq!(browser.len(), 2);

    // The same request without a key: the same outcome.
    for _ in 0..2 {
        let keyless = order("{\"qty\":1}").send(port);
        assert_eq!(keyless.status, 201, "{}", keyless.text());
        assert!(!keyless.replayed());
    }
    assert_eq!(upstream.path_hits("/orders"), 4);

    // The site's own key is guarded: a retry is replayed, another body is a 422.
    let ours = order("{\"qty\":1}").header("idempotency-key", "ord_1");
    let first = ours.send(port);
    assert_eq!(first.status, 201, "{}", first.text());
    let retry = ours.send(port);
    assert!(retry.replayed());
    assert_eq!(retry.body, first.body);
    let other = order("{\"qty\":9}")
        .header("idempotency-key", "ord_1")
        .send(port);
    assert_eq!(
        (other.status, other.problem_code()),
        (422, "key_reused".into())
    );
    assert_eq!(upstream.path_hits("/orders"), 5);

    // Where mismatches are refused, the browser's key is a 400 naming the format.
    let refused = Request::new("POST", "/carts")
        .header("idempotency-key", BROWSER_KEY)
        .json("{}")
        .send(port);
    assert_eq!(
        (refused.status, refused.problem_code()),
        (400, "key_format".into())
    );
    assert!(refused.text().contains("ord_"), "{}", refused.text());
    assert_eq!(upstream.path_hits("/carts"), 0);
}

// conformance: S8
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_client_scoped_key_on_another_endpoint_is_reused() {
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(CONFIG, upstream.port));
    let port = envoy.port;
    let post = |path: &str| {
        Request::new("POST", path)
            .header("idempotency-key", "op-1")
            .header("authorization", "Bearer alice")
            .json("{\"amount\":500}")
    };

    let first = post("/payments").send(port);
    assert_eq!(first.status, 201, "{}", first.text());
    // Same client, same key, same body, another endpoint: Stripe's 422, and the refund never runs.
    let refund = post("/refunds").send(port);
    assert_eq!(
        (refund.status, refund.problem_code()),
        (422, "key_reused".into()),
        "{}",
        refund.text()
    );
    assert_eq!(upstream.path_hits("/refunds"), 0);
    // A retry where the key was first used is its replay.
    let retry = post("/payments").send(port);
    assert!(retry.replayed());
    assert_eq!(retry.body, first.body);
    // Another client's key of the same spelling is its own.
    let bob = Request::new("POST", "/refunds")
        .header("idempotency-key", "op-1")
        .header("authorization", "Bearer bob")
        .json("{\"amount\":500}")
        .send(port);
    assert_eq!(bob.status, 201, "{}", bob.text());
    assert_eq!(upstream.path_hits("/payments"), 1);
    assert_eq!(upstream.path_hits("/refunds"), 1);
}
