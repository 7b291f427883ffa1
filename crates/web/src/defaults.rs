//! The core's defaults, handed to JS once as one JSON document, so the package's defaults (retry
//! policy, fingerprint configuration, token endpoint, headers, how an unanswered submission
//! settles) are the core's, with one small export instead of one per value (each export costs JS
//! glue). No code tables: every other export answers names and objects (see [`crate::object`]).

use crate::object::{Json, Member};
use alloc::string::String;
use idemgate_core::browser::intent::Settled;
use idemgate_core::browser::retry::RetryPolicy;
use idemgate_core::request::fingerprint::FingerprintSpec;
use wasm_bindgen::prelude::*;

/// The core's defaults as JSON:
///
/// ```json
/// {"version":"0.1.0",
///  "retry":{"maxAttempts":5,"baseDelayMs":250,"maxDelayMs":10000,"maxTotalMs":30000},
///  "fingerprint":{"mode":"auto","headers":["content-type"],"fields":[],"maxDepth":64,
///                 "maxNumberLen":64,"caseSensitive":false},
///  "tokenEndpoint":"/.idemgate/token","keyHeader":"idempotency-key",
///  "replayedHeader":"idempotent-replayed",
///  "unanswered":{"event":"fail_retryable","keepsKey":true},
///  "resolved":{"event":"succeed","keepsKey":false}}
/// ```
///
/// `caseSensitive` is a route's default (paths are compared in lower case); `unanswered` and
/// `resolved` are how a submission without an answer and a sender that resolved without an HTTP
/// answer settle (the shape `settle` answers).
#[wasm_bindgen]
pub fn defaults() -> String {
    let mut out = Json(String::with_capacity(512));
    out.raw("{\"version\":");
    out.string(env!("CARGO_PKG_VERSION"));
    let retry = RetryPolicy::default();
    out.raw(",\"retry\":{\"maxAttempts\":");
    out.number(u64::from(retry.max_attempts));
    out.raw(",\"baseDelayMs\":");
    out.number(retry.base_delay.as_millis());
    out.raw(",\"maxDelayMs\":");
    out.number(retry.max_delay.as_millis());
    out.raw(",\"maxTotalMs\":");
    out.number(retry.max_total.as_millis());
    let fp = FingerprintSpec::default();
    out.raw("},\"fingerprint\":{\"mode\":");
    out.string(fp.mode.name());
    out.raw(",\"headers\":");
    out.strings(fp.headers.iter().map(String::as_str));
    out.raw(",\"fields\":[],\"maxDepth\":");
    out.number(u64::from(fp.json_limits.max_depth));
    out.raw(",\"maxNumberLen\":");
    out.number(u64::from(fp.json_limits.max_number_len));
    out.raw(",\"caseSensitive\":");
    out.raw(
        if idemgate_core::request::target::CASE_SENSITIVE_BY_DEFAULT {
            "true"
        } else {
            "false"
        },
    );
    out.raw("},\"tokenEndpoint\":");
    out.string(idemgate_core::client::token::ISSUE_PATH);
    out.raw(",\"keyHeader\":");
    out.string(idemgate_core::request::key::HEADER);
    out.raw(",\"replayedHeader\":");
    out.string(idemgate_core::answer::REPLAYED_HEADER);
    out.raw(",\"unanswered\":");
    out.raw(&settled(Settled::UNANSWERED).0);
    out.raw(",\"resolved\":");
    out.raw(&settled(Settled::RESOLVED).0);
    out.raw("}");
    out.0
}

/// `{"event": …, "keepsKey": …}` of a settled submission.
pub fn settled(settled: Settled) -> Json {
    Json::object(&[
        ("event", Member::Text(settled.event())),
        ("keepsKey", Member::Bool(settled.keeps_key())),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use idemgate_json::Value;

    fn number(doc: &Value, path: &[&str]) -> Option<u64> {
        path.iter()
            .try_fold(doc, |v, name| v.get(name))
            .and_then(Value::as_u64)
    }

    fn text<'a>(doc: &'a Value, path: &[&str]) -> Option<&'a str> {
        path.iter()
            .try_fold(doc, |v, name| v.get(name))
            .and_then(Value::as_str)
    }

    /// Read back with the core's JSON reader and compared with the core's values, not with a
    /// copy of the text.
    #[test]
    fn the_document_holds_the_core_values() {
        let doc = Value::parse(&defaults()).unwrap();
        let retry = RetryPolicy::default();
        assert_eq!(
            number(&doc, &["retry", "maxAttempts"]),
            Some(u64::from(retry.max_attempts))
        );
        assert_eq!(
            number(&doc, &["retry", "baseDelayMs"]),
            Some(retry.base_delay.as_millis())
        );
        assert_eq!(
            number(&doc, &["retry", "maxDelayMs"]),
            Some(retry.max_delay.as_millis())
        );
        assert_eq!(
            number(&doc, &["retry", "maxTotalMs"]),
            Some(retry.max_total.as_millis())
        );
        let fp = FingerprintSpec::default();
        assert_eq!(text(&doc, &["fingerprint", "mode"]), Some(fp.mode.name()));
        let headers: Option<alloc::vec::Vec<&str>> = doc
            .get("fingerprint")
            .and_then(|f| f.get("headers"))
            .and_then(Value::as_array)
            .map(|l| l.iter().filter_map(Value::as_str).collect());
        assert_eq!(
            headers,
            Some(fp.headers.iter().map(String::as_str).collect())
        );
        assert_eq!(
            number(&doc, &["fingerprint", "maxDepth"]),
            Some(u64::from(fp.json_limits.max_depth))
        );
        assert_eq!(
            number(&doc, &["fingerprint", "maxNumberLen"]),
            Some(u64::from(fp.json_limits.max_number_len))
        );
        let case = doc.get("fingerprint").and_then(|f| f.get("caseSensitive"));
        assert_eq!(
            case.and_then(Value::as_bool),
            Some(idemgate_core::request::target::CASE_SENSITIVE_BY_DEFAULT)
        );
        assert_eq!(
            text(&doc, &["tokenEndpoint"]),
            Some(idemgate_core::client::token::ISSUE_PATH)
        );
        assert_eq!(
            text(&doc, &["keyHeader"]),
            Some(idemgate_core::request::key::HEADER)
        );
        for (name, want) in [
            ("unanswered", Settled::UNANSWERED),
            ("resolved", Settled::RESOLVED),
        ] {
            assert_eq!(text(&doc, &[name, "event"]), Some(want.event()), "{name}");
            let kept = doc.get(name).and_then(|s| s.get("keepsKey"));
            assert_eq!(kept.and_then(Value::as_bool), Some(want.keeps_key()));
        }
        assert_eq!(text(&doc, &["version"]), Some(env!("CARGO_PKG_VERSION")));
    }
}
