//! A callout that re-enters Envoy: the filter's `upstream.reentry` cluster has one
//! endpoint, the internal listener `idemgate_reentry`, whose connection manager carries the same
//! route configuration and the filters that follow idemgate. The request is routed, rewritten,
//! authorised and rate-limited there as the same request without a key, and the inner router sends
//! it to the app — with the route's timeout and retry policy.
//!
//! Facts modelled here (Envoy 1.40, measured with the shipped configuration):
//! - the inner pass's first filter (header_mutation) sets [`MARK`] on **every** answer of the inner
//!   pass, the app's and the replies Envoy makes itself:
//!   `%RESPONSE_CODE_DETAILS%;%UPSTREAM_REQUEST_ATTEMPT_COUNT%` — `via_upstream;1` for the app's
//!   answer (an app-sent mark is overwritten), `direct_response;0`,
//!   `rbac_access_denied_matched_policy[evil];0`, `response_timeout;1`,
//!   `upstream_reset_before_response_started{remote_connection_failure|…};3` after route retries;
//! - every answer of the inner pass, marked or not, carries `x-envoy-upstream-service-time`: the
//!   outer async client's router adds it to whatever its upstream (the internal listener) answered,
//!   so that header no longer tells the app's answer from Envoy's own;
//! - a reset after the app's response started reaches the outer async client as a failure
//!   (`onFailure`), as on the direct path; the outer callout's own timeout still fires as Envoy's
//!   unmarked 504 (without `x-envoy-upstream-service-time`), with the app reached.
//!
//! How the fault plan's [`CalloutFault`]s play on a re-entry cluster (each describes what the app
//! or the inner pass does; on a direct cluster see [`super::callouts::resolve`]):
//! - `ConnectionFailure`: the inner router cannot connect to the app: 503 marked
//!   `upstream_reset_before_response_started{remote_connection_failure|…};1`, app never reached;
//! - `ResetBeforeResponse`: the app resets before answering: 503 marked `…{remote_reset};1`;
//! - `Status(s)`: the app answers `s` without acting (marked `via_upstream;1`);
//! - `Timeout`, and `Late` past the outer timeout: the outer callout's timeout (unmarked 504);
//! - `ResetAfterHeaders`, `DispatchFails`: as on the direct path;
//! - `Inner(InnerPass::…)`: an inner filter or route answers itself, the inner route timeout
//!   fires, the inner route retried a reset attempt, or the listener does not mark its answers.

use super::callouts::{
    Answer, CalloutFault, Delivery, Outcome, PendingCallout, Resolved, Service, TIMEOUT_BODY,
};
use super::headers::HeaderMap;
use std::time::Duration;

/// The header the re-entry listener's header_mutation filter sets on every inner answer.
pub const MARK: &str = "x-idemgate-reentry";

/// The header Envoy's router adds to every answer from its upstream. On the direct path it tells
/// the app's answer from the async client's own replies; on re-entry every inner answer has it.
pub const SERVICE_TIME: &str = "x-envoy-upstream-service-time";

/// The cluster name the shipped configurations give the re-entry cluster.
pub const REENTRY_CLUSTER: &str = "idemgate_reentry";

/// A reply an inner filter or the route makes itself: the app never sees the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InnerReply {
    pub status: u16,
    /// `response.code_details` of the inner pass (what the mark carries).
    pub details: &'static str,
    pub body: &'static str,
}

impl InnerReply {
    /// A `direct_response` route (`/internal/` → 404).
    pub const DIRECT_RESPONSE: InnerReply = InnerReply {
        status: 404,
        details: "direct_response",
        body: "not here",
    };
    /// An RBAC filter after idemgate denies the request (policy `evil`).
    pub const RBAC_DENIED: InnerReply = InnerReply {
        status: 403,
        details: "rbac_access_denied_matched_policy[evil]",
        body: "RBAC: access denied",
    };
    /// `local_ratelimit` after idemgate: its 429.
    pub const LOCAL_RATE_LIMITED: InnerReply = InnerReply {
        status: 429,
        details: "local_rate_limited",
        body: "local_rate_limited",
    };
    /// `ext_authz` after idemgate denies the request.
    pub const EXT_AUTHZ_DENIED: InnerReply = InnerReply {
        status: 403,
        details: "ext_authz_denied",
        body: "",
    };
}

/// What the inner pass does with a re-entered callout (a [`CalloutFault::Inner`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InnerPass {
    /// An inner filter or the route answers itself (direct response, RBAC, rate limit, ext_authz
    /// deny): never reached, 0 attempts.
    LocalReply(InnerReply),
    /// The inner route's timeout fires after the app received the request: 504 marked
    /// `response_timeout;1` (in doubt).
    Timeout,
    /// The route's retry policy: the first attempt reached the app (it acted) and was reset, every
    /// later one could not connect; `attempts` in all (2 or more). The mark's details are the last
    /// attempt's — a connection failure — with that count: in doubt, never "never reached".
    RetriedThenRefused { attempts: u32 },
    /// The listener lacks the header_mutation filter: the answers come without the mark (still
    /// with `x-envoy-upstream-service-time`). A misconfiguration: in doubt, never stored or released.
    Unmarked,
}

/// Details of a connection the inner router could not make (Envoy 1.40 spelling).
pub const REFUSED_DETAILS: &str =
    "upstream_reset_before_response_started{remote_connection_failure|delayed_connect_error:_Connection_refused}";
/// Details of an app that reset before answering.
pub const RESET_DETAILS: &str = "upstream_reset_before_response_started{remote_reset}";
/// The inner router's body for a connection it could not make.
pub const REFUSED_BODY: &str = "upstream connect error or disconnect/reset before headers. reset reason: remote connection failure, transport failure reason: delayed connect error: Connection refused";
/// The inner router's body after retries, the last of which could not connect.
pub const RETRIED_REFUSED_BODY: &str = "upstream connect error or disconnect/reset before headers. retried and the latest reset reason: remote connection failure, transport failure reason: delayed connect error: Connection refused";
/// The inner router's body for an app that reset before answering.
pub const RESET_BODY: &str =
    "upstream connect error or disconnect/reset before headers. reset reason: remote reset";

/// The inner route's timeout when the callout has none (Envoy's default route timeout).
const DEFAULT_ROUTE_TIMEOUT: Duration = Duration::from_secs(15);

/// The mark's value: `details;attempts`.
pub fn mark_value(details: &str, attempts: u32) -> String {
    format!("{details};{attempts}")
}

/// Splits a mark into its details and attempt count (`None`: not a number).
pub fn parse_mark(value: &str) -> (&str, Option<u64>) {
    match value.rsplit_once(';') {
        Some((details, attempts)) => (details, attempts.parse().ok()),
        None => (value, None),
    }
}

/// The inner pass marks an answer: any mark the app sent is overwritten
/// (`OVERWRITE_IF_EXISTS_OR_ADD`); then the outer router adds its header.
fn marked(mut headers: HeaderMap, details: &str, attempts: u32) -> HeaderMap {
    headers.remove(MARK);
    headers.add(MARK, mark_value(details, attempts).as_bytes());
    if headers.get(SERVICE_TIME).is_none() {
        headers.add(SERVICE_TIME, b"1");
    }
    headers
}

/// The app's answer as it comes back through the inner pass.
fn app_answer(answer: &Answer) -> Delivery {
    match Delivery::from_upstream(answer) {
        Delivery::Response {
            headers,
            body,
            trailers,
        } => Delivery::Response {
            headers: marked(headers, "via_upstream", 1),
            body,
            trailers,
        },
        Delivery::Failure => Delivery::Failure,
    }
}

/// A reply the inner pass made itself, as the outer async client hands it over.
fn inner_reply(status: u16, body: &str, details: &str, attempts: u32) -> Delivery {
    match Delivery::envoy_reply(status, body) {
        Delivery::Response {
            headers,
            body,
            trailers,
        } => Delivery::Response {
            headers: marked(headers, details, attempts),
            body,
            trailers,
        },
        Delivery::Failure => Delivery::Failure,
    }
}

/// What a re-entered callout becomes (see the module's table).
pub fn resolve(app: Option<&dyn Service>, pending: &PendingCallout) -> Resolved {
    let request = &pending.request;
    let timeout =
        (request.timeout_ms > 0).then(|| Duration::from_millis(request.timeout_ms.into()));
    let serve = || match app {
        Some(app) => app.serve(request),
        None => Outcome::Answer(Answer::new(503)),
    };
    let outer_timeout = || Resolved {
        reached: true,
        delay: timeout.unwrap_or_default(),
        delivery: Delivery::envoy_reply(504, TIMEOUT_BODY),
        from_app: false,
    };
    let reply = |reached, delay, status, body: &str, details: &str, attempts| Resolved {
        reached,
        delay,
        delivery: inner_reply(status, body, details, attempts),
        from_app: false,
    };
    let answered = |outcome: Outcome, extra: Duration| match outcome {
        Outcome::Answer(answer) => {
            let delay = answer.delay + extra;
            match timeout {
                Some(limit) if delay >= limit => outer_timeout(),
                _ => Resolved {
                    reached: true,
                    delay,
                    delivery: app_answer(&answer),
                    from_app: true,
                },
            }
        }
        Outcome::ResetAfterHeaders => Resolved {
            reached: true,
            delay: extra,
            delivery: Delivery::Failure,
            from_app: false,
        },
        Outcome::ResetBeforeResponse => reply(true, extra, 503, RESET_BODY, RESET_DETAILS, 1),
        Outcome::Silent => outer_timeout(),
    };
    match pending.fault {
        None => answered(serve(), Duration::ZERO),
        Some(CalloutFault::Late(by)) => answered(serve(), by),
        Some(CalloutFault::Timeout) => {
            let _ = serve();
            outer_timeout()
        }
        Some(CalloutFault::ResetBeforeResponse) => {
            let _ = serve();
            answered(Outcome::ResetBeforeResponse, Duration::ZERO)
        }
        Some(CalloutFault::ResetAfterHeaders) => {
            let _ = serve();
            answered(Outcome::ResetAfterHeaders, Duration::ZERO)
        }
        Some(CalloutFault::ConnectionFailure) => {
            reply(false, Duration::ZERO, 503, REFUSED_BODY, REFUSED_DETAILS, 1)
        }
        Some(CalloutFault::Status(status)) => {
            let answer = super::callouts::unavailable(status);
            Resolved {
                reached: false,
                delay: Duration::ZERO,
                delivery: app_answer(&answer),
                from_app: true,
            }
        }
        Some(CalloutFault::Inner(InnerPass::LocalReply(local))) => reply(
            false,
            Duration::ZERO,
            local.status,
            local.body,
            local.details,
            0,
        ),
        Some(CalloutFault::Inner(InnerPass::Timeout)) => {
            let _ = serve();
            let delay = timeout.unwrap_or(DEFAULT_ROUTE_TIMEOUT);
            reply(true, delay, 504, TIMEOUT_BODY, "response_timeout", 1)
        }
        Some(CalloutFault::Inner(InnerPass::RetriedThenRefused { attempts })) => {
            // The first attempt: the app acts, then the connection is reset; the retries find
            // the app's port closed.
            let _ = serve();
            reply(
                true,
                Duration::ZERO,
                503,
                RETRIED_REFUSED_BODY,
                REFUSED_DETAILS,
                attempts.max(2),
            )
        }
        Some(CalloutFault::Inner(InnerPass::Unmarked)) => {
            let mut resolved = answered(serve(), Duration::ZERO);
            if let Delivery::Response { headers, .. } = &mut resolved.delivery {
                headers.remove(MARK);
            }
            resolved
        }
        // Caught at dispatch; never pending.
        Some(CalloutFault::DispatchFails) => Resolved {
            reached: false,
            delay: Duration::ZERO,
            delivery: Delivery::Failure,
            from_app: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envoy::callouts::CalloutRequest;

    fn pending(fault: Option<CalloutFault>) -> PendingCallout {
        crate::envoy::callouts::test_callout(REENTRY_CLUSTER, 1000, fault)
    }

    fn created(_: &CalloutRequest) -> Outcome {
        let mut answer = Answer::new(201);
        answer.body = br#"{"id":1}"#.to_vec();
        // An app that tries to pass its answer off as Envoy's own.
        answer
            .headers
            .push((MARK.into(), b"direct_response;0".to_vec()));
        Outcome::Answer(answer)
    }

    fn mark(resolved: &Resolved) -> Option<String> {
        match &resolved.delivery {
            Delivery::Response { headers, .. } => headers.get_str(MARK).map(str::to_string),
            Delivery::Failure => None,
        }
    }

    fn timed(resolved: &Resolved) -> bool {
        match &resolved.delivery {
            Delivery::Response { headers, .. } => headers.get(SERVICE_TIME).is_some(),
            Delivery::Failure => false,
        }
    }

    #[test]
    fn the_apps_answer_is_marked_and_an_app_sent_mark_is_overwritten() {
        let resolved = resolve(Some(&created), &pending(None));
        assert!(resolved.reached && resolved.from_app);
        assert_eq!(mark(&resolved).as_deref(), Some("via_upstream;1"));
        assert!(timed(&resolved));
        let Delivery::Response { headers, .. } = &resolved.delivery else {
            panic!("not an answer")
        };
        assert_eq!(headers.pairs().iter().filter(|(n, _)| n == MARK).count(), 1);
    }

    #[test]
    fn the_inner_passs_own_replies_are_marked_and_timed_too() {
        let cases = [
            (
                CalloutFault::Inner(InnerPass::LocalReply(InnerReply::RBAC_DENIED)),
                false,
                403,
                "rbac_access_denied_matched_policy[evil];0",
            ),
            (
                CalloutFault::Inner(InnerPass::LocalReply(InnerReply::DIRECT_RESPONSE)),
                false,
                404,
                "direct_response;0",
            ),
            (
                CalloutFault::Inner(InnerPass::Timeout),
                true,
                504,
                "response_timeout;1",
            ),
            (
                CalloutFault::Inner(InnerPass::RetriedThenRefused { attempts: 3 }),
                true,
                503,
                "upstream_reset_before_response_started{remote_connection_failure|delayed_connect_error:_Connection_refused};3",
            ),
            (
                CalloutFault::ConnectionFailure,
                false,
                503,
                "upstream_reset_before_response_started{remote_connection_failure|delayed_connect_error:_Connection_refused};1",
            ),
            (
                CalloutFault::ResetBeforeResponse,
                true,
                503,
                "upstream_reset_before_response_started{remote_reset};1",
            ),
        ];
        for (fault, reached, status, expected) in cases {
            let resolved = resolve(Some(&created), &pending(Some(fault)));
            assert_eq!(resolved.reached, reached, "{fault:?}");
            assert!(!resolved.from_app, "{fault:?}");
            assert_eq!(resolved.delivery.status(), Some(status), "{fault:?}");
            assert_eq!(mark(&resolved).as_deref(), Some(expected), "{fault:?}");
            assert!(timed(&resolved), "{fault:?}");
        }
    }

    #[test]
    fn the_outer_timeout_and_a_misconfigured_listener_come_unmarked() {
        let outer = resolve(Some(&created), &pending(Some(CalloutFault::Timeout)));
        assert!(outer.reached && !outer.from_app);
        assert_eq!(outer.delivery.status(), Some(504));
        assert_eq!((mark(&outer), timed(&outer)), (None, false));
        let late = resolve(
            Some(&created),
            &pending(Some(CalloutFault::Late(Duration::from_secs(2)))),
        );
        assert_eq!((late.delivery.status(), mark(&late)), (Some(504), None));
        let unmarked = resolve(
            Some(&created),
            &pending(Some(CalloutFault::Inner(InnerPass::Unmarked))),
        );
        assert!(unmarked.reached && unmarked.from_app);
        assert_eq!(unmarked.delivery.status(), Some(201));
        assert_eq!((mark(&unmarked), timed(&unmarked)), (None, true));
        let reset = resolve(
            Some(&created),
            &pending(Some(CalloutFault::ResetAfterHeaders)),
        );
        assert_eq!(reset.delivery, Delivery::Failure);
    }

    #[test]
    fn marks_parse_as_the_filter_reads_them() {
        assert_eq!(parse_mark("via_upstream;1"), ("via_upstream", Some(1)));
        assert_eq!(
            parse_mark(&mark_value(REFUSED_DETAILS, 3)),
            (REFUSED_DETAILS, Some(3))
        );
        assert_eq!(parse_mark("direct_response;-"), ("direct_response", None));
    }
}
