//! HTTP callouts (`proxy_http_call`) as Envoy 1.40 with proxy-wasm-cpp-host runs them.
//!
//! Facts modelled here, from Envoy's `source/extensions/common/wasm/context.cc`, its HTTP async
//! client and proxy-wasm-cpp-host's `exports.cc` / `wasm.h`:
//! - the call runs on the **root context** (`contextOrEffectiveContext()->root_context()`): it
//!   outlives the stream that made it, and its answer comes to
//!   `proxy_on_http_call_response(root_context_id, token, headers, body_size, trailers)`;
//! - a negative timeout, a cluster Envoy does not know, or headers without `:path`, `:method` or
//!   `:authority` answer `BadArgument`; a request the async client fails inline (e.g. no healthy
//!   upstream) answers `InternalFailure` and its answer never comes; the token slot is written 0
//!   first and the token (0 on failure) after; tokens are per VM, 4, 8, 12, … (`kCalloutIncrement`);
//!   a timeout of 0 means none;
//! - the upstream's answer (`onSuccess`) is readable during the callback only: header map 6
//!   (`:status` first, then the upstream's headers, and `x-envoy-upstream-service-time`, which the
//!   async client's router adds), buffer 4, trailers map 7;
//! - Envoy's own answers come the same way, as answers: the route timeout fires → 504
//!   `upstream request timeout`; a reset or connection failure before the response started → 503
//!   `upstream connect error or disconnect/reset before headers. reset reason: …`
//!   (`content-length`, `content-type: text/plain`, no `x-envoy-upstream-service-time`);
//! - a reset after the response started (or a body over the async client's buffer limit) is a
//!   failure (`onFailure`): the callback gets 0 headers, 0 bytes, 0 trailers; header map 6 reads as
//!   empty, buffer 4 as `NotFound`, and `proxy_get_status` answers `BrokenConnection` / "reset"
//!   (the message is cleared after the callback, the code is not — as in Envoy);
//! - a callout is cancelled only with its VM (root contexts live as long as the plugin).
//!
//! A cluster is reached one of two ways ([`ClusterPath`]): directly — the async client sends the
//! callout to the app (the filter's `upstream.cluster_skipping_routes_and_filters`) — or through
//! the re-entry listener, whose inner pass routes it with Envoy's own routes and filters
//! (`upstream.reentry`, modelled in [`super::reentry`]).

use super::headers::HeaderMap;
use super::reentry::{self, InnerPass};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The request of one callout, as the cluster's upstream receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalloutRequest {
    /// The worker (VM) that dispatched it.
    pub worker: usize,
    pub token: u32,
    pub cluster: String,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub trailers: HeaderMap,
    /// 0: no timeout.
    pub timeout_ms: u32,
    pub sent_at_ms: u64,
    /// How many shared-data writes had happened when it was sent (orders it among the writes).
    pub writes_before: usize,
}

impl CalloutRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get_str(name)
    }

    pub fn method(&self) -> &str {
        self.header(":method").unwrap_or_default()
    }

    pub fn path(&self) -> &str {
        self.header(":path").unwrap_or_default()
    }

    /// The `idempotency-key` header as forwarded, if any.
    pub fn key(&self) -> Option<&str> {
        self.header("idempotency-key")
    }
}

/// An upstream's answer to a callout.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
    pub trailers: Vec<(String, Vec<u8>)>,
    /// The answer arrives this long after the request was sent.
    pub delay: Duration,
}

impl Answer {
    pub fn new(status: u16) -> Self {
        Answer {
            status,
            ..Answer::default()
        }
    }
}

/// What the upstream does with a callout (its model decides; the fault plan may override).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It acts and answers.
    Answer(Answer),
    /// It acts and resets the stream after the response started: a failure for the filter.
    ResetAfterHeaders,
    /// It receives the request (and may act) and resets before answering: Envoy answers 503.
    ResetBeforeResponse,
    /// It receives the request (and may act) and never answers: the callout's timeout fires and
    /// Envoy answers 504 (a callout without a timeout would hang; the harness answers 504 at once).
    Silent,
}

/// A cluster's upstream, as a model: given one callout, it acts (a stateful model — a store —
/// changes its state here) and says what it answers. Shared by every worker of a simulated Envoy,
/// and by several simulated Envoys if they register the same `Arc`.
pub trait Service: Send + Sync {
    fn serve(&self, request: &CalloutRequest) -> Outcome;

    /// True if serving changes state that other workers' callouts observe (a store): the
    /// interleaving explorer then makes the moment of serving one of its interleaving points.
    fn shared_state(&self) -> bool {
        false
    }
}

impl<F: Fn(&CalloutRequest) -> Outcome + Send + Sync> Service for F {
    fn serve(&self, request: &CalloutRequest) -> Outcome {
        self(request)
    }
}

/// A registered cluster.
pub type Cluster = Arc<dyn Service>;

/// How a cluster's callouts reach its app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterPath {
    /// The async client sends the callout to the app: no route, no filter after idemgate applies
    /// (what `upstream.cluster_skipping_routes_and_filters` names).
    Direct,
    /// The cluster's endpoint is the re-entry listener: the inner pass routes the callout with
    /// Envoy's routes and the filters after idemgate, and marks every answer
    /// ([`super::reentry`]).
    Reentry,
}

/// A cluster Envoy knows: the app behind it and the way there.
#[derive(Clone)]
pub struct Destination {
    pub service: Cluster,
    pub path: ClusterPath,
}

/// The clusters of one simulated Envoy, by name.
#[derive(Default, Clone)]
pub struct Clusters(pub BTreeMap<String, Destination>);

impl fmt::Debug for Clusters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

/// Failures injected into callouts through the world's fault plan (they override the model).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CalloutFault {
    /// `proxy_http_call` answers `InternalFailure` (the async client failed the request inline,
    /// e.g. no healthy upstream): no callback ever comes, the upstream never sees it.
    DispatchFails,
    /// The connection could not be made: Envoy answers 503; the upstream never saw the request.
    ConnectionFailure,
    /// The upstream received the request (and may have acted) but the timeout fired first: Envoy
    /// answers 504 once the callout's timeout has passed.
    Timeout,
    /// The upstream received the request (and may have acted) and reset before answering: Envoy
    /// answers 503.
    ResetBeforeResponse,
    /// The upstream acted, started answering and reset: a failure (0 headers).
    ResetAfterHeaders,
    /// The upstream answers this status without acting (e.g. 503 from an overloaded upstream).
    Status(u16),
    /// The upstream acts and answers this late (a timeout shorter than that fires first).
    Late(Duration),
    /// What the inner pass of a re-entry cluster does ([`super::reentry`]). On a direct cluster
    /// nothing of the inner pass exists: a local reply or a missing mark changes nothing (the app
    /// serves the request — the bypass the re-entry closes), the inner timeout is the callout's
    /// timeout, and a retried attempt is the one reset before the response (the async client does
    /// not retry).
    Inner(InnerPass),
}

/// What reaches `proxy_on_http_call_response`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// An answer (the upstream's or Envoy's own): headers with `:status` first.
    Response {
        headers: HeaderMap,
        body: Vec<u8>,
        trailers: HeaderMap,
    },
    /// `onFailure`: no headers, no body, status `BrokenConnection` / "reset".
    Failure,
}

impl Delivery {
    /// The status the filter reads, if any.
    pub fn status(&self) -> Option<u16> {
        match self {
            Delivery::Response { headers, .. } => {
                headers.get_str(":status").and_then(|s| s.parse().ok())
            }
            Delivery::Failure => None,
        }
    }

    /// An upstream answer as the async client hands it over.
    pub fn from_upstream(answer: &Answer) -> Delivery {
        let mut headers = HeaderMap::new();
        headers.add(":status", answer.status.to_string().as_bytes());
        for (name, value) in &answer.headers {
            headers.add(name, value);
        }
        if headers.get("content-length").is_none() && !answer.body.is_empty() {
            headers.add("content-length", answer.body.len().to_string().as_bytes());
        }
        headers.add("x-envoy-upstream-service-time", b"1");
        let mut trailers = HeaderMap::new();
        for (name, value) in &answer.trailers {
            trailers.add(name, value);
        }
        Delivery::Response {
            headers,
            body: answer.body.clone(),
            trailers,
        }
    }

    /// A reply Envoy makes itself (router local reply through the async client).
    pub fn envoy_reply(status: u16, body: &str) -> Delivery {
        let mut headers = HeaderMap::new();
        headers.add(":status", status.to_string().as_bytes());
        headers.add("content-length", body.len().to_string().as_bytes());
        headers.add("content-type", b"text/plain");
        Delivery::Response {
            headers,
            body: body.as_bytes().to_vec(),
            trailers: HeaderMap::new(),
        }
    }
}

/// Envoy's body for a callout whose timeout fired.
pub const TIMEOUT_BODY: &str = "upstream request timeout";
/// Envoy's body for a callout reset before the response started.
pub const RESET_BODY: &str =
    "upstream connect error or disconnect/reset before headers. reset reason: remote reset";
/// Envoy's body for a callout whose connection could not be made.
pub const CONNECT_BODY: &str =
    "upstream connect error or disconnect/reset before headers. reset reason: connection failure";

/// A callout on its way: dispatched, not yet answered.
#[derive(Debug, Clone)]
pub struct PendingCallout {
    pub request: CalloutRequest,
    /// The fault the plan attached when it was dispatched.
    pub fault: Option<CalloutFault>,
    /// The context whose callback dispatched it (the call itself belongs to the root context).
    pub from_context: u32,
}

impl PendingCallout {
    /// The callout has a timeout and it passed before `now_ms` — unless its fault answers at once
    /// (a connection failure, a status), which happened before the deadline.
    pub fn deadline_passed(&self, now_ms: u64) -> bool {
        let immediate = matches!(
            self.fault,
            Some(
                CalloutFault::ConnectionFailure
                    | CalloutFault::Status(_)
                    | CalloutFault::Inner(
                        InnerPass::LocalReply(_) | InnerPass::RetriedThenRefused { .. }
                    )
            )
        );
        let timeout = u64::from(self.request.timeout_ms);
        !immediate && timeout > 0 && now_ms > self.request.sent_at_ms.saturating_add(timeout)
    }
}

/// A callout that was answered (or failed), for the test and the invariants.
#[derive(Debug, Clone)]
pub struct CalloutRecord {
    pub request: CalloutRequest,
    /// The upstream received it and may have acted on it (an execution, for an origin upstream).
    pub reached: bool,
    pub delivery: Delivery,
    pub delivered_at_ms: u64,
    /// The HTTP context that dispatched it (if it was a stream) was already gone.
    pub stream_gone: bool,
    /// The delivery carries the app's own answer, not a reply Envoy made (on either pass).
    pub from_app: bool,
    /// The way the callout went.
    pub path: ClusterPath,
}

impl CalloutRecord {
    /// The re-entry mark on the delivery, if any.
    pub fn mark(&self) -> Option<&str> {
        match &self.delivery {
            Delivery::Response { headers, .. } => headers.get_str(reentry::MARK),
            Delivery::Failure => None,
        }
    }

    /// What the filter can tell from the delivery alone: the app answered. Direct: Envoy's router
    /// header, which its own replies lack. Re-entry: the mark says `via_upstream`
    /// (every inner answer has the router's header there).
    pub fn says_app_answered(&self) -> bool {
        match (&self.delivery, self.path) {
            (Delivery::Failure, _) => false,
            (Delivery::Response { headers, .. }, ClusterPath::Direct) => {
                headers.get(reentry::SERVICE_TIME).is_some()
            }
            (Delivery::Response { .. }, ClusterPath::Reentry) => self
                .mark()
                .is_some_and(|m| reentry::parse_mark(m).0 == "via_upstream"),
        }
    }
}

/// What the model and the fault plan together make of one callout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The app received the request and may have acted on it.
    pub reached: bool,
    /// How long after the request the delivery comes.
    pub delay: Duration,
    /// What the filter gets.
    pub delivery: Delivery,
    /// The delivery is the app's own answer.
    pub from_app: bool,
}

/// What a callout to `destination` becomes: on the direct path here, through the re-entry
/// listener in [`reentry::resolve`].
pub fn resolve(destination: Option<&Destination>, pending: &PendingCallout) -> Resolved {
    let service = destination.map(|d| &*d.service);
    match destination.map(|d| d.path) {
        Some(ClusterPath::Reentry) => reentry::resolve(service, pending),
        _ => resolve_direct(service, pending),
    }
}

/// The direct path: the async client's router sends the callout to the app.
fn resolve_direct(service: Option<&dyn Service>, pending: &PendingCallout) -> Resolved {
    let request = &pending.request;
    let timeout =
        (request.timeout_ms > 0).then(|| Duration::from_millis(request.timeout_ms.into()));
    let resolved = |reached, delay, delivery| Resolved {
        reached,
        delay,
        delivery,
        from_app: false,
    };
    let timed_out = || {
        resolved(
            true,
            timeout.unwrap_or_default(),
            Delivery::envoy_reply(504, TIMEOUT_BODY),
        )
    };
    let serve = || match service {
        Some(service) => service.serve(request),
        None => Outcome::Answer(Answer::new(503)),
    };
    let answered = |outcome: Outcome, extra: Duration| match outcome {
        Outcome::Answer(answer) => {
            let delay = answer.delay + extra;
            match timeout {
                Some(limit) if delay >= limit => timed_out(),
                _ => Resolved {
                    reached: true,
                    delay,
                    delivery: Delivery::from_upstream(&answer),
                    from_app: true,
                },
            }
        }
        Outcome::ResetAfterHeaders => resolved(true, extra, Delivery::Failure),
        Outcome::ResetBeforeResponse => {
            resolved(true, extra, Delivery::envoy_reply(503, RESET_BODY))
        }
        Outcome::Silent => timed_out(),
    };
    match pending.fault {
        None | Some(CalloutFault::Inner(InnerPass::LocalReply(_) | InnerPass::Unmarked)) => {
            answered(serve(), Duration::ZERO)
        }
        Some(CalloutFault::Late(by)) => answered(serve(), by),
        Some(CalloutFault::Timeout | CalloutFault::Inner(InnerPass::Timeout)) => {
            let _ = serve();
            timed_out()
        }
        Some(
            CalloutFault::ResetBeforeResponse
            | CalloutFault::Inner(InnerPass::RetriedThenRefused { .. }),
        ) => {
            let _ = serve();
            resolved(true, Duration::ZERO, Delivery::envoy_reply(503, RESET_BODY))
        }
        Some(CalloutFault::ResetAfterHeaders) => {
            let _ = serve();
            resolved(true, Duration::ZERO, Delivery::Failure)
        }
        Some(CalloutFault::ConnectionFailure) => resolved(
            false,
            Duration::ZERO,
            Delivery::envoy_reply(503, CONNECT_BODY),
        ),
        Some(CalloutFault::Status(status)) => {
            let answer = unavailable(status);
            Resolved {
                reached: false,
                delay: Duration::ZERO,
                delivery: Delivery::from_upstream(&answer),
                from_app: true,
            }
        }
        // Caught at dispatch; never pending.
        Some(CalloutFault::DispatchFails) => resolved(false, Duration::ZERO, Delivery::Failure),
    }
}

/// The app's answer under [`CalloutFault::Status`]: `status`, saying it is unavailable (it did
/// not act), on either way to the app.
pub(super) fn unavailable(status: u16) -> Answer {
    let mut answer = Answer::new(status);
    answer
        .headers
        .push(("content-type".into(), b"text/plain".to_vec()));
    answer.body = b"upstream unavailable".to_vec();
    answer
}

/// A callout as the unit tests of this module and of [`super::reentry`] resolve it: to `cluster`,
/// with `timeout_ms` and `fault`, an empty request.
#[cfg(test)]
pub(crate) fn test_callout(
    cluster: &str,
    timeout_ms: u32,
    fault: Option<CalloutFault>,
) -> PendingCallout {
    PendingCallout {
        request: CalloutRequest {
            worker: 0,
            token: 4,
            cluster: cluster.into(),
            headers: HeaderMap::new(),
            body: Vec::new(),
            trailers: HeaderMap::new(),
            timeout_ms,
            sent_at_ms: 0,
            writes_before: 0,
        },
        fault,
        from_context: 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(timeout_ms: u32, fault: Option<CalloutFault>) -> PendingCallout {
        test_callout("upstream", timeout_ms, fault)
    }

    fn created(request: &CalloutRequest) -> Outcome {
        let mut answer = Answer::new(201);
        answer.body = format!("{{\"token\":{}}}", request.token).into_bytes();
        answer.delay = Duration::from_millis(200);
        Outcome::Answer(answer)
    }

    fn direct(fault: Option<CalloutFault>, timeout_ms: u32) -> (bool, Duration, Delivery) {
        let destination = Destination {
            service: Arc::new(created),
            path: ClusterPath::Direct,
        };
        let r = resolve(Some(&destination), &pending(timeout_ms, fault));
        (r.reached, r.delay, r.delivery)
    }

    #[test]
    fn an_answer_comes_with_status_first_and_the_routers_header() {
        let (reached, after, delivery) = direct(None, 1000);
        assert!(reached);
        assert_eq!(after, Duration::from_millis(200));
        assert_eq!(delivery.status(), Some(201));
        let Delivery::Response { headers, body, .. } = delivery else {
            panic!("not an answer")
        };
        assert_eq!(headers.pairs()[0].0, ":status");
        assert_eq!(headers.get_str("content-length"), Some("11"));
        assert!(headers.get("x-envoy-upstream-service-time").is_some());
        assert_eq!(body, br#"{"token":4}"#);
    }

    #[test]
    fn a_late_answer_past_the_timeout_is_envoys_504_after_the_timeout() {
        let late = Some(CalloutFault::Late(Duration::from_secs(3)));
        let (reached, after, delivery) = direct(late, 1000);
        assert!(reached, "the upstream acted, only too slowly");
        assert_eq!(after, Duration::from_secs(1));
        assert_eq!(delivery, Delivery::envoy_reply(504, TIMEOUT_BODY));
        // No timeout (0): the late answer is an answer.
        let (_, after, delivery) = direct(late, 0);
        assert_eq!(after, Duration::from_millis(3200));
        assert_eq!(delivery.status(), Some(201));
    }

    #[test]
    fn failures_have_envoys_shapes() {
        let shape = |fault| direct(Some(fault), 1000);
        assert_eq!(shape(CalloutFault::ResetAfterHeaders).2, Delivery::Failure);
        let (reached, _, reply) = shape(CalloutFault::ConnectionFailure);
        assert!(!reached);
        assert_eq!(reply, Delivery::envoy_reply(503, CONNECT_BODY));
        let (reached, _, reply) = shape(CalloutFault::ResetBeforeResponse);
        assert!(
            reached,
            "a reset after the request went out leaves the outcome in doubt"
        );
        assert_eq!(reply.status(), Some(503));
        let (reached, _, reply) = shape(CalloutFault::Status(503));
        assert!(!reached);
        assert_eq!(reply.status(), Some(503));
    }

    #[test]
    fn the_direct_path_has_no_inner_pass() {
        use crate::envoy::reentry::InnerReply;
        // The filters after idemgate never see a direct callout: the app serves what RBAC denies.
        let (reached, _, served) = direct(
            Some(CalloutFault::Inner(InnerPass::LocalReply(
                InnerReply::RBAC_DENIED,
            ))),
            1000,
        );
        assert!(reached);
        assert_eq!(served.status(), Some(201));
        let (reached, _, reset) = direct(
            Some(CalloutFault::Inner(InnerPass::RetriedThenRefused {
                attempts: 3,
            })),
            1000,
        );
        assert!(reached);
        assert_eq!(reset, Delivery::envoy_reply(503, RESET_BODY));
    }
}
