//! `docs/semantics.md` §7: one-time tokens — issued by the filter's endpoint, bound to the client,
//! consumed once; a retry of a completed request is a replay, not a token reuse. The secret comes
//! from an environment variable of the VM.

use crate::client::Request;
use crate::harness::{Envoy, Setup};
use crate::upstream::Upstream;

const CONFIG: &str = r#"{
  "routes": [{ "prefix": "/pay", "key": "required", "token": "required" }],
  "token": { "secret_env": "IDEMGATE_TEST_TOKEN_SECRET" }
}"#;

fn token_for(port: u16, who: &str) -> (String, String) {
    let issued = Request::new("POST", "/.idemgate/token?method=POST&path=/pay")
        .header("authorization", who)
        .send(port);
    assert_eq!(issued.status, 200, "{}", issued.text());
    assert_eq!(issued.header("cache-control"), Some("no-store"));
    let json = issued.json();
    assert!(json["expires_at_ms"].as_u64().is_some());
    (
        json["header"].as_str().expect("header").to_string(),
        json["token"].as_str().expect("token").to_string(),
    )
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn tokens_are_issued_bound_and_used_once() {
    let upstream = Upstream::start();
    let mut setup = Setup::new(CONFIG, upstream.port);
    setup.vm_env = vec![(
        "IDEMGATE_TEST_TOKEN_SECRET".into(),
        "a-test-secret-that-is-long-enough".into(),
    )];
    let envoy = Envoy::start(&setup);
    let port = envoy.port;
    let (header, token) = token_for(port, "Bearer alice");
    assert_eq!(header, "idemgate-token");
    let pay = |key: &str, who: &str, token: Option<&str>| {
        let mut request = Request::post("/pay", key).header("authorization", who);
        if let Some(token) = token {
            request = request.header(&header, token);
        }
        request.send(port)
    };

    let first = pay("k1", "Bearer alice", Some(&token));
    assert_eq!(
        (first.status, first.replayed()),
        (201, false),
        "{}",
        first.text()
    );
    // The same request again: a replay, not a token reuse.
    let retry = pay("k1", "Bearer alice", Some(&token));
    assert_eq!((retry.status, retry.replayed()), (201, true));
    // Another request with the used token: rejected, never forwarded.
    let reuse = pay("k2", "Bearer alice", Some(&token));
    assert_eq!(reuse.status, 409);
    assert_eq!(reuse.problem_code(), "token_used");
    assert_eq!(upstream.hits("k2"), 0);
    // Another client with alice's token: the signature binds it to alice.
    let (_, alice_token) = token_for(port, "Bearer alice");
    let stolen = pay("k3", "Bearer bob", Some(&alice_token));
    assert_eq!(stolen.status, 403);
    assert_eq!(stolen.problem_code(), "token_bad_signature");
    // No token: rejected, and the key is released (a later, correct request runs).
    let missing = pay("k4", "Bearer alice", None);
    assert_eq!(missing.status, 403);
    assert_eq!(missing.problem_code(), "token_missing");
    let forged = pay("k4", "Bearer alice", Some("v1.not-a-token"));
    assert_eq!(forged.problem_code(), "token_malformed");
    let correct = pay("k4", "Bearer alice", Some(&alice_token));
    assert_eq!(
        (correct.status, correct.replayed()),
        (201, false),
        "{}",
        correct.text()
    );
    assert_eq!(upstream.hits("k4"), 1);
    assert_eq!(upstream.total(), 2);
    assert_eq!(envoy.counter("token_issued"), 2);
    assert_eq!(envoy.counter("token_consumed"), 2);
    assert_eq!(envoy.counter("token_rejected"), 4);
}
