//! Host failure injection: the host's calls fail or answer unexpectedly, and the filter must follow
//! its configured failure mode — never trap, never answer from the wrong record.

use crate::support::{created, order};
use idemgate_host_tests::abi::Status;
use idemgate_host_tests::envoy::{BufferFault, ClientAnswer, Effect, SharedOp};
use idemgate_host_tests::scenario::{Envoy, Request};
use std::time::Duration;

const CELLS: &str = "idemgate/";

fn code(answer: &ClientAnswer) -> String {
    let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap_or_default();
    body["code"].as_str().unwrap_or_default().to_string()
}

fn rejected_by_store(answer: &ClientAnswer) {
    assert_eq!(answer.status, 503, "{}", answer.body_text());
    assert!(code(answer).starts_with("store_"), "{}", answer.body_text());
    assert!(answer.header("retry-after").is_some());
}

#[test]
fn cas_mismatches_from_concurrent_writers_are_retried() {
    let envoy = Envoy::builder().workers(2).start().unwrap();
    envoy
        .faults()
        .add(SharedOp::Set, CELLS, Effect::ConcurrentRewrite, 3);
    let first = envoy.worker(0).send(order("k")).unwrap();
    assert!(first.reached_upstream(), "three lost races, then the claim");
    envoy
        .faults()
        .add(SharedOp::Get, CELLS, Effect::ConcurrentRewrite, 2);
    first.respond(created()).unwrap();
    assert_eq!(envoy.faults().fired(), 5, "every injected race was met");
    assert_eq!(
        envoy.metric("idemgate.stored"),
        Some(1),
        "two lost races, then the completion"
    );
    let replay = envoy.worker(1).send(order("k")).unwrap().answer().unwrap();
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
}

#[test]
fn endless_cas_mismatches_apply_the_store_error_mode() {
    let envoy = Envoy::builder().start().unwrap();
    envoy
        .faults()
        .add(SharedOp::Set, CELLS, Effect::ConcurrentRewrite, usize::MAX);
    let answer = envoy.worker(0).send(order("k")).unwrap().answer().unwrap();
    rejected_by_store(&answer);
    assert_eq!(code(&answer), "store_contention");

    let open = Envoy::builder()
        .config(r#"{"on_store_error":"pass_through"}"#)
        .start()
        .unwrap();
    open.faults()
        .add(SharedOp::Set, CELLS, Effect::ConcurrentRewrite, usize::MAX);
    assert!(open.worker(0).send(order("k")).unwrap().reached_upstream());
    assert_eq!(open.metric("idemgate.passthrough"), Some(1));
}

#[test]
fn failing_shared_data_reads_apply_the_store_error_mode() {
    for status in [
        Status::InvalidMemoryAccess,
        Status::InternalFailure,
        Status::BadArgument,
    ] {
        let envoy = Envoy::builder().start().unwrap();
        envoy
            .faults()
            .add(SharedOp::Get, CELLS, Effect::Fail(status), usize::MAX);
        let exchange = envoy
            .worker(0)
            .send(order("k"))
            .unwrap_or_else(|e| panic!("{status:?}: {e}"));
        rejected_by_store(&exchange.answer().unwrap());
        assert!(envoy.upstream_calls().is_empty());
    }
}

#[test]
fn failing_shared_data_writes_apply_the_store_error_mode() {
    for status in [Status::InvalidMemoryAccess, Status::InternalFailure] {
        let envoy = Envoy::builder().start().unwrap();
        envoy
            .faults()
            .add(SharedOp::Set, CELLS, Effect::Fail(status), usize::MAX);
        let exchange = envoy
            .worker(0)
            .send(order("k"))
            .unwrap_or_else(|e| panic!("{status:?}: {e}"));
        rejected_by_store(&exchange.answer().unwrap());
    }
}

#[test]
fn a_failing_completion_leaves_the_claim_to_its_lease() {
    let envoy = Envoy::builder().workers(2).start().unwrap();
    let first = envoy.worker(0).send(order("k")).unwrap();
    envoy
        .faults()
        .add(SharedOp::Set, CELLS, Effect::ConcurrentRewrite, usize::MAX);
    first.respond(created()).unwrap();
    assert_eq!(
        first.answer().unwrap().status,
        201,
        "the client still gets the upstream's answer"
    );
    let faults_fired = envoy.faults().fired();
    assert!(faults_fired > 0);
    envoy.advance(Duration::from_secs(61)).unwrap();
    let mut faults = envoy.faults();
    *faults = Default::default();
    drop(faults);
    assert!(
        envoy.worker(1).send(order("k")).unwrap().reached_upstream(),
        "the lease ended"
    );
}

#[test]
fn missing_code_details_count_as_in_doubt() {
    let envoy = Envoy::builder().workers(2).start().unwrap();
    envoy.faults().hide_property("response.code_details");
    let first = envoy.worker(0).send(order("k")).unwrap();
    first.respond(created()).unwrap();
    assert_eq!(first.answer().unwrap().status, 201);
    assert_eq!(
        envoy
            .worker(1)
            .send(order("k"))
            .unwrap()
            .answer()
            .unwrap()
            .status,
        409
    );
    assert_eq!(envoy.metric("idemgate.in_doubt"), Some(1));
}

#[test]
fn a_missing_peer_address_never_merges_clients() {
    // No scope header and no `source.address`: there is no identity to scope the key to, so the
    // filter applies its store-error failure mode (default: reject with 503 scope_unavailable)
    // instead of guarding both clients in one shared namespace.
    let envoy = Envoy::builder().workers(2).start().unwrap();
    envoy.faults().hide_property("source.address");
    let anonymous = |peer: &str| {
        Request::post("/orders")
            .key("k")
            .json(r#"{"sku":"A1"}"#)
            .peer(peer)
    };
    for (worker, peer) in [(0, "10.0.0.1:1000"), (1, "10.9.9.9:2000")] {
        let flight = envoy.worker(worker).send(anonymous(peer)).unwrap();
        assert!(
            !flight.reached_upstream(),
            "an unscoped request was guarded (and forwarded) in a shared namespace"
        );
        let answer = flight
            .answer()
            .expect("the edge answers an unscoped request itself");
        assert_eq!(answer.status, 503);
        assert!(answer
            .body_text()
            .contains("urn:idemgate:problem:scope_unavailable"));
        assert!(answer.header("idempotent-replayed").is_none());
    }
    assert_eq!(envoy.metric("idemgate.scope_unavailable"), Some(2));
}

/// No silent fallback: a request whose headers the host cannot hand over was read as one
/// without headers — no `:method`, no key — and forwarded unguarded. Now it is refused with 503
/// `request_unreadable`, and nothing is claimed: once the host reads again the key is new.
#[test]
fn a_request_whose_headers_cannot_be_read_is_refused_never_forwarded_unguarded() {
    let envoy = Envoy::builder().start().unwrap();
    envoy.faults().fail_header_map(0, 1);
    let refused = envoy.worker(0).send(order("k")).unwrap();
    assert!(!refused.reached_upstream(), "forwarded unguarded");
    let answer = refused.answer().unwrap();
    assert_eq!(answer.status, 503, "{}", answer.body_text());
    assert_eq!(code(&answer), "request_unreadable");
    assert_eq!(answer.header("retry-after"), Some("1"));
    assert_eq!(envoy.faults().header_maps_failed(), 1, "the fault fired");
    let again = envoy.worker(0).send(order("k")).unwrap();
    assert!(again.reached_upstream(), "nothing was claimed");
    again.respond(created()).unwrap();
    assert!(envoy.anomalies().is_empty());
}

/// No silent fallback: a request body chunk the host hands over short (or not at all)
/// was fingerprinted as it came, so the stored fingerprint was of another payload: the retry of
/// the very same request was `key_reused`, and two payloads whose reads failed alike matched.
/// Now the request is refused with 503 `request_unreadable` before anything is claimed.
#[test]
fn a_request_body_that_cannot_be_read_claims_nothing() {
    for fault in [BufferFault::Truncate(2), BufferFault::Absent] {
        let envoy = Envoy::builder().start().unwrap();
        envoy.faults().buffer(0, fault, 1);
        let refused = envoy.worker(0).send(order("k").chunked_at(&[5])).unwrap();
        assert!(!refused.reached_upstream(), "{fault:?}: forwarded");
        let answer = refused.answer().unwrap();
        assert_eq!(answer.status, 503, "{fault:?}: {}", answer.body_text());
        assert_eq!(code(&answer), "request_unreadable", "{fault:?}");
        let again = envoy.worker(0).send(order("k").chunked_at(&[5])).unwrap();
        assert!(again.reached_upstream(), "{fault:?}: nothing was claimed");
        again.respond(created()).unwrap();
        let replay = envoy.worker(0).send(order("k")).unwrap().answer().unwrap();
        assert_eq!(replay.status, 201, "{fault:?}: {}", replay.body_text());
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        assert!(envoy.anomalies().is_empty());
    }
}

/// No silent fallback: an upstream body the host hands over short (or not at all) was
/// stored as read, and every retry was replayed a body the upstream never sent. The client still
/// gets the upstream's answer (Envoy streams it); the edge cannot keep it, and the upstream has
/// acted: in doubt, so the claim holds until its lease ends and a retry is told to wait.
#[test]
fn a_response_body_that_cannot_be_read_is_in_doubt_never_stored() {
    for fault in [BufferFault::Truncate(2), BufferFault::Absent] {
        let envoy = Envoy::builder().start().unwrap();
        envoy.faults().buffer(1, fault, 1);
        let first = envoy.worker(0).send(order("k")).unwrap();
        first.respond(created().chunked_at(&[3])).unwrap();
        let answer = first.answer().unwrap();
        assert_eq!(
            answer.status, 201,
            "{fault:?}: the client gets the upstream's answer"
        );
        assert_eq!(answer.body_text(), r#"{"id":7}"#, "{fault:?}");
        assert_eq!(
            envoy.metric("idemgate.stored").unwrap_or(0),
            0,
            "{fault:?}: stored"
        );
        assert_eq!(envoy.metric("idemgate.in_doubt"), Some(1), "{fault:?}");
        let retry = envoy.worker(0).send(order("k")).unwrap();
        assert!(!retry.reached_upstream(), "{fault:?}: run twice");
        let retried = retry.answer().unwrap();
        assert_eq!(retried.status, 409, "{fault:?}: {}", retried.body_text());
        assert_eq!(code(&retried), "request_in_flight", "{fault:?}");
        assert!(envoy.anomalies().is_empty());
    }
}

/// No silent fallback: a scope property the host failed to read (a failing call, not
/// an absent property) was taken as absent, so the request was scoped by the next source — the
/// peer — and the same request read again was another key in another namespace: run twice. Now
/// it is refused with 503 `request_unreadable`, and nothing is claimed.
#[test]
fn a_scope_property_the_host_fails_to_read_is_never_taken_as_absent() {
    const SUB: &str = "metadata.filter_metadata.jwt.sub";
    let envoy = Envoy::builder()
        .config(
            r#"{"capacity": 64, "scope": [{"property": ["metadata", "filter_metadata", "jwt", "sub"]}, "peer"]}"#,
        )
        .start()
        .unwrap();
    let checkout = || order("k").property(SUB, "alice");
    envoy.faults().fail_property(SUB, 1);
    let refused = envoy.worker(0).send(checkout()).unwrap();
    assert!(
        !refused.reached_upstream(),
        "scoped by the next source and forwarded"
    );
    let answer = refused.answer().unwrap();
    assert_eq!(answer.status, 503, "{}", answer.body_text());
    assert_eq!(code(&answer), "request_unreadable");
    assert_eq!(envoy.faults().properties_failed(), 1, "the fault fired");
    let first = envoy.worker(0).send(checkout()).unwrap();
    assert!(first.reached_upstream(), "nothing was claimed");
    first.respond(created()).unwrap();
    let replay = envoy.worker(0).send(checkout()).unwrap().answer().unwrap();
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert!(envoy.anomalies().is_empty());
}

#[test]
fn the_clock_going_backwards_neither_traps_nor_frees_a_live_claim() {
    let envoy = Envoy::builder().workers(2).start().unwrap();
    let first = envoy.worker(0).send(order("k")).unwrap();
    envoy.clock().rewind(Duration::from_secs(3600));
    let second = envoy.worker(1).send(order("k")).unwrap().answer().unwrap();
    assert_eq!(second.status, 409);
    let retry_after: u64 = second.header("retry-after").unwrap().parse().unwrap();
    assert!(retry_after >= 1);
    first.respond(created()).unwrap();
    let replay = envoy.worker(1).send(order("k")).unwrap().answer().unwrap();
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    // Time reads as the epoch (a host clock that is not set).
    envoy.clock().set_ms(0);
    let at_epoch = envoy.worker(0).send(order("k")).unwrap().answer().unwrap();
    assert_eq!(at_epoch.header("idempotent-replayed"), Some("true"));
    let fresh = envoy.worker(0).send(order("k-new")).unwrap();
    assert!(fresh.reached_upstream());
}

/// No silent fallback: an upstream answer whose `:status` cannot be read was stored as
/// "status 0" and replayed to every retry. It is an answer the edge cannot keep, and the upstream
/// may have acted: in doubt, so the claim holds until its lease ends and a retry is told to wait.
#[test]
fn an_answer_without_a_readable_status_is_in_doubt_never_stored() {
    let envoy = Envoy::builder().start().unwrap();
    let first = envoy.worker(0).send(order("k")).unwrap();
    let mut unreadable = created();
    unreadable.status = 0;
    first.respond(unreadable).unwrap();
    assert_eq!(
        envoy.metric("idemgate.stored").unwrap_or(0),
        0,
        "nothing stored"
    );
    assert_eq!(envoy.metric("idemgate.in_doubt"), Some(1));
    let retry = envoy.worker(0).send(order("k")).unwrap();
    assert!(
        !retry.reached_upstream(),
        "the claim holds until its lease ends"
    );
    let answer = retry.answer().unwrap();
    assert_eq!(answer.status, 409, "{}", answer.body_text());
    assert_eq!(code(&answer), "request_in_flight");
}

/// No silent fallback: a clock the host cannot read was taken as the epoch, so a claim
/// was made in 1970 (expired before it was written). Now nothing is claimed or forwarded, the
/// client gets 503 `clock_unavailable`, and once the clock reads again the same key is new.
#[test]
fn a_clock_that_cannot_be_read_claims_nothing() {
    let envoy = Envoy::builder().start().unwrap();
    envoy.faults().fail_clock(usize::MAX);
    let refused = envoy.worker(0).send(order("k")).unwrap();
    assert!(!refused.reached_upstream());
    let answer = refused.answer().unwrap();
    assert_eq!(answer.status, 503, "{}", answer.body_text());
    assert_eq!(code(&answer), "clock_unavailable");
    assert!(answer.header("retry-after").is_some());
    envoy.faults().fail_clock(0);
    let again = envoy.worker(0).send(order("k")).unwrap();
    assert!(again.reached_upstream(), "nothing was left claimed");
    again.respond(created()).unwrap();
    assert_eq!(again.answer().unwrap().status, 201);
}

/// The clock fails when the upstream's answer is to be stored: nothing can be written without
/// knowing when, so the outcome is in doubt and the claim holds until its lease ends — a retry is
/// told to wait, never run a second time.
#[test]
fn a_clock_failing_at_the_answer_keeps_the_claim_in_flight() {
    let envoy = Envoy::builder().start().unwrap();
    let first = envoy.worker(0).send(order("k")).unwrap();
    assert!(first.reached_upstream());
    envoy.faults().fail_clock(1);
    first.respond(created()).unwrap();
    assert_eq!(
        first.answer().unwrap().status,
        201,
        "the client still gets its answer"
    );
    assert_eq!(envoy.metric("idemgate.stored").unwrap_or(0), 0);
    let retry = envoy.worker(0).send(order("k")).unwrap();
    assert!(!retry.reached_upstream(), "never run twice");
    assert_eq!(retry.answer().unwrap().status, 409);
}
