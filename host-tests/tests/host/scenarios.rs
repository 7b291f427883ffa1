//! Stories: the filter in a simulated Envoy, told request by request.

use crate::support::{created, order};
use idemgate_host_tests::envoy::ClientAnswer;
use idemgate_host_tests::scenario::{Envoy, Failure, Request, Response};
use std::time::Duration;

fn problem_code(answer: &ClientAnswer) -> String {
    let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(
        answer.header("content-type"),
        Some("application/problem+json")
    );
    body["code"].as_str().unwrap().to_string()
}

fn is_replay_of_created(answer: &ClientAnswer) -> bool {
    answer.status == 201
        && answer.header("idempotent-replayed") == Some("true")
        && answer.body == br#"{"id":7}"#
        && answer.header("location") == Some("/orders/7")
}

#[test]
fn two_workers_one_key_the_first_upstream_answer_is_slow() {
    let envoy = Envoy::builder().workers(2).start().unwrap();
    let first = envoy.worker(0).send(order("k-1")).unwrap();
    assert!(first.reached_upstream());

    envoy.advance(Duration::from_secs(5)).unwrap();
    let second = envoy.worker(1).send(order("k-1")).unwrap();
    assert!(!second.reached_upstream());
    let conflict = second.answer().unwrap();
    assert_eq!(conflict.status, 409);
    assert_eq!(problem_code(&conflict), "request_in_flight");
    assert_eq!(
        conflict.header("retry-after"),
        Some("55"),
        "the lease (60 s) ends 55 s later"
    );

    first
        .respond(created().after(Duration::from_secs(2)))
        .unwrap();
    let original = first.answer().unwrap();
    assert_eq!((original.status, original.local), (201, false));
    assert_eq!(original.header("idempotent-replayed"), None);

    let third = envoy.worker(1).send(order("k-1")).unwrap();
    assert!(is_replay_of_created(&third.answer().unwrap()));
    assert_eq!(envoy.upstream_calls().len(), 1);
    assert_eq!(envoy.metric("idemgate.replayed"), Some(1));
    assert!(envoy.anomalies().is_empty());
}

#[test]
fn a_body_in_chunks_is_one_payload_and_another_payload_is_422() {
    let envoy = Envoy::builder().workers(3).start().unwrap();
    let split = order("k-2").chunked_at(&[1, 5, 9]);
    let first = envoy.worker(0).send(split).unwrap();
    first.respond(created()).unwrap();
    // Same JSON, other member order and whitespace, other chunking, another worker: a replay.
    let same = Request::post("/orders")
        .key("k-2")
        .header("authorization", "Bearer alice")
        .json(r#"{ "qty": 1, "sku": "A1" }"#)
        .chunks_of(3);
    assert!(is_replay_of_created(
        &envoy.worker(1).send(same).unwrap().answer().unwrap()
    ));
    let other = Request::post("/orders")
        .key("k-2")
        .header("authorization", "Bearer alice")
        .json(r#"{"sku":"B2","qty":1}"#);
    let reused = envoy.worker(2).send(other).unwrap().answer().unwrap();
    assert_eq!(reused.status, 422);
    assert_eq!(problem_code(&reused), "key_reused");
    assert_eq!(envoy.upstream_calls().len(), 1);
}

#[test]
fn one_key_two_clients_are_two_records() {
    let envoy = Envoy::builder().workers(2).start().unwrap();
    envoy
        .worker(0)
        .send(order("shared"))
        .unwrap()
        .respond(created())
        .unwrap();
    let bob = Request::post("/orders")
        .key("shared")
        .header("authorization", "Bearer bob")
        .json(r#"{"sku":"A1","qty":1}"#);
    let bobs = envoy.worker(1).send(bob).unwrap();
    assert!(
        bobs.reached_upstream(),
        "another client's key must never find alice's record"
    );
    assert_eq!(envoy.upstream_calls().len(), 2);
}

#[test]
fn keys_are_checked_before_anything_is_stored() {
    let config = r#"{"routes":[{"prefix":"/orders","key":"required"},{"prefix":"/carts","key":"optional"}]}"#;
    let envoy = Envoy::builder().config(config).start().unwrap();
    let missing = envoy
        .worker(0)
        .send(Request::post("/orders").json("{}"))
        .unwrap()
        .answer()
        .unwrap();
    assert_eq!(
        (missing.status, problem_code(&missing).as_str()),
        (400, "key_missing")
    );
    let empty = envoy
        .worker(0)
        .send(Request::post("/orders").key("").json("{}"))
        .unwrap()
        .answer()
        .unwrap();
    assert_eq!(
        (empty.status, problem_code(&empty).as_str()),
        (400, "key_empty")
    );
    let optional = envoy
        .worker(0)
        .send(Request::post("/carts").json("{}"))
        .unwrap();
    assert!(optional.reached_upstream());
    let get = envoy
        .worker(0)
        .send(Request::get("/orders/7").key("k"))
        .unwrap();
    assert!(get.reached_upstream(), "GET passes through untouched");
    // The filter creates its (empty) store cells when configured; none may hold a record.
    assert_eq!(
        envoy
            .shared_data()
            .entries()
            .filter(|(key, entry)| key.starts_with("idemgate/c/") && !entry.value.is_empty())
            .count(),
        0,
        "nothing was stored"
    );
}

#[test]
fn an_upstream_that_did_not_act_releases_the_key() {
    let envoy = Envoy::builder().workers(2).start().unwrap();
    let first = envoy.worker(0).send(order("k-3")).unwrap();
    first.respond(Response::new(503).body("busy")).unwrap();
    assert_eq!(first.answer().unwrap().status, 503);
    let retry = envoy.worker(1).send(order("k-3")).unwrap();
    assert!(
        retry.reached_upstream(),
        "503 from the upstream releases the claim"
    );
    retry.respond(created()).unwrap();
    assert!(is_replay_of_created(
        &envoy
            .worker(0)
            .send(order("k-3"))
            .unwrap()
            .answer()
            .unwrap()
    ));
    assert_eq!(envoy.metric("idemgate.released"), Some(1));
}

#[test]
fn a_request_that_never_reached_the_upstream_is_released() {
    for failure in [Failure::ConnectionFailure, Failure::NoHealthyUpstream] {
        let envoy = Envoy::builder().workers(2).start().unwrap();
        let first = envoy.worker(0).send(order("k-4")).unwrap();
        first.upstream_fails(failure).unwrap();
        let answer = first.answer().unwrap();
        assert_eq!((answer.status, answer.local), (503, true));
        let retry = envoy.worker(1).send(order("k-4")).unwrap();
        assert!(
            retry.reached_upstream(),
            "{failure:?}: a retry is safe and must go through"
        );
    }
}

#[test]
fn an_outcome_in_doubt_keeps_the_claim_until_the_lease_ends() {
    type Ending = fn(&idemgate_host_tests::scenario::Roundtrip);
    let endings: [(&str, Ending); 4] = [
        ("upstream reset", |x| {
            x.upstream_fails(Failure::ResetBeforeResponse).unwrap()
        }),
        ("route timeout", |x| {
            x.upstream_fails(Failure::Timeout).unwrap()
        }),
        ("body cut off", |x| {
            x.respond(created().cut_off_after(3)).unwrap()
        }),
        ("client gone", |x| x.client_disconnects().unwrap()),
    ];
    for (what, end) in endings {
        let envoy = Envoy::builder().workers(2).start().unwrap();
        let first = envoy.worker(0).send(order("k-5")).unwrap();
        end(&first);
        assert!(first.is_done(), "{what}");
        let retry = envoy
            .worker(1)
            .send(order("k-5"))
            .unwrap()
            .answer()
            .unwrap();
        assert_eq!(
            retry.status, 409,
            "{what}: the upstream may have committed; a retry must wait"
        );
        assert_eq!(envoy.metric("idemgate.in_doubt"), Some(1), "{what}");
        envoy.advance(Duration::from_secs(61)).unwrap();
        let later = envoy.worker(1).send(order("k-5")).unwrap();
        assert!(
            later.reached_upstream(),
            "{what}: after the lease a retry takes over"
        );
        assert_eq!(envoy.metric("idemgate.taken_over"), Some(1), "{what}");
    }
}

#[test]
fn a_slow_owner_past_its_lease_does_not_overwrite_the_new_owner() {
    let envoy = Envoy::builder().workers(3).start().unwrap();
    let slow = envoy.worker(0).send(order("k-6")).unwrap();
    envoy.advance(Duration::from_secs(61)).unwrap();
    let takeover = envoy.worker(1).send(order("k-6")).unwrap();
    assert!(takeover.reached_upstream());
    // The first owner's answer arrives late: it must not replace the new owner's claim …
    slow.respond(Response::new(201).json(r#"{"id":1}"#))
        .unwrap();
    assert_eq!(
        slow.answer().unwrap().status,
        201,
        "its own client still gets its answer"
    );
    // … so the record ends with the new owner's answer.
    takeover.respond(created()).unwrap();
    assert!(is_replay_of_created(
        &envoy
            .worker(2)
            .send(order("k-6"))
            .unwrap()
            .answer()
            .unwrap()
    ));
}

#[test]
fn only_allow_listed_headers_are_replayed() {
    let envoy = Envoy::builder().start().unwrap();
    let first = envoy.worker(0).send(order("k-7")).unwrap();
    let response = created()
        .header("set-cookie", "session=alice")
        .header("x-envoy-upstream-service-time", "3")
        .header("etag", "\"v1\"");
    first.respond(response).unwrap();
    let replay = envoy
        .worker(0)
        .send(order("k-7"))
        .unwrap()
        .answer()
        .unwrap();
    assert_eq!(replay.header("etag"), Some("\"v1\""));
    assert_eq!(replay.header("set-cookie"), None);
    assert_eq!(replay.header("x-envoy-upstream-service-time"), None);
}

#[test]
fn a_large_answer_is_passed_on_and_replayed_without_its_body() {
    let envoy = Envoy::builder()
        .config(r#"{"max_response_body": 16}"#)
        .start()
        .unwrap();
    let big = "x".repeat(100);
    let first = envoy.worker(0).send(order("k-8")).unwrap();
    first
        .respond(Response::new(200).body(&big).chunked_at(&[10, 50]))
        .unwrap();
    assert_eq!(
        first.answer().unwrap().body,
        big.as_bytes(),
        "the client gets the whole body"
    );
    let replay = envoy.worker(0).send(order("k-8")).unwrap();
    assert!(!replay.reached_upstream());
    let replay = replay.answer().unwrap();
    assert_eq!(replay.status, 200);
    assert_eq!(replay.header("idempotent-body-omitted"), Some("true"));
    assert!(replay.body.is_empty());
}

#[test]
fn a_request_body_over_the_limit_is_413() {
    let envoy = Envoy::builder()
        .config(r#"{"max_request_body": 8}"#)
        .start()
        .unwrap();
    let answer = envoy
        .worker(0)
        .send(order("k-9").chunks_of(4))
        .unwrap()
        .answer()
        .unwrap();
    assert_eq!(
        (answer.status, problem_code(&answer).as_str()),
        (413, "body_too_large")
    );
    assert!(envoy.upstream_calls().is_empty());
}

#[test]
fn records_survive_a_worker_restart() {
    let envoy = Envoy::builder().workers(2).start().unwrap();
    envoy
        .worker(0)
        .send(order("k-10"))
        .unwrap()
        .respond(created())
        .unwrap();
    envoy.restart_worker(0).unwrap();
    envoy.restart_worker(1).unwrap();
    assert!(is_replay_of_created(
        &envoy
            .worker(0)
            .send(order("k-10"))
            .unwrap()
            .answer()
            .unwrap()
    ));
}

#[test]
fn expired_records_are_swept_on_ticks() {
    // One client fills the store here: it is about the sweep, not about its share.
    let config = r#"{"capacity": 8, "records_per_cell": 8, "ttl": "1h", "lease": "10s",
                     "shares": {"identity": "100%", "peer": "100%"}}"#;
    let envoy = Envoy::builder().config(config).start().unwrap();
    for i in 0..4 {
        envoy
            .worker(0)
            .send(order(&format!("k-{i}")))
            .unwrap()
            .respond(created())
            .unwrap();
    }
    let held = |envoy: &Envoy| {
        envoy
            .shared_data()
            .entries()
            .filter(|(key, _)| key.starts_with("idemgate/c/"))
            .map(|(_, e)| e.value.len())
            .sum::<usize>()
    };
    assert!(held(&envoy) > 0);
    envoy.advance(Duration::from_secs(3601)).unwrap();
    envoy.advance(Duration::from_secs(1)).unwrap();
    assert_eq!(
        held(&envoy),
        0,
        "after the TTL a tick rewrites the cell without its records"
    );
    assert!(envoy
        .worker(0)
        .send(order("k-0"))
        .unwrap()
        .reached_upstream());
}

#[test]
fn a_configuration_error_is_refused_at_load_with_its_reason() {
    let err = Envoy::builder()
        .config(r#"{"ttl":"forever"}"#)
        .start()
        .err()
        .unwrap();
    let text = err.to_string();
    assert!(
        text.contains("rejected its configuration") && text.contains("ttl"),
        "{text}"
    );
}
