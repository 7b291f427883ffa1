//! The rules around one business intent that the JS layer used to repeat (`docs/semantics.md` §9):
//! how a submission settled and whether the next one keeps the key, when an intent is over and how
//! two payloads compare (`idemgate_core::browser::intent`), whether an answer is a replay
//! (`idemgate_core::answer`), and how to ask the edge for a one-time token and whether
//! one is still usable (`idemgate_core::client::token`). JS does the I/O and the DOM; these decide.

use crate::error::{millis, CodedError, JsResult, INVALID_ARGUMENT};
use alloc::string::String;
use idemgate_core::browser::intent::{self, Payload};
use idemgate_core::time::UnixMillis;
use wasm_bindgen::prelude::*;

/// How a submission answered with `status` settled: `{event, keepsKey}`, the submit-lifecycle
/// event (`succeed`, `fail_retryable`, `fail_final`) and whether the intent keeps its key.
#[wasm_bindgen]
pub fn settle(status: u16) -> JsValue {
    crate::defaults::settled(intent::settle(status)).into_js()
}

/// Whether an intent in submit-lifecycle `state` is over (succeeded or failed for good): the
/// next submit is a new intent, with a new key.
#[wasm_bindgen(js_name = intentIsOver)]
pub fn intent_is_over(state: &str) -> bool {
    intent::is_over(state)
}

/// The fingerprint mode that decides whether a payload of `kind` is the same as the last one
/// (`value`: sent as JSON; `body`: sent as it is; `form_entries`: FormData as the JSON list of its
/// entries): `json` or `raw`, for the payload alone (no headers, one method and path for all);
/// `undefined` for a `stream`, which is never the same payload. Another kind throws
/// `invalid_argument`.
#[wasm_bindgen(js_name = payloadMode)]
pub fn payload_mode(kind: &str) -> JsResult<Option<String>> {
    Ok(mode(kind)?)
}

pub fn mode(kind: &str) -> Result<Option<String>, CodedError> {
    let kind = Payload::ALL
        .into_iter()
        .find(|k| k.name() == kind)
        .ok_or_else(|| {
            CodedError::new(
                INVALID_ARGUMENT,
                "unknown payload kind: use value, body, form_entries or stream",
            )
        })?;
    Ok(kind.mode().map(|mode| String::from(mode.name())))
}

/// Whether the next submit reuses the intent's key: `held` is the fingerprint of the payload the
/// key was made for (`undefined` when the intent holds no key), `payload` the new payload's
/// (`undefined` when it cannot be fingerprinted); `heldIfMatch` the `If-Match` the key was sent
/// with, `ifMatch` the new submit's (`undefined`: none).
#[wasm_bindgen(js_name = reusesKey)]
pub fn reuses_key(
    held: Option<String>,
    payload: Option<String>,
    held_if_match: Option<String>,
    if_match: Option<String>,
) -> bool {
    intent::reuses_key(
        held.as_deref(),
        payload.as_deref(),
        held_if_match.as_deref(),
        if_match.as_deref(),
    )
}

/// Whether an `Idempotent-Replayed` header value marks a replayed answer (`undefined`: absent).
#[wasm_bindgen(js_name = isReplayed)]
pub fn is_replayed(value: Option<String>) -> bool {
    value.is_some_and(|v| idemgate_core::answer::is_replayed(&v))
}

/// The request target that asks the token `endpoint` for a token for `method` and `path`.
#[wasm_bindgen(js_name = tokenTarget)]
pub fn token_target(endpoint: &str, method: &str, path: &str) -> String {
    idemgate_core::client::token::issue_target(endpoint, method, path)
}

/// Whether a token that expires at `expires_at_ms` is still usable at `now_ms` (the edge's rule:
/// strictly before expiry). Both are milliseconds since the epoch.
#[wasm_bindgen(js_name = tokenIsFresh)]
pub fn token_is_fresh(expires_at_ms: f64, now_ms: f64) -> JsResult<bool> {
    let expires_at = UnixMillis(millis(expires_at_ms, "expiresAtMs")?);
    let now = UnixMillis(millis(now_ms, "nowMs")?);
    Ok(idemgate_core::client::token::is_fresh(expires_at, now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_rules() {
        assert!(reuses_key(Some("a".into()), Some("a".into()), None, None));
        assert!(!reuses_key(None, Some("a".into()), None, None));
        let v = |tag: &str| Some(String::from(tag));
        assert!(!reuses_key(v("a"), v("a"), v("\"1\""), v("\"2\"")));
        assert!(is_replayed(Some("?1".into())) && !is_replayed(None));
        assert_eq!(
            token_target("/t", "post", "/p?x"),
            "/t?method=POST&path=%2Fp"
        );
        assert!(intent_is_over("succeeded") && !intent_is_over("failed_retryable"));
    }

    #[test]
    fn payloads_by_kind() {
        let named = |kind: &str| mode(kind).map_err(|e| e.code);
        assert_eq!(named("value"), Ok(Some("json".into())));
        assert_eq!(named("form_entries"), Ok(Some("json".into())));
        assert_eq!(named("body"), Ok(Some("raw".into())));
        assert_eq!(named("stream"), Ok(None));
        assert_eq!(named("blob"), Err(INVALID_ARGUMENT));
    }
}
