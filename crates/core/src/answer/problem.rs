//! An RFC 9457 problem answer, written once in the policy's [`ProblemStyle`]: its `type` under
//! the configured base, the `error` member Stripe-style SDKs read, `Retry-After`, Stripe's
//! `Stripe-Should-Retry` and, when documentation is configured, `Link: <…>; rel="describedby"`.

use super::{push_json_string, HttpAnswer};
use crate::policy::ProblemStyle;
use crate::text::Text;
use crate::time::Span;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// Stripe's advice to its SDKs whether a retry can help (`docs/semantics.md` §6): `false` on a
/// replay and a final refusal, `true` where the answer says when to retry (`Retry-After`). The
/// Stripe SDKs otherwise retry a replayed 5xx, which only replays it again; a client of the IETF
/// draft ignores the header.
pub(crate) const SHOULD_RETRY_HEADER: &str = "stripe-should-retry";

/// The problem answer with `status` and idemgate's `code`, written in `style`.
pub(super) fn problem(
    style: &ProblemStyle,
    status: u16,
    code: &str,
    title: &str,
    detail: &str,
    retry_after: Option<Span>,
) -> HttpAnswer {
    // Sized for the most a problem carries, so no header moves the others.
    let mut headers = Vec::with_capacity(5);
    headers.push((
        "content-type".to_string(),
        "application/problem+json".to_string(),
    ));
    headers.push(("cache-control".to_string(), "no-store".to_string()));
    if let Some(span) = retry_after {
        // Without `core::fmt`, like the body below.
        let mut secs = String::new();
        let _ = secs.put_u64(span.retry_after_secs());
        headers.push(("retry-after".into(), secs));
    }
    // A retry helps exactly where the answer says when to make it; every other problem is final
    // for this request (a changed request needs a new key, or the operator).
    let should_retry = if retry_after.is_some() {
        "true"
    } else {
        "false"
    };
    headers.push((SHOULD_RETRY_HEADER.into(), should_retry.into()));
    if let Some(docs) = style.describedby() {
        headers.push((
            "link".into(),
            ["<", docs, ">; rel=\"describedby\""].concat(),
        ));
    }
    // The `error` extension member repeats the problem in the shape Stripe-style SDKs read
    // (`{"error": {"type", "code", "message"}}`): they treat a JSON answer without it as a
    // success, whatever its status, so without it a 422 would reach the caller as an object.
    // Its `type` is Stripe's for the same situation (a 429 is Stripe's `rate_limit_error`).
    let error_type = match (status, code) {
        (500..=599, _) => "api_error",
        (429, _) => "rate_limit_error",
        (_, "key_reused" | "request_in_flight") => "idempotency_error",
        (_, c) if c.starts_with("key_") => "idempotency_error",
        _ => "invalid_request_error",
    };
    let shown = style.code(code);
    // Written piece by piece rather than with `format!`: this body is sent on every 409 and 422,
    // and in the filter `core::fmt` costs about ten times what appending the pieces does.
    let mut body = String::with_capacity(160 + 2 * detail.len());
    body.push_str("{\"type\":");
    push_json_string(&mut body, style.type_base(), code);
    body.push_str(",\"title\":");
    push_json_string(&mut body, title, "");
    body.push_str(",\"status\":");
    // Writing into a `String` cannot fail.
    let _ = body.put_u64(u64::from(status));
    body.push_str(",\"detail\":");
    push_json_string(&mut body, detail, "");
    body.push_str(",\"code\":");
    push_json_string(&mut body, shown, "");
    body.push_str(",\"error\":{\"type\":");
    push_json_string(&mut body, error_type, "");
    body.push_str(",\"code\":");
    push_json_string(&mut body, shown, "");
    body.push_str(",\"message\":");
    push_json_string(&mut body, detail, "");
    body.push_str("}}");
    HttpAnswer {
        status,
        headers,
        body: body.into_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use crate::answer::{answer, answer_for, styled, EdgeAnswer, RelayProblem};
    use crate::policy::problems::{Compat, Styled};
    use crate::policy::{Policy, ProblemStyle};
    use crate::record::{StoredBody, StoredResponse};
    use crate::time::Span;
    use alloc::string::String;
    use alloc::vec::Vec;
    use serde_json::Value;

    fn json(body: &[u8]) -> Value {
        serde_json::from_slice(body).unwrap()
    }

    const CONFLICT: EdgeAnswer<'static> = EdgeAnswer::Conflict {
        retry_after: Span(2000),
    };

    #[test]
    fn the_default_style_is_the_draft_with_stripe_extensions() {
        let http = answer(&CONFLICT);
        assert_eq!(http.header("link"), None);
        assert_eq!(http.header("stripe-should-retry"), Some("true"));
        let body = json(&http.body);
        assert_eq!(body["type"], "urn:idemgate:problem:request_in_flight");
        assert_eq!(body["code"], "request_in_flight");
        assert_eq!(body["error"]["code"], "request_in_flight");
        assert_eq!(body["error"]["type"], "idempotency_error");
        // What the policy compiled from `{}` writes is the same answer, byte for byte.
        assert_eq!(answer_for(&CONFLICT, &Policy::defaults()), http);
    }

    #[test]
    fn a_retry_is_advised_exactly_where_the_answer_says_when() {
        let quota = answer(&EdgeAnswer::QuotaExceeded {
            retry_after: Span::from_secs(30),
        });
        assert_eq!(quota.status, 429);
        assert_eq!(quota.header("stripe-should-retry"), Some("true"));
        assert_eq!(json(&quota.body)["error"]["type"], "rate_limit_error");
        let full = answer(&EdgeAnswer::StoreFull {
            retry_after: Span::from_secs(1),
        });
        assert_eq!(full.header("stripe-should-retry"), Some("true"));
        let not_sent = answer(&EdgeAnswer::Relay(RelayProblem::NotSent));
        assert_eq!(not_sent.header("stripe-should-retry"), Some("true"));
        // Final: the same request gets the same refusal.
        for final_answer in [
            answer(&EdgeAnswer::Mismatch),
            answer(&EdgeAnswer::MissingKey {
                header: "idempotency-key",
            }),
            answer(&EdgeAnswer::BodyTooLarge { limit: 1 }),
            answer(&EdgeAnswer::TokenRouteUnknown),
        ] {
            assert_eq!(final_answer.header("retry-after"), None);
            assert_eq!(
                final_answer.header("stripe-should-retry"),
                Some("false"),
                "{}",
                final_answer.status
            );
        }
    }

    #[test]
    fn a_replay_is_final_whatever_its_status() {
        let stored = StoredResponse {
            status: 500,
            headers: alloc::vec![
                ("content-type".into(), "application/json".into()),
                ("stripe-should-retry".into(), "true".into()),
            ],
            body: StoredBody::Kept(b"{}".to_vec()),
            seal: None,
        };
        let mut replayed = Policy::defaults().replay_headers;
        replayed.push("stripe-should-retry".into());
        let http = answer(&EdgeAnswer::Replay {
            stored: &stored,
            replay_headers: &replayed,
        });
        assert_eq!(http.status, 500);
        let advice: Vec<&str> = http
            .headers
            .iter()
            .filter(|(n, _)| n == "stripe-should-retry")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(advice, ["false"], "one header, the edge's");
    }

    #[test]
    fn a_configured_style_writes_the_type_base_the_link_and_stripes_codes() {
        let style = ProblemStyle::new(Styled {
            type_base: Some("https://errors.example.com/problems/".into()),
            describedby: Some("https://docs.example.com/idempotency".into()),
            compat: Compat::Stripe,
        });
        let http = styled(&CONFLICT, &style);
        assert_eq!(
            http.header("link"),
            Some("<https://docs.example.com/idempotency>; rel=\"describedby\"")
        );
        let body = json(&http.body);
        // The `type` keeps idemgate's code: a client of the draft matching on it sees no change.
        assert_eq!(
            body["type"],
            "https://errors.example.com/problems/request_in_flight"
        );
        assert_eq!(body["code"], "idempotency_key_in_use");
        assert_eq!(body["error"]["code"], "idempotency_key_in_use");
        assert_eq!(body["error"]["type"], "idempotency_error");
        assert_eq!(body["status"], 409);
        // The HTTP meaning is the same in every style.
        let default = answer(&CONFLICT);
        assert_eq!(http.status, default.status);
        assert_eq!(http.header("retry-after"), default.header("retry-after"));
        // Every problem carries the link, order and precondition problems too; other answers not.
        let precondition = crate::answer::order::order_answer(
            &crate::answer::order::OrderAnswer::ResourceMissing,
            &style,
        );
        assert!(precondition.header("link").is_some());
        let token = styled(
            &EdgeAnswer::TokenIssued {
                token: "t",
                expires_at_ms: 1,
                header: "h",
            },
            &style,
        );
        assert_eq!(token.header("link"), None);
        let mismatch = json(&styled(&EdgeAnswer::Mismatch, &style).body);
        assert_eq!(mismatch["code"], "key_reused");
        assert_eq!(
            mismatch["type"],
            String::from("https://errors.example.com/problems/key_reused")
        );
    }

    #[test]
    fn the_problems_section_reaches_the_answers_the_guard_makes() {
        let policy = Policy::from_json(
            r#"{"problems": {"type_base": "urn:example:problem:",
                "describedby": "https://docs.example.com/errors", "compat": "stripe"}}"#,
            &|_| None,
        )
        .unwrap();
        let http = answer_for(&CONFLICT, &policy);
        assert_eq!(
            json(&http.body)["type"],
            "urn:example:problem:request_in_flight"
        );
        assert_eq!(json(&http.body)["code"], "idempotency_key_in_use");
        assert_eq!(
            http.header("link"),
            Some("<https://docs.example.com/errors>; rel=\"describedby\"")
        );
        let none = Policy::from_json(r#"{"problems": {"compat": "none"}}"#, &|_| None).unwrap();
        assert_eq!(answer_for(&CONFLICT, &none), answer(&CONFLICT));
    }
}
