//! The client retry policy (semantics §9) from `idemgate_core::retry`: the JS layer reports how an
//! attempt ended and gets back whether and when to try again.

use crate::error::{millis, CodedError, JsResult, INVALID_ARGUMENT};
use alloc::format;
use alloc::string::String;
use idemgate_core::retry::{self, AttemptOutcome, RetryDecision, RetryPolicy, StatusClass};
use idemgate_core::time::{Span, UnixMillis};
use wasm_bindgen::prelude::*;

/// One step of the retry policy. `outcome` is `"network_error"`, `"timeout"` or `"response"` (then
/// `status` and `retry_after`, the raw `Retry-After` header, count). Returns `"retry:<ms>"` or
/// `"final:<reason>"` where reason is the core's `FinalReason::code()` (`success`,
/// `not_retryable`, `retry_exhausted_attempts`, `retry_exhausted_time`). Times are milliseconds;
/// `random` is a uniform u32 (full jitter is `random / 2^32` of the back-off cap).
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
) -> JsResult<String> {
    let policy = RetryPolicy {
        max_attempts,
        base_delay: Span(millis(base_delay_ms, "baseDelayMs")?),
        max_delay: Span(millis(max_delay_ms, "maxDelayMs")?),
        max_total: Span(millis(max_total_ms, "maxTotalMs")?),
    };
    let step = Step {
        attempts_made,
        elapsed: Span(millis(elapsed_ms, "elapsedMs")?),
        outcome,
        status,
        retry_after: retry_after.as_deref(),
        now: UnixMillis(millis(now_ms, "nowMs")?),
        random,
    };
    Ok(decide(&policy, &step)?)
}

/// The inputs of [`retry_next`] after the policy.
pub struct Step<'a> {
    pub attempts_made: u32,
    pub elapsed: Span,
    pub outcome: &'a str,
    pub status: u16,
    pub retry_after: Option<&'a str>,
    pub now: UnixMillis,
    pub random: u32,
}

pub fn decide(policy: &RetryPolicy, step: &Step<'_>) -> Result<String, CodedError> {
    let outcome = match step.outcome {
        "network_error" => AttemptOutcome::NetworkError,
        "timeout" => AttemptOutcome::Timeout,
        "response" => AttemptOutcome::Response {
            status: step.status,
            retry_after: step.retry_after,
        },
        other => {
            return Err(CodedError::new(
                INVALID_ARGUMENT,
                format!(
                    "unknown attempt outcome \"{other}\": use network_error, timeout or response"
                ),
            ))
        }
    };
    let decision = retry::next(
        policy,
        step.attempts_made,
        step.elapsed,
        outcome,
        step.now,
        step.random,
    );
    Ok(match decision {
        RetryDecision::Retry { delay } => format!("retry:{}", delay.as_millis()),
        RetryDecision::Final(reason) => format!("final:{}", reason.code()),
    })
}

/// The default policy as `[maxAttempts, baseDelayMs, maxDelayMs, maxTotalMs]`, so the JS defaults
/// are the core's.
#[wasm_bindgen(js_name = retryPolicyDefaults)]
pub fn retry_policy_defaults() -> alloc::vec::Vec<f64> {
    let p = RetryPolicy::default();
    let ms = |s: Span| s.as_millis() as f64;
    alloc::vec![
        f64::from(p.max_attempts),
        ms(p.base_delay),
        ms(p.max_delay),
        ms(p.max_total)
    ]
}

/// A `Retry-After` value (delta-seconds or an IMF-fixdate relative to `nowMs`) in milliseconds;
/// `undefined` when it is neither.
#[wasm_bindgen(js_name = parseRetryAfter)]
pub fn parse_retry_after(value: &str, now_ms: f64) -> JsResult<Option<f64>> {
    let now = UnixMillis(millis(now_ms, "nowMs")?);
    Ok(retry::parse_retry_after(value, now).map(|span| span.as_millis() as f64))
}

/// What a status means to the client: `success`, `redirect`, `in_flight` (409), `rate_limited`
/// (429), `unavailable` (502–504), `key_reused` (422), `client_error`, `server_error`, `invalid`.
#[wasm_bindgen(js_name = classifyStatus)]
pub fn classify_status(status: u16) -> String {
    String::from(StatusClass::name(retry::classify(status)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(attempts_made: u32, outcome: &str, status: u16, retry_after: Option<&str>) -> String {
        let step = Step {
            attempts_made,
            elapsed: Span(0),
            outcome,
            status,
            retry_after,
            now: UnixMillis(0),
            random: 1 << 31,
        };
        decide(&RetryPolicy::default(), &step).unwrap()
    }

    #[test]
    fn decisions_are_the_core_ones() {
        assert_eq!(step(1, "network_error", 0, None), "retry:125");
        assert_eq!(step(3, "timeout", 0, None), "retry:500");
        assert_eq!(step(1, "response", 503, Some("2")), "retry:2000");
        assert_eq!(step(1, "response", 201, None), "final:success");
        assert_eq!(step(1, "response", 422, None), "final:not_retryable");
        assert_eq!(
            step(5, "response", 409, None),
            "final:retry_exhausted_attempts"
        );
        let bad = Step {
            outcome: "lost",
            ..Step {
                attempts_made: 1,
                elapsed: Span(0),
                outcome: "",
                status: 0,
                retry_after: None,
                now: UnixMillis(0),
                random: 0,
            }
        };
        assert_eq!(
            decide(&RetryPolicy::default(), &bad).map_err(|e| e.code),
            Err(INVALID_ARGUMENT)
        );
    }

    #[test]
    fn classes_and_defaults() {
        assert_eq!(classify_status(409), "in_flight");
        assert_eq!(classify_status(422), "key_reused");
        assert_eq!(classify_status(99), "invalid");
        assert_eq!(retry_policy_defaults(), [5.0, 250.0, 10_000.0, 30_000.0]);
    }
}
