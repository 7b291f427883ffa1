//! A request paused for the remote store stays paused until the store answers, whatever Envoy
//! delivers meanwhile — the rest of its body, its trailers, a reply Envoy makes itself — and the
//! machine that waits for the answer is never dropped: the answer finds it and is carried out.
//! The store's answer is held (the callout is left pending) while those callbacks arrive.

use crate::support::created;
use idemgate_core::store::remote;
use idemgate_core::{ClaimOutcome, ConsumeOutcome, FinishOutcome};
use idemgate_host_tests::envoy::{Clock, HeaderMap};
use idemgate_host_tests::scenario::{Envoy, Request, Roundtrip, StoreService, RECORD_SECRET};
use std::sync::Arc;

/// `/pay` takes a key when one is sent and always a one-time token; a request without a key is
/// unguarded, its token used in the remote store before it goes on.
const CONFIG: &str = r#"{
  "routes": [{ "prefix": "/pay", "key": "optional", "token": "required" }],
  "token": { "secret": "a-host-test-token-secret-long-enough" },
  "capacity": 64, "store": {"kind": "remote", "cluster": "store", "timeout": "2s"}
}"#;

fn start() -> (Envoy, Arc<StoreService>) {
    let store = Arc::new(StoreService::new(Clock::default()));
    let envoy = Envoy::builder()
        .config(CONFIG)
        .env("IDEMGATE_RECORD_SECRET", RECORD_SECRET)
        .shared_cluster("store", store.clone())
        .start()
        .unwrap();
    (envoy, store)
}

/// A token for `POST /pay`, issued to alice by the filter's endpoint.
fn token(envoy: &Envoy) -> String {
    let issued = envoy
        .worker(0)
        .send(
            Request::post("/.idemgate/token?method=POST&path=/pay")
                .header("authorization", "Bearer alice"),
        )
        .unwrap();
    let answer = issued.expect_answer().unwrap();
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    let json: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    json["token"].as_str().unwrap().to_string()
}

/// A keyless payment with a token, its body in two chunks.
fn keyless_payment(token: &str) -> Request {
    Request::post("/pay")
        .header("authorization", "Bearer alice")
        .header("idemgate-token", token)
        .json(r#"{"amount":100}"#)
        .chunked_at(&[5])
}

fn consumes(store: &StoreService) -> Vec<ConsumeOutcome> {
    store
        .log()
        .into_iter()
        .filter_map(|(_, response)| match response {
            remote::Response::Consume(outcome) => Some(outcome),
            _ => None,
        })
        .collect()
}

/// Sends the headers of a keyless payment: its token's use is asked of the store, and the
/// request waits for the answer.
fn paused_on_its_token(envoy: &Envoy) -> Roundtrip {
    let token = token(envoy);
    let mut exchange = envoy.worker(0).begin(keyless_payment(&token)).unwrap();
    assert_eq!(
        envoy.worker(0).pending_callouts().len(),
        1,
        "the token's use"
    );
    assert!(exchange.send_next_chunk().unwrap());
    assert!(!exchange.reached_upstream(), "its token is not used yet");
    exchange
}

/// The store's answer comes last: only then does the request go on, with its whole body.
fn answered_then_forwarded(envoy: &Envoy, store: &StoreService, exchange: &Roundtrip) {
    assert!(exchange.answer().is_none(), "{:?}", exchange.answer());
    assert!(
        !exchange.reached_upstream(),
        "forwarded before its token's use was answered"
    );
    envoy.worker(0).answer_callouts().unwrap();
    assert!(matches!(consumes(store)[..], [ConsumeOutcome::Consumed]));
    assert!(exchange.reached_upstream(), "{:?}", exchange.answer());
    let forwarded = exchange.forwarded().unwrap();
    assert!(forwarded.complete);
    assert_eq!(forwarded.body, br#"{"amount":100}"#);
    exchange.respond(created()).unwrap();
    assert_eq!(exchange.expect_answer().unwrap().status, 201);
    assert!(envoy.anomalies().is_empty(), "{:?}", envoy.anomalies());
}

#[test]
fn a_body_that_ends_while_a_token_use_is_asked_waits_for_the_answer() {
    let (envoy, store) = start();
    let mut exchange = paused_on_its_token(&envoy);
    assert!(exchange.send_next_chunk().unwrap(), "the last chunk");
    answered_then_forwarded(&envoy, &store, &exchange);
}

#[test]
fn trailers_that_end_a_request_while_a_token_use_is_asked_wait_for_the_answer() {
    let (envoy, store) = start();
    let mut exchange = paused_on_its_token(&envoy);
    exchange.send_rest_then_trailers().unwrap();
    answered_then_forwarded(&envoy, &store, &exchange);
}

/// Without a token the same request is refused before any store call: the route is guarded.
#[test]
fn a_keyless_payment_without_its_token_never_reaches_the_app() {
    let (envoy, _store) = start();
    let exchange = envoy
        .worker(0)
        .send(Request::post("/pay").header("authorization", "Bearer alice"))
        .unwrap();
    assert_eq!(exchange.expect_answer().unwrap().status, 403);
    assert!(!exchange.reached_upstream());
}

/// Envoy answers the client itself (its request timeout) while the claim is asked: the stream
/// ends, but the machine waiting for the store keeps its place, takes the answer and gives the
/// won claim back, so a retry runs at once instead of waiting out the lease.
#[test]
fn a_reply_envoy_makes_while_a_claim_is_asked_leaves_no_claim_behind() {
    let (envoy, store) = start();
    let token = token(&envoy);
    let paid = |key: &str| {
        Request::post("/pay")
            .key(key)
            .header("authorization", "Bearer alice")
            .header("idemgate-token", &token)
            .json(r#"{"amount":100}"#)
            .chunked_at(&[3])
    };
    let timed_out = envoy.worker(0).send(paid("k")).unwrap();
    assert_eq!(envoy.worker(0).pending_callouts().len(), 1, "the claim");
    envoy
        .worker(0)
        .with(|w| {
            w.response_headers(
                timed_out.context(),
                408,
                HeaderMap::new(),
                true,
                "request_overall_timeout",
            )
        })
        .unwrap();
    assert!(timed_out.is_done());
    assert_eq!(timed_out.expect_answer().unwrap().status, 408);
    // The claim's answer comes; the release it leads to waits in the worker's queue of finishes
    // for the queue's delay.
    let delay = std::time::Duration::from_millis(remote::BATCH_DELAY.as_millis());
    for _ in 0..4 {
        envoy.worker(0).answer_callouts().unwrap();
        envoy.advance(delay).unwrap();
    }
    assert!(!timed_out.reached_upstream());
    let log = store.log();
    let claims: Vec<_> = log
        .iter()
        .filter_map(|(_, r)| match r {
            remote::Response::Claim(c) => Some(c),
            _ => None,
        })
        .collect();
    assert!(
        matches!(claims[..], [ClaimOutcome::Forward { .. }]),
        "{claims:?}"
    );
    let finishes: Vec<_> = log
        .iter()
        .filter_map(|(_, r)| match r {
            remote::Response::Finish(f) => Some(f),
            _ => None,
        })
        .collect();
    assert_eq!(finishes, [&FinishOutcome::Released], "the claim given back");
    assert!(envoy.anomalies().is_empty(), "{:?}", envoy.anomalies());
}
