//! Whose scope a request is in: not one chosen through `X-Forwarded-For`, only from the
//! configured sources, never one shared by empty credentials.

use super::{ALICE, BOB};
use crate::client::Request;
use crate::harness::{Envoy, Setup};
use crate::upstream::Upstream;

/// Finding 1: the peer scope must be the connection's address, never one the client writes into
/// `X-Forwarded-For` (Envoy's default, `use_remote_address: false`, takes the last entry).
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn x_forwarded_for_does_not_choose_the_peer_scope() {
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(
        r#"{ "routes": [{ "prefix": "/" }] }"#,
        upstream.port,
    ));
    // Alice, anonymous, places an order; Bob, anonymous too, claims to be Alice's address.
    let first = Request::post("/o", "xff-1").from(ALICE).send(envoy.port);
    assert_eq!(first.status, 201, "{}", first.text());
    let spoofed = Request::post("/o", "xff-1")
        .from(BOB)
        .header("x-forwarded-for", "127.0.0.2")
        .send(envoy.port);
    assert!(
        !spoofed.replayed(),
        "Bob got Alice's stored answer by writing her address into X-Forwarded-For: {}",
        spoofed.text()
    );
    assert_eq!(spoofed.status, 201, "{}", spoofed.text());
    assert_eq!(
        upstream.hits("xff-1"),
        2,
        "each client has its own execution"
    );
    // And Alice's own retry through a header naming someone else is still Alice's.
    let retry = Request::post("/o", "xff-1")
        .from(ALICE)
        .header("x-forwarded-for", "203.0.113.9")
        .send(envoy.port);
    assert!(retry.replayed(), "Alice's retry: {}", retry.text());
}

/// Finding 1: only configured scope sources count. With `scope: [x-api-key]` and no such header
/// the request is not guarded in some other namespace (the peer's): `scope_unavailable`.
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn only_configured_scope_sources_identify_a_client() {
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(
        r#"{ "routes": [{ "prefix": "/" }], "scope": [{ "header": "x-api-key" }] }"#,
        upstream.port,
    ));
    let keyed = Request::post("/o", "src-1")
        .header("x-api-key", "k-alice")
        .send(envoy.port);
    assert_eq!(keyed.status, 201, "{}", keyed.text());
    let anonymous = Request::post("/o", "src-2").send(envoy.port);
    assert_eq!(anonymous.status, 503, "{}", anonymous.text());
    assert_eq!(anonymous.problem_code(), "scope_unavailable");
    assert_eq!(upstream.hits("src-2"), 0, "never forwarded");
    // An empty or blank value is no value either.
    for blank in ["", "   "] {
        let empty = Request::post("/o", "src-3")
            .header("x-api-key", blank)
            .send(envoy.port);
        assert_eq!(empty.status, 503, "{blank:?}: {}", empty.text());
    }
    assert_eq!(upstream.hits("src-3"), 0);
}

/// Finding 5: an empty `Authorization` is absent, so two anonymous clients that send one do not
/// share a namespace (each falls to its own peer address).
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn empty_credentials_do_not_share_a_namespace() {
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(
        r#"{ "routes": [{ "prefix": "/" }] }"#,
        upstream.port,
    ));
    for (n, blank) in ["", " ", "\t"].iter().enumerate() {
        let key = format!("blank-{n}");
        let alice = Request::post("/o", &key)
            .from(ALICE)
            .header("authorization", blank)
            .send(envoy.port);
        assert_eq!(alice.status, 201, "{}", alice.text());
        let bob = Request::post("/o", &key)
            .from(BOB)
            .header("authorization", blank)
            .send(envoy.port);
        assert!(
            !bob.replayed(),
            "Authorization {blank:?}: Bob got Alice's stored answer: {}",
            bob.text()
        );
        assert_eq!(upstream.hits(&key), 2);
    }
}
