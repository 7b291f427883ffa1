//! The rules around one business intent that the JS layer used to repeat (semantics §9): how a
//! submission settled and whether the next one keeps the key (`idemgate_core::intent`), whether an
//! answer is a replay (`idemgate_core::answer`), and how to ask the edge for a one-time token and
//! whether one is still usable (`idemgate_core::token`). JS does the I/O and the DOM; these decide.

use crate::error::{millis, JsResult};
use alloc::string::String;
use idemgate_core::intent;
use idemgate_core::time::UnixMillis;
use wasm_bindgen::prelude::*;

/// How a submission answered with `status` settled, as the index of `Settled::ALL` (names and
/// whether the key is kept: `settled` of [`crate::defaults::defaults`]).
#[wasm_bindgen]
pub fn settle(status: u16) -> u8 {
    crate::defaults::settled_code(intent::settle(status)) as u8
}

/// Whether the next submit reuses the intent's key: `held` is the fingerprint of the payload the
/// key was made for (`undefined` when the intent holds no key), `payload` the new payload's
/// (`undefined` when it cannot be fingerprinted).
#[wasm_bindgen(js_name = reusesKey)]
pub fn reuses_key(held: Option<String>, payload: Option<String>) -> bool {
    intent::reuses_key(held.as_deref(), payload.as_deref())
}

/// Whether an `Idempotent-Replayed` header value marks a replayed answer (`undefined`: absent).
#[wasm_bindgen(js_name = isReplayed)]
pub fn is_replayed(value: Option<String>) -> bool {
    value.is_some_and(|v| idemgate_core::answer::is_replayed(&v))
}

/// The request target that asks the token `endpoint` for a token for `method` and `path`.
#[wasm_bindgen(js_name = tokenTarget)]
pub fn token_target(endpoint: &str, method: &str, path: &str) -> String {
    idemgate_core::token::issue_target(endpoint, method, path)
}

/// Whether a token that expires at `expires_at_ms` is still usable at `now_ms` (the edge's rule:
/// strictly before expiry). Both are milliseconds since the epoch.
#[wasm_bindgen(js_name = tokenIsFresh)]
pub fn token_is_fresh(expires_at_ms: f64, now_ms: f64) -> JsResult<bool> {
    let expires_at = UnixMillis(millis(expires_at_ms, "expiresAtMs")?);
    let now = UnixMillis(millis(now_ms, "nowMs")?);
    Ok(idemgate_core::token::is_fresh(expires_at, now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_index_the_core_tables() {
        use idemgate_core::intent::Settled;
        let event = |status| Settled::ALL[usize::from(settle(status))].event();
        assert_eq!(
            [event(201), event(503), event(422)],
            ["succeed", "fail_retryable", "fail_final"]
        );
        assert!(reuses_key(Some("a".into()), Some("a".into())));
        assert!(!reuses_key(None, Some("a".into())));
        assert!(is_replayed(Some("?1".into())) && !is_replayed(None));
        assert_eq!(token_target("/t", "POST", "/p"), "/t?method=POST&path=%2Fp");
    }
}
