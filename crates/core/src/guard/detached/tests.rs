//! A detached exchange's endings, as the filter drives them.

use super::*;
use crate::answer::answer;
use crate::order::ORDER_HEADER;
use alloc::borrow::ToOwned;
use alloc::string::String;
use alloc::vec;

const KEY: StorageKey = StorageKey::from_stored([1; 32]);
const OWNER: OwnerToken = OwnerToken([2; 16]);
const CLAIMED: UnixMillis = UnixMillis(10_000);

fn policy() -> Policy {
    let mut policy = Policy::defaults();
    policy.max_relay_body = 8;
    policy.lease = Span::from_secs(30);
    policy.replay_headers = vec!["location".into()];
    policy
}

/// The answer to a callout on a route of `kind` via `via`, ordered (resource claim 7) or not.
fn ending(kind: RouteKind, via: Via, order: bool, waits: bool) -> Ending<u8> {
    let callout = Callout {
        key: KEY,
        owner: OWNER,
        claimed_at: Some(CLAIMED),
        kind,
        via,
        order: order.then_some(7),
    };
    Ending::new(callout, &policy(), waits)
}

fn head(status: &'static str) -> [(&'static str, &'static [u8]); 4] {
    [
        (":status", status.as_bytes()),
        ("location", b"/o/1"),
        ("date", b"today"),
        ("x-envoy-upstream-service-time", b"3"),
    ]
}

fn answered(
    mut ending: Ending<u8>,
    origin: CalloutOrigin,
    status: &'static str,
    body: Option<&[u8]>,
) -> (Finish, Ending<u8>) {
    let head = head(status);
    let capture = Capture::head(head, &policy());
    let finish = ending.answered(origin, capture, body.map(<[u8]>::to_vec));
    (finish, ending)
}

fn no_answer(mut ending: Ending<u8>, cause: DoubtCause) -> (Finish, Ending<u8>) {
    let finish = ending.no_answer(cause);
    (finish, ending)
}

trait Finished {
    fn finished_with(
        self,
        outcome: Option<FinishOutcome>,
        now: impl FnOnce() -> Option<UnixMillis>,
    ) -> Ended<u8>;
}

/// Finished with the test's answer headers (those of a 201; only what is relayed of them counts).
impl Finished for Ending<u8> {
    fn finished_with(
        self,
        outcome: Option<FinishOutcome>,
        now: impl FnOnce() -> Option<UnixMillis>,
    ) -> Ended<u8> {
        self.finished(outcome, head("201"), now)
    }
}

fn location() -> Vec<(String, String)> {
    vec![("location".to_owned(), "/o/1".to_owned())]
}

fn clock() -> Option<UnixMillis> {
    Some(UnixMillis(25_000))
}

#[test]
fn the_upstreams_answer_is_stored_and_relayed_with_the_applied_mark() {
    let e = ending(RouteKind::Api, Via::Reentry, true, true);
    assert!(e.relays_whole(8) && !e.relays_whole(9));
    let (finish, relaying) = answered(e, CalloutOrigin::Upstream, "201", Some(b"{}"));
    assert_eq!(
        finish,
        Finish {
            key: KEY,
            owner: OWNER,
            facts: ResponseFacts::Upstream {
                status: 201,
                headers: location(),
                body: Some(b"{}".to_vec()),
            },
            cause: DoubtCause::Other,
        }
    );
    let ended = relaying.finished_with(Some(FinishOutcome::Stored), || panic!("no clock needed"));
    let mut headers = location();
    headers.push((ORDER_HEADER.into(), "applied".into()));
    assert_eq!(
        ended,
        Ended {
            answer: HttpAnswer {
                status: 201,
                headers,
                body: b"{}".to_vec(),
            },
            from_upstream: true,
            settle: Some((7, true)),
            events: Events::default(),
        }
    );
}

#[test]
fn an_answer_over_the_relay_bound_is_relayed_without_its_body() {
    let e = ending(RouteKind::Api, Via::SkippingRoutesAndFilters, false, false);
    let (finish, relaying) = answered(e, CalloutOrigin::Upstream, "200", None);
    assert!(matches!(
        finish.facts,
        ResponseFacts::Upstream { body: None, .. }
    ));
    let ended = relaying.finished_with(Some(FinishOutcome::Stored), || None);
    let headers = location();
    let without = answer(&EdgeAnswer::RelayWithoutBody {
        status: 200,
        headers: &headers,
    });
    assert_eq!(ended.answer, without);
    assert!(ended.from_upstream);
    let events: Vec<Event> = ended.events.iter().collect();
    assert_eq!(events, [Event::DetachedClientGone, Event::RelayTooLarge]);
}

#[test]
fn no_answer_is_in_doubt_until_the_lease_ends() {
    for (cause, reply) in [
        (DoubtCause::UpstreamReset, None),
        (DoubtCause::UpstreamTimeout, Some("504")),
        (DoubtCause::Other, Some("abc")),
    ] {
        let e = ending(RouteKind::Api, Via::Reentry, true, true);
        let (finish, relaying) = match reply {
            None => no_answer(e, cause),
            Some(status) => answered(e, CalloutOrigin::InDoubt(cause), status, Some(b"")),
        };
        assert_eq!(
            (finish.facts, finish.cause),
            (ResponseFacts::InDoubt, cause)
        );
        let ended = relaying.finished_with(Some(FinishOutcome::KeptInFlight), clock);
        // Claimed at 10 s with a 30 s lease, now 25 s: 15 s left.
        let no_answer = EdgeAnswer::Relay(RelayProblem::NoAnswer {
            retry_after: Span::from_secs(15),
        });
        assert_eq!(ended.answer, answer(&no_answer));
        assert_eq!(ended.settle, None, "the resource's claim holds too");
        assert!(!ended.from_upstream);
    }
    // Without a clock reading: the whole lease.
    let e = ending(RouteKind::Api, Via::Reentry, false, true);
    let (_, relaying) = no_answer(e, DoubtCause::Other);
    let ended = relaying.finished_with(None, || None);
    let whole = EdgeAnswer::Relay(RelayProblem::NoAnswer {
        retry_after: Span::from_secs(30),
    });
    assert_eq!(ended.answer, answer(&whole));
}

#[test]
fn a_key_the_store_released_was_never_sent() {
    let e = ending(RouteKind::Api, Via::Reentry, true, true);
    let (_, relaying) = no_answer(e, DoubtCause::Other);
    let ended = relaying.finished_with(Some(FinishOutcome::Released), || panic!("no clock needed"));
    assert_eq!(
        ended.answer,
        answer(&EdgeAnswer::Relay(RelayProblem::NotSent))
    );
    assert_eq!(ended.settle, Some((7, false)));
}

#[test]
fn never_reached_is_released_and_on_reentry_the_proxys_reply_is_relayed() {
    for via in [Via::Reentry, Via::SkippingRoutesAndFilters] {
        let e = ending(RouteKind::Api, via, true, true);
        let (finish, relaying) = answered(e, CalloutOrigin::NeverReached, "403", Some(b"no"));
        assert_eq!(finish.facts, ResponseFacts::NeverReached);
        let ended = relaying.finished_with(Some(FinishOutcome::Released), || None);
        let expected = match via {
            Via::Reentry => HttpAnswer {
                status: 403,
                headers: location(),
                body: b"no".to_vec(),
            },
            Via::SkippingRoutesAndFilters => answer(&EdgeAnswer::Relay(RelayProblem::NotSent)),
        };
        assert_eq!(ended.answer, expected);
        assert!(!ended.from_upstream);
        assert_eq!(ended.settle, Some((7, false)));
    }
}

#[test]
fn a_callback_routes_failure_is_released_and_leaves_the_event_unapplied() {
    let e = ending(RouteKind::Callback, Via::Reentry, true, true);
    let (finish, relaying) = answered(e, CalloutOrigin::Upstream, "500", Some(b"oops"));
    assert_eq!(finish.facts, ResponseFacts::NeverReached);
    let ended = relaying.finished_with(Some(FinishOutcome::Released), || None);
    assert_eq!(ended.answer.status, 500);
    assert_eq!(ended.answer.headers, location(), "no applied mark");
    assert_eq!(ended.settle, Some((7, false)));
}

#[test]
fn one_retry_after_rule() {
    let lease = Span::from_secs(30);
    assert_eq!(retry_after(None, Some(CLAIMED), lease), lease);
    assert_eq!(retry_after(clock(), None, lease), lease);
    assert_eq!(
        retry_after(clock(), Some(CLAIMED), lease),
        Span::from_secs(15)
    );
}

#[test]
fn finished_without_an_answer_is_no_answer() {
    let ended = ending(RouteKind::Api, Via::Reentry, true, true).finished(None, [], || None);
    let whole = EdgeAnswer::Relay(RelayProblem::NoAnswer {
        retry_after: Span::from_secs(30),
    });
    assert_eq!(ended.answer, answer(&whole));
    assert_eq!(ended.settle, None);
}
