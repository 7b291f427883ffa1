//! Re-entry as stories: a detached exchange re-enters Envoy through the internal listener, whose
//! inner pass marks every answer with `response.code_details;attempts`; the filter tells the app's
//! answer from Envoy's own replies by that mark. On the router path, a route that retried reports
//! its attempts in `upstream.request_attempt_count`. Either way, an earlier attempt that may have
//! reached the app makes the outcome in doubt: the key is never released, so never run twice.

use crate::detached::detached_config;
use crate::support::{created, order};
use idemgate_host_tests::envoy::{CalloutFault, ClientAnswer, InnerPass, InnerReply};
use idemgate_host_tests::scenario::{Envoy, Failure, Forwarding, Orders, Request};
use std::sync::Arc;
use std::time::Duration;

const MARK: &str = "x-idemgate-reentry";

fn shop(way: Forwarding) -> (Envoy, Arc<Orders>) {
    let orders = Arc::new(Orders::new());
    let envoy = Envoy::builder()
        .workers(2)
        .config(&detached_config(way))
        .forwarding(way, orders.clone())
        .start()
        .unwrap();
    (envoy, orders)
}

fn reentry() -> (Envoy, Arc<Orders>) {
    shop(Forwarding::Reentry)
}

fn is_order(answer: &ClientAnswer, id: usize) -> bool {
    answer.status == 201 && answer.body == format!(r#"{{"id":{id}}}"#).as_bytes()
}

fn describe(answer: &ClientAnswer) -> String {
    format!("{} {}", answer.status, answer.body_text())
}

/// The first request meets `fault` on the re-entry cluster; the same request on the other worker
/// then gets 409 (in doubt) and, after the lease, runs again.
fn in_doubt_until_the_lease_ends(fault: CalloutFault) {
    let (envoy, orders) = reentry();
    envoy
        .faults()
        .callout(Forwarding::Reentry.cluster(), fault, 1);
    let first = envoy.worker(0).send(order("k")).unwrap();
    let records = envoy.answer_callouts().unwrap();
    assert_eq!(records.len(), 1, "{fault:?}");
    assert!(
        first.answer().is_some(),
        "{fault:?}: the client is answered"
    );
    let meanwhile = envoy.worker(1).send(order("k")).unwrap().answer().unwrap();
    assert_eq!(
        meanwhile.status,
        409,
        "{fault:?} (mark {:?}): the app may have acted, the key must wait for its lease; got {}",
        records[0].mark(),
        describe(&meanwhile)
    );
    assert_eq!(envoy.metric("idemgate.in_doubt"), Some(1), "{fault:?}");
    envoy.advance(Duration::from_secs(61)).unwrap();
    let retry = envoy.worker(1).send(order("k")).unwrap();
    envoy.answer_callouts().unwrap();
    let answer = retry.answer().unwrap();
    assert_eq!(
        answer.header("idempotent-replayed"),
        None,
        "{fault:?}: nothing was stored"
    );
    assert!(answer.status == 201, "{fault:?}: {}", describe(&answer));
    assert!(orders.served().len() <= 2, "{fault:?}");
}

#[test]
fn the_apps_answer_is_stored_and_the_mark_never_reaches_the_client() {
    let (envoy, orders) = reentry();
    let first = envoy.worker(0).send(order("k")).unwrap();
    let records = envoy.answer_callouts().unwrap();
    assert_eq!(records[0].mark(), Some("via_upstream;1"));
    let answer = first.answer().unwrap();
    assert!(is_order(&answer, 1), "{}", describe(&answer));
    assert_eq!(answer.header(MARK), None, "the mark is never relayed");
    let replay = envoy.worker(1).send(order("k")).unwrap().answer().unwrap();
    assert!(is_order(&replay, 1), "{}", describe(&replay));
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(replay.header(MARK), None, "the mark is never stored");
    assert_eq!(orders.served().len(), 1);
    assert!(envoy.anomalies().is_empty(), "{:?}", envoy.anomalies());
}

#[test]
fn an_app_that_sends_the_mark_itself_is_still_the_app() {
    // The inner header_mutation overwrites it: a 201 claiming to be a direct response is stored.
    let app = Arc::new(idemgate_host_tests::scenario::Scripted::new(vec![created(
    )
    .header(MARK, "direct_response;0")]));
    let envoy = Envoy::builder()
        .workers(2)
        .config(&detached_config(Forwarding::Reentry))
        .forwarding(Forwarding::Reentry, app.clone())
        .start()
        .unwrap();
    let first = envoy.worker(0).send(order("k")).unwrap();
    let records = envoy.answer_callouts().unwrap();
    assert_eq!(records[0].mark(), Some("via_upstream;1"));
    assert_eq!(first.answer().unwrap().status, 201);
    let replay = envoy.worker(1).send(order("k")).unwrap().answer().unwrap();
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(app.served().len(), 1);
}

#[test]
fn a_reply_the_inner_pass_makes_is_answered_as_without_a_key_and_releases_the_key() {
    for reply in [
        InnerReply::DIRECT_RESPONSE,
        InnerReply::RBAC_DENIED,
        InnerReply::LOCAL_RATE_LIMITED,
        InnerReply::EXT_AUTHZ_DENIED,
    ] {
        let (envoy, orders) = reentry();
        envoy.faults().callout(
            Forwarding::Reentry.cluster(),
            CalloutFault::Inner(InnerPass::LocalReply(reply)),
            1,
        );
        let first = envoy.worker(0).send(order("k")).unwrap();
        envoy.answer_callouts().unwrap();
        let answer = first.answer().unwrap();
        assert_eq!(
            (answer.status, answer.body_text().as_str()),
            (reply.status, reply.body),
            "{}: the client gets what the same request without a key gets",
            reply.details
        );
        assert_eq!(answer.header(MARK), None, "{}", reply.details);
        assert!(
            orders.served().is_empty(),
            "{}: never reached",
            reply.details
        );
        // Never stored, never held: the retry (which the inner pass now lets through) runs.
        let retry = envoy.worker(1).send(order("k")).unwrap();
        envoy.answer_callouts().unwrap();
        let answer = retry.answer().unwrap();
        assert!(
            is_order(&answer, 1),
            "{}: released, so the retry runs: {}",
            reply.details,
            describe(&answer)
        );
    }
}

#[test]
fn an_inner_route_timeout_is_in_doubt() {
    in_doubt_until_the_lease_ends(CalloutFault::Inner(InnerPass::Timeout));
}

#[test]
fn an_inner_route_that_retried_a_reset_attempt_is_in_doubt() {
    for attempts in [2, 3] {
        in_doubt_until_the_lease_ends(CalloutFault::Inner(InnerPass::RetriedThenRefused {
            attempts,
        }));
    }
}

#[test]
fn one_attempt_that_could_not_connect_releases_the_key() {
    let (envoy, orders) = reentry();
    envoy.faults().callout(
        Forwarding::Reentry.cluster(),
        CalloutFault::ConnectionFailure,
        1,
    );
    let first = envoy.worker(0).send(order("k")).unwrap();
    let records = envoy.answer_callouts().unwrap();
    assert!(records[0].mark().is_some_and(|m| m.ends_with(";1")));
    assert_eq!(first.answer().unwrap().status, 503);
    let retry = envoy.worker(1).send(order("k")).unwrap();
    envoy.answer_callouts().unwrap();
    assert!(is_order(&retry.answer().unwrap(), 1));
    assert_eq!(orders.served().len(), 1);
}

#[test]
fn an_unmarked_answer_is_never_stored_nor_released_and_says_why() {
    in_doubt_until_the_lease_ends(CalloutFault::Inner(InnerPass::Unmarked));
    let (envoy, _) = reentry();
    envoy.faults().callout(
        Forwarding::Reentry.cluster(),
        CalloutFault::Inner(InnerPass::Unmarked),
        1,
    );
    envoy.worker(0).send(order("k")).unwrap();
    envoy.answer_callouts().unwrap();
    let warned = envoy
        .logs()
        .iter()
        .any(|l| l.level >= 3 && l.message.contains("header_mutation"));
    assert!(
        warned,
        "a warning naming the missing header_mutation filter: {:?}",
        envoy.logs()
    );
}

#[test]
fn skipping_routes_and_filters_runs_what_the_inner_pass_would_refuse() {
    // The opt-out's price, as its name says: no filter after idemgate sees the exchange.
    let (envoy, orders) = shop(Forwarding::SkippingRoutesAndFilters);
    envoy.faults().callout(
        Forwarding::SkippingRoutesAndFilters.cluster(),
        CalloutFault::Inner(InnerPass::LocalReply(InnerReply::RBAC_DENIED)),
        1,
    );
    let first = envoy.worker(0).send(order("k")).unwrap();
    envoy.answer_callouts().unwrap();
    assert!(is_order(&first.answer().unwrap(), 1));
    assert_eq!(orders.served().len(), 1);
}

fn with_control_headers(request: Request) -> Request {
    request
        .header("x-envoy-retry-on", "5xx,reset")
        .header("x-envoy-max-retries", "5")
        .header("x-envoy-upstream-rq-timeout-ms", "1")
}

fn envoy_headers<'a>(names: impl Iterator<Item = &'a String>) -> Vec<&'a String> {
    names.filter(|n| n.starts_with("x-envoy-")).collect()
}

#[test]
fn client_sent_envoy_control_headers_never_reach_a_detached_exchange() {
    for way in crate::detached::BOTH {
        let (envoy, _) = shop(way);
        envoy
            .worker(0)
            .send(with_control_headers(order("k")))
            .unwrap();
        let pending = envoy.worker(0).pending_callouts();
        assert_eq!(pending.len(), 1, "{way:?}");
        let sent = envoy_headers(pending[0].headers.pairs().iter().map(|(n, _)| n));
        assert!(sent.is_empty(), "{way:?}: forwarded {sent:?}");
        assert_eq!(pending[0].key(), Some("k"), "{way:?}");
    }
}

#[test]
fn client_sent_envoy_control_headers_are_removed_from_a_keyed_router_path_request() {
    let envoy = Envoy::builder().workers(1).start().unwrap();
    let keyed = envoy
        .worker(0)
        .send(with_control_headers(order("k")))
        .unwrap();
    assert!(keyed.reached_upstream());
    let forwarded = keyed.forwarded().unwrap();
    let left = envoy_headers(forwarded.headers.pairs().iter().map(|(n, _)| n));
    assert!(left.is_empty(), "the router would read {left:?}");
    assert!(forwarded.headers.get("idempotency-key").is_some());
}

#[test]
fn a_router_retry_after_a_reset_attempt_is_in_doubt() {
    for attempts in [2, 3] {
        let failure = Failure::RetriedThenRefused { attempts };
        let envoy = Envoy::builder().workers(2).start().unwrap();
        let first = envoy.worker(0).send(order("k")).unwrap();
        first.upstream_fails(failure).unwrap();
        let answer = first.answer().unwrap();
        assert_eq!((answer.status, answer.local), (503, true), "{failure:?}");
        let retry = envoy.worker(1).send(order("k")).unwrap();
        assert!(
            !retry.reached_upstream(),
            "{failure:?}: the first attempt may have run; a retry must wait for the lease"
        );
        assert_eq!(retry.answer().map(|a| a.status), Some(409), "{failure:?}");
        assert_eq!(envoy.metric("idemgate.in_doubt"), Some(1), "{failure:?}");
        envoy.advance(Duration::from_secs(61)).unwrap();
        let later = envoy.worker(1).send(order("k")).unwrap();
        assert!(later.reached_upstream(), "{failure:?}: no stuck lease");
    }
}

#[test]
fn the_attempt_count_is_served_as_envoy_serializes_a_uint() {
    let envoy = Envoy::builder().workers(1).start().unwrap();
    let first = envoy.worker(0).send(order("k")).unwrap();
    let read = |envoy: &Envoy, context: u32| {
        envoy.worker(0).with(|w| {
            w.stream(context)
                .and_then(|s| s.properties.get("upstream.request_attempt_count").cloned())
        })
    };
    assert_eq!(
        read(&envoy, first.context()),
        Some(1u64.to_le_bytes().to_vec())
    );
    first
        .upstream_fails(Failure::RetriedThenRefused { attempts: 3 })
        .unwrap();
    assert_eq!(
        read(&envoy, first.context()),
        Some(3u64.to_le_bytes().to_vec())
    );
    // A request the filter answers itself never reaches the router: 0.
    let refused = envoy
        .worker(0)
        .send(Request::post("/orders").key("").json("{}"))
        .unwrap();
    assert_eq!(
        read(&envoy, refused.context()),
        Some(0u64.to_le_bytes().to_vec())
    );
}
