//! The single place where a decision gets its HTTP meaning (`docs/semantics.md` §6): status,
//! headers and an RFC 9457 problem body for every answer the edge makes itself, and the replay of a
//! stored answer. Hosts send what they get here verbatim, so the Envoy filter and any other host
//! answer alike.

use crate::client::signature::SignatureError;
use crate::client::token::TokenError;
use crate::decision::admission::Refusal;
use crate::policy::ProblemStyle;
use crate::record::StoredResponse;
use crate::request::fingerprint::FingerprintError;
use crate::request::json;
use crate::request::key::KeyError;
use crate::request::key_source::SourceError;
use crate::store::protocol::ProtocolError;
use crate::time::Span;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

mod degraded;
pub mod order;
mod problem;
mod published;
mod replay;

pub use degraded::Degraded;
// For the configuration reader, which refuses to replay it.
#[cfg(feature = "config")]
pub(crate) use degraded::DEGRADED_HEADER;
use problem::problem;
pub(crate) use problem::SHOULD_RETRY_HEADER;
pub(crate) use published::published;

/// Marks a replayed answer (`docs/semantics.md` §4).
pub const REPLAYED_HEADER: &str = crate::headers::REPLAYED;

/// Whether a [`REPLAYED_HEADER`] value marks a replay, as a client reads it: the edge sends
/// `true`; the structured-field boolean `?1` (RFC 9651), which other servers use for the same
/// header, counts too. Case and surrounding spaces or tabs do not matter; anything else is not a
/// replay, since claiming one wrongly would tell the user an order was not placed again when
/// nothing says so.
#[must_use]
pub fn is_replayed(value: &str) -> bool {
    let value = crate::request::key::trim_ows(value.as_bytes());
    value.eq_ignore_ascii_case(b"true") || value == b"?1"
}
/// On a replay whose body was over the limit and not kept: the replay carries no body and no
/// header that would describe one (`Content-Type`, `ETag`, …); `Location` stays.
pub(crate) const BODY_OMITTED_HEADER: &str = "idempotent-body-omitted";

/// An answer the edge makes itself.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EdgeAnswer<'a> {
    InvalidKey(&'a KeyError),
    MissingKey {
        header: &'a str,
    },
    InvalidBody(&'a FingerprintError),
    BodyTooLarge {
        limit: u64,
    },
    Conflict {
        retry_after: Span,
    },
    Mismatch,
    /// A stored answer, replayed with only the headers today's allow-list names
    /// (`Policy::replay_headers`): an answer stored under an earlier, wider list (or planted in a
    /// store) cannot emit more.
    Replay {
        stored: &'a StoredResponse,
        replay_headers: &'a [String],
    },
    /// A detached exchange's answer whose body is over the relay bound (`upstream.max_body`):
    /// the client gets the upstream's own status — a success stays a success, never a 5xx the
    /// edge made — and its headers, less those that describe the body it does not carry, with
    /// `Idempotent-Body-Omitted: true`, as a retry's replay would. `headers` are those the host
    /// relays (end-to-end, none of the proxy's own).
    RelayWithoutBody {
        status: u16,
        headers: &'a [(String, String)],
    },
    StoreFull {
        retry_after: Span,
    },
    StoreFailed(&'a ProtocolError),
    /// The bodies being fingerprinted at this moment already use the whole `hashing_budget`, or
    /// this client's already use its part (`hashing_budget_per_peer`): the request is
    /// refused before it can exhaust the VM's memory.
    HashingBudgetExceeded,
    /// A detached exchange would have Envoy buffer more answers than the VM's `relay_budget`
    /// allows, or this client's exchanges already hold its part (`relay_budget_per_peer`): the
    /// request was not sent and its claim is released, so a retry runs.
    RelayBudgetExceeded,
    /// The client already holds its share of the store: its own records must expire
    /// first. Its own doing, so 429 and never the store's failure mode.
    QuotaExceeded {
        retry_after: Span,
    },
    /// No configured scope source identified the client (not even the peer address): guarding the
    /// request would put it in a namespace shared with other clients, so it is not guarded.
    ScopeUnavailable,
    /// The proxy could not read its clock: records' ages, leases and tokens' expiry cannot be
    /// judged, so nothing is claimed, used or verified (no guessing the epoch).
    ClockUnavailable,
    /// The proxy could not hand the filter the request's headers or a body chunk whole: its key
    /// and payload cannot be judged, so nothing is claimed and it is not forwarded unguarded
    /// (never read as a request without headers, never fingerprinted short).
    RequestUnreadable,
    Token(&'a TokenError),
    /// A token was asked for without a method and path (`?method=POST&path=/payments`) that a
    /// route requiring a token guards: tokens are bound to one route and method.
    TokenRouteUnknown,
    /// A detached exchange (the edge sent the claimed request itself) could not give the client
    /// the upstream's answer.
    Relay(RelayProblem),
    /// A route that requires a key found none; `sources` says where it looked.
    KeyNotFound {
        sources: &'a str,
    },
    /// A callback delivery without a valid provider signature.
    Signature(&'a SignatureError),
    /// The key's source could not be read: a body no body source can read, an
    /// incomplete CloudEvent (400), a CloudEvents batch (415).
    KeySource(&'a SourceError),
    /// A fresh one-time token from the issuing endpoint.
    TokenIssued {
        token: &'a str,
        expires_at_ms: u64,
        header: &'a str,
    },
}

/// Why a detached exchange has no upstream answer to relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RelayProblem {
    /// The request could not be sent (e.g. the configured cluster does not exist); the claim was
    /// released, so a retry is safe.
    NotSent,
    /// Sent, but no answer came back (reset, upstream timeout): the outcome is in doubt and the key
    /// stays in flight until its lease ends.
    NoAnswer { retry_after: Span },
}

/// Status, headers (lowercase names) and body, ready for the host to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpAnswer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpAnswer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Maps an edge answer to HTTP, its problems written in the default style (no `problems`
/// section).
pub fn answer(edge: &EdgeAnswer<'_>) -> HttpAnswer {
    styled(edge, &ProblemStyle::DEFAULT)
}

/// Maps an edge answer to HTTP as `policy`'s `problems` section writes problems: what hosts send.
pub fn answer_for(edge: &EdgeAnswer<'_>, policy: &crate::policy::Policy) -> HttpAnswer {
    styled(edge, &policy.problems)
}

/// Maps an edge answer to HTTP, its problems written in `style`.
pub(crate) fn styled(edge: &EdgeAnswer<'_>, style: &ProblemStyle) -> HttpAnswer {
    match edge {
        EdgeAnswer::Replay {
            stored,
            replay_headers,
        } => replay::replay(stored, replay_headers),
        EdgeAnswer::RelayWithoutBody { status, headers } => {
            replay::without_body(*status, headers)
        }
        EdgeAnswer::TokenIssued {
            token,
            expires_at_ms,
            header,
        } => HttpAnswer {
            status: 200,
            headers: alloc::vec![
                ("content-type".into(), "application/json".into()),
                ("cache-control".into(), "no-store".into()),
            ],
            body: format!(
                "{{\"token\":{},\"header\":{},\"expires_at_ms\":{}}}",
                json_string(token),
                json_string(header),
                expires_at_ms
            )
            .into_bytes(),
        },
        EdgeAnswer::InvalidKey(e) => problem(style, 400, e.code(), "Invalid Idempotency-Key", &e.to_string(), None),
        EdgeAnswer::MissingKey { header } => problem(
            style,
            400,
            "key_missing",
            "Idempotency-Key required",
            &format!("this endpoint requires an {header} header; send a unique key per operation and reuse it for retries"),
            None,
        ),
        EdgeAnswer::InvalidBody(e) if e.is_internal() => problem(
            style,
            500,
            e.code(),
            "Internal error",
            "idemgate could not fingerprint this body because of an internal error; please report it",
            None,
        ),
        EdgeAnswer::InvalidBody(e) => problem(style, 400, e.code(), "Invalid request body", &e.to_string(), None),
        EdgeAnswer::BodyTooLarge { limit } => problem(
            style,
            413,
            "body_too_large",
            "Request body too large",
            &format!("idempotent requests on this route may carry at most {limit} bytes"),
            None,
        ),
        EdgeAnswer::Conflict { retry_after } => problem(
            style,
            409,
            "request_in_flight",
            "Request in progress",
            "a request with this Idempotency-Key is still being processed; retry after the indicated time",
            Some(*retry_after),
        ),
        EdgeAnswer::Mismatch => problem(
            style,
            422,
            "key_reused",
            "Idempotency-Key reused",
            "this Idempotency-Key was already used for a request with a different payload; use a new key for a new operation",
            None,
        ),
        EdgeAnswer::StoreFull { retry_after } => problem(
            style,
            503,
            "store_full",
            "Idempotency store full",
            "the idempotency store has no room for another request right now; retry later",
            Some(*retry_after),
        ),
        EdgeAnswer::QuotaExceeded { retry_after } => problem(
            style,
            429,
            "scope_quota_exceeded",
            "Idempotency quota exceeded",
            "this client holds its whole share of the idempotency store; retry when its earlier keys have expired (Retry-After)",
            Some(*retry_after),
        ),
        EdgeAnswer::HashingBudgetExceeded => problem(
            style,
            503,
            "hashing_budget_exceeded",
            "Too many request bodies in progress",
            "the edge is fingerprinting as many request bodies as its memory budget allows; retry shortly",
            Some(Span::from_secs(1)),
        ),
        EdgeAnswer::RelayBudgetExceeded => problem(
            style,
            503,
            "relay_budget_exceeded",
            "Too many answers in transit",
            "the edge is waiting for as many upstream answers as its memory budget allows; the request was not forwarded, retry shortly",
            Some(Span::from_secs(1)),
        ),
        EdgeAnswer::StoreFailed(e @ ProtocolError::Tampered(_)) => problem(
            style,
            502,
            e.code(),
            "Stored answer failed its integrity check",
            "an answer is stored under this Idempotency-Key, but it failed its integrity check, so it is not replayed; the request may already have been executed, so it is not executed again either. Ask the operator to remove the record, or use a new key only if you know the operation did not happen",
            None,
        ),
        EdgeAnswer::StoreFailed(e) => problem(
            style,
            503,
            e.code(),
            "Idempotency store unavailable",
            "the idempotency store could not be reached; retry later",
            Some(Span::from_secs(1)),
        ),
        EdgeAnswer::ScopeUnavailable => problem(
            style,
            503,
            "scope_unavailable",
            "Client identity unavailable",
            "the request carries none of the configured identity sources, so its key cannot be scoped to one client; retry later",
            Some(Span::from_secs(1)),
        ),
        EdgeAnswer::ClockUnavailable => problem(
            style,
            503,
            "clock_unavailable",
            "Proxy clock unavailable",
            "the proxy could not read its clock, so the request's key cannot be judged; retry later",
            Some(Span::from_secs(1)),
        ),
        EdgeAnswer::RequestUnreadable => problem(
            style,
            503,
            "request_unreadable",
            "Request unreadable",
            "the proxy could not read the whole request, so its key and payload cannot be judged; retry later",
            Some(Span::from_secs(1)),
        ),
        EdgeAnswer::KeyNotFound { sources } => problem(
            style,
            400,
            "key_missing",
            "Idempotency key required",
            &format!("this endpoint requires an idempotency key in {sources}"),
            None,
        ),
        EdgeAnswer::Signature(e) => problem(style, 403, e.code(), "Delivery signature rejected", &e.to_string(), None),
        EdgeAnswer::KeySource(SourceError::Key(e)) => styled(&EdgeAnswer::InvalidKey(e), style),
        EdgeAnswer::KeySource(e @ SourceError::CloudEventsBatch) => {
            problem(style, 415, e.code(), "CloudEvents batch not accepted", &e.to_string(), None)
        }
        EdgeAnswer::KeySource(e) => problem(style, 400, e.code(), "Idempotency key unreadable", &e.to_string(), None),
        EdgeAnswer::TokenRouteUnknown => problem(
            style,
            400,
            "token_route_unknown",
            "No token route",
            "ask for a token with the method and path of the request it is for (`?method=POST&path=/payments`); that request must be guarded by a route that requires a token",
            None,
        ),
        EdgeAnswer::Relay(RelayProblem::NotSent) => problem(
            style,
            503,
            "upstream_not_sent",
            "Upstream unavailable",
            "the request could not be sent to the upstream; it was not executed, so a retry with the same Idempotency-Key is safe",
            Some(Span::from_secs(1)),
        ),
        EdgeAnswer::Relay(RelayProblem::NoAnswer { retry_after }) => problem(
            style,
            504,
            "upstream_no_answer",
            "No answer from the upstream",
            "the request was sent but no answer came back, so it may have been executed; retries with the same Idempotency-Key get 409 until the key's lease ends",
            Some(*retry_after),
        ),
        EdgeAnswer::Token(e) => {
            let status = if e.code() == "token_used" { 409 } else { 403 };
            problem(style, status, e.code(), "One-time token rejected", &e.to_string(), None)
        }
    }
}

/// `text` as a JSON string literal ([`json::write_string`]).
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    json::write_string(&mut out, text);
    out
}

/// Appends `first` followed by `second` as one JSON string literal (the one JSON string writer,
/// [`json::write_escaped`]).
fn push_json_string(out: &mut String, first: &str, second: &str) {
    out.push('"');
    // Writing into a `String` cannot fail.
    let _ = json::write_escaped(out, first);
    let _ = json::write_escaped(out, second);
    out.push('"');
}

/// An HTTP answer's `:status` as a host reads it: exactly three digits, 100 to 999 (RFC 9110
/// §15). `None` for anything else — a host must not invent a status: an answer whose
/// status cannot be read is in doubt, never stored or replayed as "status 0".
pub(crate) fn parse_status(value: &[u8]) -> Option<u16> {
    match value {
        [a @ b'1'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
            let digit = |d: &u8| u16::from(d - b'0');
            Some(digit(a) * 100 + digit(b) * 10 + digit(c))
        }
        _ => None,
    }
}

/// The answer to a request refused before its claim ([`Refusal`]).
pub(crate) fn refusal(refusal: &Refusal, style: &ProblemStyle) -> HttpAnswer {
    let edge = match refusal {
        Refusal::InvalidKey(e) => EdgeAnswer::InvalidKey(e),
        Refusal::MissingKey { sources } => EdgeAnswer::KeyNotFound { sources },
        Refusal::Signature(e) => EdgeAnswer::Signature(e),
        Refusal::Source(e) => EdgeAnswer::KeySource(e),
        Refusal::KeyFormat { expected } => {
            return problem::problem(
                style,
                400,
                refusal.code(),
                "Invalid Idempotency-Key",
                &format!("this endpoint takes as its idempotency key {expected}"),
                None,
            )
        }
    };
    styled(&edge, style)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_status_is_three_digits_or_nothing() {
        assert_eq!(parse_status(b"201"), Some(201));
        assert_eq!(parse_status(b"999"), Some(999));
        for bad in [
            &b"0"[..],
            b"",
            b"20",
            b"2010",
            b"099",
            b" 200",
            b"20x",
            b"-20",
        ] {
            assert_eq!(parse_status(bad), None, "{bad:?}");
        }
    }

    use super::*;

    #[test]
    fn replay_marks() {
        for yes in ["true", "TRUE", " True\t", "?1"] {
            assert!(is_replayed(yes), "{yes:?}");
        }
        for no in ["", "false", "?0", "1", "yes", "true, true", "?1 ;x"] {
            assert!(!is_replayed(no), "{no:?}");
        }
    }

    fn body(edge: &EdgeAnswer<'_>) -> serde_json::Value {
        serde_json::from_slice(&answer(edge).body).unwrap()
    }

    #[test]
    fn json_strings_escape_quotes_backslashes_and_control_characters() {
        assert_eq!(json_string(""), r#""""#);
        assert_eq!(json_string("plain é ✓"), "\"plain é ✓\"");
        assert_eq!(
            json_string("a\"b\\c\nd\re\tf\u{1}g\u{1f}h\u{7f}"),
            r#""a\"b\\c\nd\re\tf\u0001g\u001fh"#.to_string() + "\u{7f}\""
        );
        let mut out = String::new();
        push_json_string(&mut out, "urn:\"", "x\n");
        assert_eq!(out, r#""urn:\"x\n""#);
        for n in [0u16, 7, 10, 409, 65535] {
            let mut out = String::new();
            let _ = crate::text::Text::put_u64(&mut out, u64::from(n));
            assert_eq!(out, n.to_string());
        }
    }

    #[test]
    fn a_broken_reader_invariant_is_our_fault_not_the_clients() {
        // The hasher refuses to hash wrong bytes when one of its own invariants breaks
        // (`JsonError::Internal`): that is a defect of idemgate, so the client gets a 500 it may
        // report, never a 400 telling it to change a body that was fine.
        let internal = FingerprintError::Json(crate::request::json::JsonError::Internal);
        let http = answer(&EdgeAnswer::InvalidBody(&internal));
        assert_eq!(http.status, 500);
        assert_eq!(body(&EdgeAnswer::InvalidBody(&internal))["status"], 500);
        let client = FingerprintError::Json(crate::request::json::JsonError::DuplicateKey {
            offset: 3,
            key: None,
        });
        assert_eq!(answer(&EdgeAnswer::InvalidBody(&client)).status, 400);
    }

    #[test]
    fn problems_carry_an_error_member_for_stripe_style_clients() {
        let mismatch = body(&EdgeAnswer::Mismatch);
        assert_eq!(mismatch["type"], "urn:idemgate:problem:key_reused");
        assert_eq!(mismatch["status"], 422);
        assert_eq!(mismatch["error"]["type"], "idempotency_error");
        assert_eq!(mismatch["error"]["code"], "key_reused");
        assert_eq!(mismatch["error"]["message"], mismatch["detail"]);
        let signature = body(&EdgeAnswer::Signature(&SignatureError::Mismatch));
        assert_eq!(signature["status"], 403);
        assert_eq!(signature["error"]["type"], "invalid_request_error");
        let full = body(&EdgeAnswer::StoreFull {
            retry_after: Span::from_secs(1),
        });
        assert_eq!(full["error"]["type"], "api_error");
        let missing = body(&EdgeAnswer::KeyNotFound {
            sources: "the x-github-delivery header",
        });
        assert_eq!(missing["code"], "key_missing");
        assert_eq!(missing["error"]["type"], "idempotency_error");
    }

    #[test]
    fn a_replay_sends_only_the_headers_the_policy_replays_today() {
        // Stored under a wider allow-list, or planted: a header outside today's list is dropped.
        let stored = StoredResponse {
            status: 201,
            headers: alloc::vec![
                ("content-type".into(), "application/json".into()),
                ("access-control-allow-origin".into(), "*".into()),
                ("x-custom".into(), "1".into()),
            ],
            body: crate::record::StoredBody::Kept(b"{}".to_vec()),
            seal: None,
        };
        let policy = crate::policy::Policy::defaults();
        let http = answer(&EdgeAnswer::Replay {
            stored: &stored,
            replay_headers: &policy.replay_headers,
        });
        assert_eq!(http.status, 201);
        assert_eq!(http.header("content-type"), Some("application/json"));
        assert_eq!(http.header("access-control-allow-origin"), None);
        assert_eq!(http.header("x-custom"), None);
        assert_eq!(http.header(REPLAYED_HEADER), Some("true"));
        assert_eq!(http.body, b"{}");
        let mut wider = policy.replay_headers.clone();
        wider.push("x-custom".into());
        let http = answer(&EdgeAnswer::Replay {
            stored: &stored,
            replay_headers: &wider,
        });
        assert_eq!(http.header("x-custom"), Some("1"));
    }

    #[test]
    fn a_tampered_record_is_a_502_that_says_the_request_may_have_run() {
        let e = ProtocolError::Tampered(crate::record::seal::SealError::Mismatch);
        let http = answer(&EdgeAnswer::StoreFailed(&e));
        assert_eq!(http.status, 502);
        assert_eq!(http.header("retry-after"), None);
        let problem = body(&EdgeAnswer::StoreFailed(&e));
        assert_eq!(problem["type"], "urn:idemgate:problem:record_corrupt");
        assert!(problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("may already have been executed")));
        assert!(!e.allows_failure_mode());
        let unavailable =
            ProtocolError::Store(crate::store::StoreError::Unavailable("down".into()));
        assert!(unavailable.allows_failure_mode());
        assert_eq!(answer(&EdgeAnswer::StoreFailed(&unavailable)).status, 503);
    }
}
