//! Detached execution: the upstream exchange of a claimed request belongs to the key,
//! not to the client's connection.
//!
//! On a route whose `forward` is `detached`, the filter keeps the request (headers and the body it
//! hashes, within `max_request_body`), and once the claim is won it sends the request itself with
//! `proxy_http_call` to the route's Envoy cluster, with the route's upstream timeout, instead of
//! letting the stream continue to the router (the stream stays paused; the router never starts).
//! That call belongs to the root context: if the client goes away, Envoy destroys the stream but
//! the call runs to its end, and its answer comes to the root context's
//! `proxy_on_http_call_response`, where [`crate::callout`] finds this module's [`Exchange`]:
//!
//! 1. the answer is classified ([`classify_answer`]): the upstream's own answer, a reply Envoy's
//!    async client made because the request never reached an upstream, or no answer (reset,
//!    upstream timeout: in doubt);
//! 2. the core decides the ending from what the filter read ([`idemgate_core::guard::Ending`]):
//!    how the claim is finished under the usual rules (release set, header allow-list,
//!    `max_response_body`; carried out by [`crate::settle`]), the ordering claim's settlement,
//!    and what the client is relayed;
//! 3. if the client's stream still exists, it gets that answer: the upstream's status, headers
//!    (without hop-by-hop headers, `content-length`, `date`, `server` and `x-envoy-*`, which Envoy
//!    sets itself: [`idemgate_core::headers::relayed`]) and body, as a local reply with
//!    `response.code_details` = [`RELAY_DETAILS`]; a clear problem answer otherwise
//!    (`RelayProblem`). The stream's own response callbacks see that reply and leave it alone
//!    (stage `Detached`/`Idle`).
//!
//! Why the filter copies the body chunks as they pass instead of pausing the body
//! (`StopIterationAndBuffer`) and reading Envoy's buffer: measured in Envoy 1.40, once a body
//! callback pauses, the next one's size is the whole buffered body so far (`0..size` starts with
//! the earlier chunks), which would change how chunks are hashed; and it would save nothing while
//! the exchange runs — Envoy holds the request body in one filter's buffer or the other's, and the
//! filter's own copy is dropped as soon as `proxy_http_call` has copied it.
//!
//! What the request carries upstream is what the router would forward: method, path and query,
//! `:authority`, `:scheme`, every end-to-end header (`x-request-id`, `x-forwarded-for`, ...), and
//! the body, with `content-length` set; never hop-by-hop headers (RFC 9110 §7.6.1) or those the
//! `connection` header names.
//!
//! Differences from the router path (the README lists them): no per-try timeout or retry policy of
//! the route applies (the request is sent once; the cluster's circuit breakers and outlier
//! detection still do); the answer is buffered whole (up to `upstream.max_body`) before the client
//! gets any of it, so nothing streams; an answer over `upstream.max_body` is recorded (status,
//! headers, no body) and the client gets the upstream's own status and headers without the body,
//! marked `Idempotent-Body-Omitted: true` (the core's `EdgeAnswer::RelayWithoutBody`) — a success
//! is never turned into a 5xx.

use crate::abi::{self, BufferType, Headers, LogLevel, MapType, Status};
use crate::host;
use crate::metrics::Counter;
use crate::origin::{
    classify_attempts, doubt_cause, reentry_mark, DoubtCause, Origin, NEVER_REACHED_RESETS,
};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::settle::settle;
use crate::shared::{Exchange, Shared};
use alloc::rc::Rc;
use core::time::Duration;
use idemgate_core::answer::HttpAnswer;
use idemgate_core::guard::Capture;
use idemgate_core::headers;
use idemgate_core::headers::REENTRY_MARK;
use idemgate_core::policy::{Detached, Via};
use idemgate_core::FinishOutcome;

mod answer;
pub use answer::{answered, classify_answer, classify_reentry, ReentryOrigin, Relay};
pub use idemgate_core::guard::CalloutOrigin;

/// `response.code_details` of a relayed answer (in access logs).
pub const RELAY_DETAILS: &str = "idemgate_relayed";

/// The header Envoy's router adds to every answer that came from an upstream (and never to the
/// replies it makes itself); it tells the upstream's answer from the async client's own.
pub const UPSTREAM_MARK: &str = "x-envoy-upstream-service-time";

/// The headers sent upstream for a request whose headers were `headers` (all of them, pseudo-
/// headers included), with `content_length` for its body: the core's rule
/// ([`idemgate_core::headers::forwarded`]).
pub fn forward_headers<'a>(
    headers: &'a Headers,
    content_length: &'a str,
) -> Vec<(&'a str, &'a [u8])> {
    let mut out = headers::forwarded(headers.iter());
    out.push(("content-length", content_length.as_bytes()));
    out
}

/// Sends the claimed request on a detached exchange; the token names the callout.
pub fn send(detached: &Detached, headers: &Headers, body: &[u8]) -> Result<u32, Status> {
    let length = body.len().to_string();
    let forwarded = forward_headers(headers, &length);
    abi::http_call(
        &detached.cluster,
        &forwarded,
        body,
        Duration::from_millis(detached.timeout.as_millis()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Headers {
        Headers::from_pairs(pairs.iter().map(|(n, v)| (*n, v.as_bytes())))
    }

    #[test]
    fn forwards_end_to_end_headers_only() {
        let headers = h(&[
            (":method", "POST"),
            (":path", "/orders?x=1"),
            (":authority", "shop"),
            (":scheme", "http"),
            (":protocol", "websocket"),
            ("connection", "keep-alive, x-private"),
            ("keep-alive", "timeout=5"),
            ("x-private", "1"),
            ("transfer-encoding", "chunked"),
            ("content-length", "99"),
            ("x-request-id", "abc"),
            ("x-envoy-retry-on", "5xx"),
            ("x-envoy-max-retries", "9"),
            ("x-envoy-upstream-rq-timeout-ms", "600000"),
            ("x-envoy-external-address", "192.0.2.9"),
            ("idempotency-key", "k"),
            ("content-type", "application/json"),
        ]);
        let forwarded = forward_headers(&headers, "12");
        let names: Vec<&str> = forwarded.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                ":method",
                ":path",
                ":authority",
                ":scheme",
                "x-request-id",
                "x-envoy-external-address",
                "idempotency-key",
                "content-type",
                "content-length"
            ]
        );
        assert_eq!(forwarded.last().map(|(_, v)| *v), Some(b"12".as_slice()));
    }

    /// On re-entry every answer comes through the inner pass and so carries the async
    /// client's upstream mark; only the re-entry mark tells the app's answer from Envoy's replies.
    #[test]
    fn reentry_answers_are_told_apart_by_their_mark() {
        let marked = |mark: &str| {
            h(&[
                (":status", "200"),
                (UPSTREAM_MARK, "1"),
                (REENTRY_MARK, mark),
            ])
        };
        let origin = |mark: &str| classify_reentry(200, &marked(mark), b"");
        assert_eq!(
            origin("via_upstream;1"),
            ReentryOrigin::Marked(CalloutOrigin::Upstream)
        );
        for never in [
            "direct_response;0",
            "rbac_access_denied_matched_policy[evil];0",
            "local_rate_limited;0",
            "ext_authz_denied;0",
        ] {
            assert_eq!(
                origin(never),
                ReentryOrigin::Marked(CalloutOrigin::NeverReached),
                "{never}"
            );
        }
        assert_eq!(
            origin("response_timeout;1"),
            ReentryOrigin::Marked(CalloutOrigin::InDoubt(DoubtCause::UpstreamTimeout))
        );
        // The route's retries: the last attempt could not connect, an earlier one may have run.
        assert_eq!(
            origin("upstream_reset_before_response_started{remote_connection_failure|delayed_connect_error:_Connection_refused};3"),
            ReentryOrigin::Marked(CalloutOrigin::InDoubt(DoubtCause::UpstreamReset))
        );
        assert_eq!(
            origin("upstream_reset_before_response_started{remote_connection_failure};1"),
            ReentryOrigin::Marked(CalloutOrigin::NeverReached)
        );
        // A mark the inner chain did not write alone: an app's value before the marker's (an
        // appending marker), or one not of its shape. Read, `direct_response` would release the
        // app's own answer and let a retry run it again.
        let twice = h(&[
            (":status", "201"),
            (UPSTREAM_MARK, "1"),
            (REENTRY_MARK, "direct_response;0"),
            (REENTRY_MARK, "via_upstream;1"),
        ]);
        assert_eq!(
            classify_reentry(201, &twice, b""),
            ReentryOrigin::Marked(CalloutOrigin::InDoubt(DoubtCause::Other))
        );
        for other in [
            "direct_response",
            "direct_response;0;",
            "direct_response;0 1",
            "",
        ] {
            assert_eq!(
                origin(other),
                ReentryOrigin::Marked(CalloutOrigin::InDoubt(DoubtCause::Other)),
                "{other:?}"
            );
        }
        // A listener without the marking filter: never taken for the upstream's answer.
        let unmarked = h(&[(":status", "504"), (UPSTREAM_MARK, "1")]);
        assert_eq!(
            classify_reentry(504, &unmarked, b"upstream request timeout"),
            ReentryOrigin::Unmarked
        );
        // The async client's own reply: the re-entry listener was never reached.
        let local = h(&[(":status", "503")]);
        assert_eq!(
            classify_reentry(503, &local, b"no healthy upstream"),
            ReentryOrigin::Marked(CalloutOrigin::NeverReached)
        );
    }

    #[test]
    fn the_mark_is_never_relayed() {
        let headers = h(&[
            (":status", "201"),
            (REENTRY_MARK, "via_upstream;1"),
            ("location", "/o/1"),
            (UPSTREAM_MARK, "3"),
        ]);
        let names: Vec<String> = idemgate_core::headers::relayed(headers.iter())
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["location"]);
    }

    #[test]
    fn tells_the_upstream_from_the_async_clients_own_replies() {
        let marked = h(&[(":status", "503"), (UPSTREAM_MARK, "3")]);
        let local = h(&[(":status", "503"), ("content-type", "text/plain")]);
        assert_eq!(
            classify_answer(503, &marked, b"no healthy upstream"),
            CalloutOrigin::Upstream
        );
        assert_eq!(
            classify_answer(503, &local, b"no healthy upstream"),
            CalloutOrigin::NeverReached
        );
        assert_eq!(
            classify_answer(
                503,
                &local,
                b"upstream connect error or disconnect/reset before headers. reset reason: connection failure, transport failure reason: delayed connect error: Connection refused"
            ),
            CalloutOrigin::NeverReached
        );
        assert_eq!(
            classify_answer(
                503,
                &local,
                b"upstream connect error or disconnect/reset before headers. reset reason: connection termination"
            ),
            CalloutOrigin::InDoubt(DoubtCause::UpstreamReset)
        );
        assert_eq!(
            classify_answer(504, &local, b"upstream request timeout"),
            CalloutOrigin::InDoubt(DoubtCause::UpstreamTimeout)
        );
        assert_eq!(
            classify_answer(200, &local, b"{}"),
            CalloutOrigin::InDoubt(DoubtCause::Other)
        );
    }
}
