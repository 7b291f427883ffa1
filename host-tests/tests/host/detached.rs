//! Detached execution as stories: the filter sends a claimed request upstream with a
//! callout that belongs to the root context, so the answer outlives the client. The upstream is
//! the `Orders` model: every request it serves creates order N and answers `201 {"id":N}`. Every
//! story runs both ways an exchange goes: through the re-entry listener, and directly to the
//! cluster (`cluster_skipping_routes_and_filters`).

use crate::support::order;
use idemgate_host_tests::envoy::{BufferFault, CalloutFault, ClientAnswer};
use idemgate_host_tests::scenario::{Abort, Envoy, Forwarding, Orders};
use std::sync::Arc;
use std::time::Duration;

/// Both ways a detached exchange goes: every story here holds for each.
pub const BOTH: [Forwarding; 2] = [Forwarding::Reentry, Forwarding::SkippingRoutesAndFilters];

/// Detached execution the way `forwarding` says (timeout 15 s, lease 60 s by default).
pub fn detached_config(forwarding: Forwarding) -> String {
    format!(r#"{{"capacity": 64, {}}}"#, forwarding.upstream("15s"))
}

fn shop(forwarding: Forwarding, workers: usize) -> (Envoy, Arc<Orders>) {
    let orders = Arc::new(Orders::new());
    let envoy = Envoy::builder()
        .workers(workers)
        .config(&detached_config(forwarding))
        .forwarding(forwarding, orders.clone())
        .start()
        .unwrap();
    (envoy, orders)
}

fn is_order(answer: &ClientAnswer, id: usize) -> bool {
    answer.status == 201 && answer.body == format!(r#"{{"id":{id}}}"#).as_bytes()
}

fn is_replay_of_order(answer: &ClientAnswer, id: usize) -> bool {
    is_order(answer, id) && answer.header("idempotent-replayed") == Some("true")
}

fn problem(answer: &ClientAnswer) -> String {
    let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap_or_default();
    body["code"].as_str().unwrap_or_default().to_string()
}

#[test]
fn a_client_that_waits_gets_the_upstreams_answer_relayed() {
    for way in BOTH {
        let (envoy, orders) = shop(way, 1);
        let first = envoy.worker(0).send(order("k")).unwrap();
        assert!(
            !first.reached_upstream(),
            "the router never starts: the callout carries the request"
        );
        let pending = envoy.worker(0).pending_callouts();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].cluster, way.cluster());
        assert_eq!(
            (pending[0].method(), pending[0].path()),
            ("POST", "/orders")
        );
        assert_eq!(pending[0].key(), Some("k"));
        assert_eq!(pending[0].body, br#"{"sku":"A1","qty":1}"#);
        assert_eq!(pending[0].timeout_ms, 15_000);
        assert!(first.answer().is_none());

        envoy.worker(0).answer_callouts().unwrap();
        let answer = first.answer().unwrap();
        assert!(
            is_order(&answer, 1),
            "{way:?}: {} {}",
            answer.status,
            answer.body_text()
        );
        assert_eq!(answer.header("location"), Some("/orders/1"));
        assert_eq!(answer.header("idempotent-replayed"), None);
        assert!(answer.header("x-envoy-upstream-service-time").is_none());
        assert!(answer.header("x-idemgate-reentry").is_none(), "{way:?}");
        let replay = envoy.worker(0).send(order("k")).unwrap().answer().unwrap();
        assert!(is_replay_of_order(&replay, 1), "{way:?}");
        assert!(replay.header("x-idemgate-reentry").is_none(), "{way:?}");
        assert_eq!(orders.served().len(), 1);
        assert!(envoy.anomalies().is_empty(), "{:?}", envoy.anomalies());
    }
}

#[test]
fn the_client_goes_away_and_its_retry_gets_the_created_order() {
    // Three chunks: the client leaves once the last one went out (the callout is on its way).
    for (way, abort) in BOTH
        .into_iter()
        .flat_map(|w| [(w, Abort::AfterRequest), (w, Abort::AfterChunk(3))])
    {
        let (envoy, orders) = shop(way, 2);
        let gone = envoy
            .worker(0)
            .send(order("k").chunked_at(&[5, 10]).abort_after(abort))
            .unwrap();
        assert!(
            gone.is_done() && gone.answer().is_none(),
            "{way:?} {abort:?}"
        );
        assert_eq!(
            envoy.worker(0).pending_callouts().len(),
            1,
            "{way:?} {abort:?}"
        );

        let meanwhile = envoy.worker(1).send(order("k")).unwrap().answer().unwrap();
        assert_eq!(
            meanwhile.status, 409,
            "{way:?} {abort:?}: the execution still runs"
        );

        let records = envoy.worker(0).answer_callouts().unwrap();
        assert!(records[0].stream_gone, "{way:?} {abort:?}");
        let retry = envoy.worker(1).send(order("k")).unwrap().answer().unwrap();
        assert!(
            is_replay_of_order(&retry, 1),
            "{way:?} {abort:?}: {} {}",
            retry.status,
            retry.body_text()
        );
        assert_eq!(orders.served().len(), 1, "{way:?} {abort:?}: one execution");
        assert_eq!(envoy.metric("idemgate.detached_client_gone"), Some(1));
        assert!(envoy.anomalies().is_empty(), "{:?}", envoy.anomalies());
    }
}

#[test]
fn a_client_gone_before_its_body_ended_never_executes() {
    for (way, abort) in BOTH.into_iter().flat_map(|w| {
        [
            (w, Abort::AfterHeaders),
            (w, Abort::AfterChunk(1)),
            (w, Abort::AfterChunk(2)),
        ]
    }) {
        let (envoy, orders) = shop(way, 1);
        let gone = envoy
            .worker(0)
            .send(order("k").chunked_at(&[5, 10]).abort_after(abort))
            .unwrap();
        assert!(gone.is_done(), "{way:?} {abort:?}");
        assert!(
            envoy.worker(0).pending_callouts().is_empty(),
            "{way:?} {abort:?}"
        );
        // The stream's later callbacks never come: a chunk that still arrives reaches no filter.
        let body_calls = |envoy: &Envoy| envoy.work().get("proxy_on_request_body").map(|w| w.calls);
        let before = body_calls(&envoy);
        let mut gone = gone;
        assert!(gone.send_next_chunk().unwrap(), "{way:?} {abort:?}");
        assert_eq!(body_calls(&envoy), before, "{way:?} {abort:?}");
        // Nothing was sent: the retry runs (now, not after a lease).
        let retry = envoy.worker(0).send(order("k")).unwrap();
        envoy.answer_callouts().unwrap();
        assert!(is_order(&retry.answer().unwrap(), 1), "{way:?} {abort:?}");
        assert_eq!(orders.served().len(), 1, "{way:?} {abort:?}");
    }
}

/// The answer of a client whose execution is in doubt: the edge's `upstream_no_answer` problem
/// (504, with `retry-after`) — or, on re-entry, the reply the inner pass made, relayed as the same
/// request without a key gets it.
fn in_doubt_answer(way: Forwarding, answer: &ClientAnswer, inner: Option<u16>) -> bool {
    let problem_504 = answer.status == 504
        && problem(answer) == "upstream_no_answer"
        && answer.header("retry-after").is_some();
    let relayed = way == Forwarding::Reentry && inner == Some(answer.status);
    problem_504 || relayed
}

#[test]
fn an_upstream_that_times_out_leaves_the_key_in_doubt_until_the_lease_ends() {
    for (way, fault) in BOTH.into_iter().flat_map(|w| {
        [
            CalloutFault::Timeout,
            CalloutFault::Late(Duration::from_secs(20)),
            CalloutFault::ResetBeforeResponse,
            CalloutFault::ResetAfterHeaders,
        ]
        .map(|f| (w, f))
    }) {
        let (envoy, orders) = shop(way, 2);
        envoy.faults().callout(way.cluster(), fault, 1);
        let first = envoy.worker(0).send(order("k")).unwrap();
        let records = envoy.answer_callouts().unwrap();
        let answer = first.answer().unwrap();
        assert!(
            in_doubt_answer(way, &answer, records[0].delivery.status()),
            "{way:?} {fault:?}: {} {}",
            answer.status,
            answer.body_text()
        );
        let meanwhile = envoy.worker(1).send(order("k")).unwrap().answer().unwrap();
        assert_eq!(
            meanwhile.status, 409,
            "{way:?} {fault:?}: it may have acted"
        );
        assert_eq!(
            envoy.metric("idemgate.in_doubt"),
            Some(1),
            "{way:?} {fault:?}"
        );

        envoy.advance(Duration::from_secs(61)).unwrap();
        let retry = envoy.worker(1).send(order("k")).unwrap();
        envoy.answer_callouts().unwrap();
        assert!(is_order(&retry.answer().unwrap(), 2), "{way:?} {fault:?}");
        assert_eq!(
            orders.served().len(),
            2,
            "{way:?} {fault:?}: one take-over after the lease"
        );
    }
}

#[test]
fn an_upstream_that_never_got_the_request_releases_the_key() {
    for (way, fault) in BOTH.into_iter().flat_map(|w| {
        [
            CalloutFault::ConnectionFailure,
            CalloutFault::Status(503),
            CalloutFault::DispatchFails,
        ]
        .map(|f| (w, f))
    }) {
        let (envoy, orders) = shop(way, 2);
        envoy.faults().callout(way.cluster(), fault, 1);
        let first = envoy.worker(0).send(order("k")).unwrap();
        envoy.answer_callouts().unwrap();
        assert_eq!(first.answer().unwrap().status, 503, "{way:?} {fault:?}");
        let retry = envoy.worker(1).send(order("k")).unwrap();
        envoy.answer_callouts().unwrap();
        assert!(
            is_order(&retry.answer().unwrap(), 1),
            "{way:?} {fault:?}: released, so the retry runs at once"
        );
        assert_eq!(orders.served().len(), 1, "{way:?} {fault:?}");
    }
}

#[test]
fn a_late_answer_after_a_take_over_never_overwrites_the_new_owner() {
    for way in BOTH {
        let (envoy, orders) = shop(way, 2);
        let gone = envoy
            .worker(0)
            .send(order("k").abort_after(Abort::AfterRequest))
            .unwrap();
        assert!(gone.is_done());
        // The first callout is still pending when the lease (60 s) ends: by then Envoy's 15 s
        // timer has fired, so it is delivered as the timeout it is.
        envoy.advance(Duration::from_secs(61)).unwrap();
        let second = envoy.worker(1).send(order("k")).unwrap();
        assert_eq!(envoy.worker(1).pending_callouts().len(), 1, "took over");
        let late = envoy.worker(0).answer_callouts().unwrap();
        assert_eq!(late[0].delivery.status(), Some(504));
        envoy.worker(1).answer_callouts().unwrap();
        assert!(is_order(&second.answer().unwrap(), 2), "{way:?}");
        let replay = envoy.worker(0).send(order("k")).unwrap().answer().unwrap();
        assert!(
            is_replay_of_order(&replay, 2),
            "{way:?}: {}",
            replay.body_text()
        );
        assert_eq!(orders.served().len(), 2);
    }
}

#[test]
fn a_vm_restart_cancels_its_callouts_and_the_key_waits_for_its_lease() {
    for way in BOTH {
        let (envoy, orders) = shop(way, 2);
        envoy.worker(0).send(order("k")).unwrap();
        envoy.restart_worker(0).unwrap();
        assert!(envoy.worker(0).pending_callouts().is_empty());
        let meanwhile = envoy.worker(1).send(order("k")).unwrap().answer().unwrap();
        assert_eq!(meanwhile.status, 409);
        envoy.advance(Duration::from_secs(61)).unwrap();
        let retry = envoy.worker(1).send(order("k")).unwrap();
        envoy.answer_callouts().unwrap();
        assert!(is_order(&retry.answer().unwrap(), 1), "{way:?}");
        assert_eq!(orders.served().len(), 1);
    }
}

/// No silent fallback: an upstream answer whose body the host hands over short (or not
/// at all) was relayed to the waiting client and stored as read, so every retry was replayed a
/// body the upstream never sent. The upstream has acted and the edge cannot keep its answer: in
/// doubt, the client told so, the key held until its lease ends, then taken over once.
#[test]
fn an_answer_the_host_cannot_hand_over_whole_is_in_doubt_never_relayed_short() {
    for (way, fault) in BOTH
        .into_iter()
        .flat_map(|w| [BufferFault::Truncate(2), BufferFault::Absent].map(|f| (w, f)))
    {
        let (envoy, orders) = shop(way, 1);
        envoy.faults().buffer(4, fault, 1);
        let first = envoy.worker(0).send(order("k")).unwrap();
        envoy.answer_callouts().unwrap();
        let answer = first.answer().unwrap();
        assert_eq!(
            answer.status,
            504,
            "{way:?} {fault:?}: {}",
            answer.body_text()
        );
        assert_eq!(problem(&answer), "upstream_no_answer", "{way:?} {fault:?}");
        assert_eq!(
            envoy.metric("idemgate.stored").unwrap_or(0),
            0,
            "{way:?} {fault:?}"
        );
        assert_eq!(
            envoy.metric("idemgate.in_doubt"),
            Some(1),
            "{way:?} {fault:?}"
        );
        let meanwhile = envoy.worker(0).send(order("k")).unwrap().answer().unwrap();
        assert_eq!(meanwhile.status, 409, "{way:?} {fault:?}: it has acted");
        envoy.advance(Duration::from_secs(61)).unwrap();
        let retry = envoy.worker(0).send(order("k")).unwrap();
        envoy.answer_callouts().unwrap();
        assert!(is_order(&retry.answer().unwrap(), 2), "{way:?} {fault:?}");
        assert_eq!(orders.served().len(), 2, "{way:?} {fault:?}");
        assert!(envoy.anomalies().is_empty(), "{:?}", envoy.anomalies());
    }
}

/// The body a detached exchange sends stays with Envoy until the exchange ends: it is charged to
/// its client's part of the hashing budget until then, so a client cannot hold more bodies in
/// flight through exchanges it started than its part allows.
#[test]
fn a_detached_exchanges_body_is_charged_until_the_exchange_ends() {
    for way in BOTH {
        let orders = Arc::new(Orders::new());
        // A body of about 1 KiB takes 2 KiB while it is taken in (hashed, and kept to be sent).
        let config = format!(
            r#"{{"capacity": 64, "max_request_body": "1KiB", "hashing_budget": "64KiB",
                 "hashing_budget_per_peer": "2KiB", {}}}"#,
            way.upstream("15s")
        );
        let envoy = Envoy::builder()
            .config(&config)
            .forwarding(way, orders.clone())
            .start()
            .unwrap();
        let body = format!(r#"{{"sku":"A1","pad":"{}"}}"#, "p".repeat(900));
        let send = |key: &str, peer: &str| {
            envoy
                .worker(0)
                .send(order(key).json(&body).peer(peer))
                .unwrap()
        };
        let (alice, bob) = ("10.0.0.7:51234", "10.0.0.8:51234");
        let first = send("k1", alice);
        assert_eq!(envoy.worker(0).pending_callouts().len(), 1, "{way:?}");

        // Alice's next body meets her part still holding the first one's.
        let second = send("k2", alice).expect_answer().unwrap();
        assert_eq!(
            (second.status, problem(&second).as_str()),
            (503, "hashing_budget_exceeded"),
            "{way:?}: {}",
            second.body_text()
        );
        // Bob has his own part.
        let other = send("k3", bob);
        assert_eq!(envoy.worker(0).pending_callouts().len(), 2, "{way:?}");

        envoy.worker(0).answer_callouts().unwrap();
        assert!(is_order(&first.expect_answer().unwrap(), 1), "{way:?}");
        assert!(is_order(&other.expect_answer().unwrap(), 2), "{way:?}");
        // Her exchange over, Alice's part is free again.
        let retry = send("k2", alice);
        envoy.worker(0).answer_callouts().unwrap();
        assert!(is_order(&retry.expect_answer().unwrap(), 3), "{way:?}");
        assert_eq!(orders.served().len(), 3, "{way:?}");
        assert!(envoy.anomalies().is_empty(), "{:?}", envoy.anomalies());
    }
}
