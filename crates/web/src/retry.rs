//! The client retry policy (`docs/semantics.md` §9) from `idemgate_core::browser::retry`: the JS
//! layer reports how an attempt ended and gets back whether and when to try again, as a plain
//! object — `{retry: true, delayMs}` or `{retry: false, reason}` — and by name, never a number to
//! decode.

use crate::error::{millis, CodedError, JsResult, INVALID_ARGUMENT};
use crate::object::{Json, Member};
use alloc::string::String;
use idemgate_core::browser::retry::{self, AttemptOutcome, RetryDecision, RetryPolicy};
use idemgate_core::time::{Span, UnixMillis};
use wasm_bindgen::prelude::*;

/// One step of the retry policy. `outcome` is how the attempt ended: `"response"` (then `status`
/// and `retry_after`, the raw `Retry-After` header, count), `"network_error"` or `"timeout"`;
/// anything else throws `invalid_argument`. Returns `{retry: true, delayMs}` (the delay before the
/// same request is sent again) or `{retry: false, reason}` (`success`, `not_retryable`,
/// `retry_exhausted_attempts`, `retry_exhausted_time`). Times are milliseconds; `random` is a
/// uniform u32 (full jitter is `random / 2^32` of the back-off cap).
#[wasm_bindgen(js_name = retryNext)]
#[allow(clippy::too_many_arguments)] // a flat, harness-callable signature
pub fn retry_next(
    max_attempts: u32,
    base_delay_ms: f64,
    max_delay_ms: f64,
    max_total_ms: f64,
    attempts_made: u32,
    elapsed_ms: f64,
    outcome: &str,
    status: u16,
    retry_after: Option<String>,
    now_ms: f64,
    random: u32,
) -> JsResult<JsValue> {
    let policy = RetryPolicy {
        max_attempts,
        base_delay: Span(millis(base_delay_ms, "baseDelayMs")?),
        max_delay: Span(millis(max_delay_ms, "maxDelayMs")?),
        max_total: Span(millis(max_total_ms, "maxTotalMs")?),
    };
    let step = RetryFacts {
        attempts_made,
        elapsed: Span(millis(elapsed_ms, "elapsedMs")?),
        outcome,
        status,
        retry_after: retry_after.as_deref(),
        now: UnixMillis(millis(now_ms, "nowMs")?),
        random,
    };
    Ok(answer(decide(&policy, &step)?).into_js())
}

/// The inputs of [`retry_next`] after the policy.
pub struct RetryFacts<'a> {
    pub attempts_made: u32,
    pub elapsed: Span,
    pub outcome: &'a str,
    pub status: u16,
    pub retry_after: Option<&'a str>,
    pub now: UnixMillis,
    pub random: u32,
}

pub fn decide(policy: &RetryPolicy, step: &RetryFacts<'_>) -> Result<RetryDecision, CodedError> {
    let outcome = match step.outcome {
        "response" => AttemptOutcome::Response {
            status: step.status,
            retry_after: step.retry_after,
        },
        "network_error" => AttemptOutcome::NetworkError,
        "timeout" => AttemptOutcome::Timeout,
        _ => {
            return Err(CodedError::new(
                INVALID_ARGUMENT,
                "unknown attempt outcome: use network_error, timeout or response",
            ))
        }
    };
    Ok(retry::next(
        policy,
        step.attempts_made,
        step.elapsed,
        outcome,
        step.now,
        step.random,
    ))
}

/// `{retry: true, delayMs}` or `{retry: false, reason}`. A delay is never above `maxTotalMs`
/// (at most 2^53-1), so it is exact as a JS number.
pub fn answer(decision: RetryDecision) -> Json {
    match decision {
        RetryDecision::Retry { delay } => Json::object(&[
            ("retry", Member::Bool(true)),
            ("delayMs", Member::Number(delay.as_millis())),
        ]),
        RetryDecision::Final(reason) => Json::object(&[
            ("retry", Member::Bool(false)),
            ("reason", Member::Text(reason.code())),
        ]),
    }
}

/// A `Retry-After` value (delta-seconds or an IMF-fixdate relative to `nowMs`) in milliseconds;
/// `undefined` when it is neither.
#[wasm_bindgen(js_name = parseRetryAfter)]
pub fn parse_retry_after(value: &str, now_ms: f64) -> JsResult<Option<f64>> {
    let now = UnixMillis(millis(now_ms, "nowMs")?);
    Ok(retry::parse_retry_after(value, now).map(|span| span.as_millis() as f64))
}

/// What a status means to the client, by name: `success`, `redirect`, `in_flight`,
/// `rate_limited`, `unavailable`, `key_reused`, `client_error`, `server_error` or `invalid`.
#[wasm_bindgen(js_name = classifyStatus)]
pub fn classify_status(status: u16) -> String {
    String::from(retry::classify(status).name())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(attempts_made: u32, outcome: &str, status: u16, retry_after: Option<&str>) -> String {
        let step = RetryFacts {
            attempts_made,
            elapsed: Span(0),
            outcome,
            status,
            retry_after,
            now: UnixMillis(0),
            random: 1 << 31,
        };
        answer(decide(&RetryPolicy::default(), &step).unwrap()).0
    }

    #[test]
    fn decisions_are_the_core_ones_by_name() {
        let retry = |ms: &str| alloc::format!(r#"{{"retry":true,"delayMs":{ms}}}"#);
        let stop = |why: &str| alloc::format!(r#"{{"retry":false,"reason":"{why}"}}"#);
        assert_eq!(step(1, "network_error", 0, None), retry("125"));
        assert_eq!(step(3, "timeout", 0, None), retry("500"));
        assert_eq!(step(1, "response", 503, Some("2")), retry("2000"));
        assert_eq!(step(1, "response", 201, None), stop("success"));
        assert_eq!(step(1, "response", 422, None), stop("not_retryable"));
        assert_eq!(
            step(5, "response", 409, None),
            stop("retry_exhausted_attempts")
        );
        for unknown in ["", "Timeout", "255"] {
            let bad = RetryFacts {
                attempts_made: 1,
                elapsed: Span(0),
                outcome: unknown,
                status: 0,
                retry_after: None,
                now: UnixMillis(0),
                random: 0,
            };
            let code = decide(&RetryPolicy::default(), &bad).map_err(|e| e.code);
            assert_eq!(code.err(), Some(INVALID_ARGUMENT), "{unknown:?}");
        }
    }

    #[test]
    fn classes_are_names() {
        assert_eq!(classify_status(409), "in_flight");
        assert_eq!(classify_status(422), "key_reused");
        assert_eq!(classify_status(99), "invalid");
        assert_eq!(classify_status(200), "success");
    }
}
