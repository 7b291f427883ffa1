//! The client retry policy (semantics §9) from `idemgate_core::retry`: the JS layer reports how an
//! attempt ended and gets back whether and when to try again, as a number (no string to format in
//! wasm and parse in JS); the names behind the codes come from [`crate::defaults`].

use crate::error::{millis, CodedError, JsResult, INVALID_ARGUMENT};
use alloc::string::String;
use idemgate_core::retry::{
    self, AttemptOutcome, FinalReason, RetryDecision, RetryPolicy, StatusClass,
};
use idemgate_core::time::{Span, UnixMillis};
use wasm_bindgen::prelude::*;

/// How an attempt ended, by code (the index): `response` (with a status), `network_error`,
/// `timeout`.
pub const OUTCOMES: [&str; 3] = ["response", "network_error", "timeout"];

/// The final reasons by code: `retryNext` returns `-1 - code` for them.
pub const REASONS: [FinalReason; 4] = [
    FinalReason::Success { status: 0 },
    FinalReason::NotRetryable { status: 0 },
    FinalReason::ExhaustedAttempts,
    FinalReason::ExhaustedTime,
];

/// One step of the retry policy. `outcome` is a code of [`OUTCOMES`] (`0` response: then `status`
/// and `retry_after`, the raw `Retry-After` header, count). Returns the delay in milliseconds
/// (≥ 0) before the same request is sent again, or `-1 - code` of a [`REASONS`] entry when
/// retrying stops. Times are milliseconds; `random` is a uniform u32 (full jitter is
/// `random / 2^32` of the back-off cap). A delay is never above `maxTotalMs`, so it is exact.
#[wasm_bindgen(js_name = retryNext)]
#[allow(clippy::too_many_arguments)] // a flat, harness-callable signature
pub fn retry_next(
    max_attempts: u32,
    base_delay_ms: f64,
    max_delay_ms: f64,
    max_total_ms: f64,
    attempts_made: u32,
    elapsed_ms: f64,
    outcome: u8,
    status: u16,
    retry_after: Option<String>,
    now_ms: f64,
    random: u32,
) -> JsResult<f64> {
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
    pub outcome: u8,
    pub status: u16,
    pub retry_after: Option<&'a str>,
    pub now: UnixMillis,
    pub random: u32,
}

pub fn decide(policy: &RetryPolicy, step: &Step<'_>) -> Result<f64, CodedError> {
    let outcome = match step.outcome {
        0 => AttemptOutcome::Response {
            status: step.status,
            retry_after: step.retry_after,
        },
        1 => AttemptOutcome::NetworkError,
        2 => AttemptOutcome::Timeout,
        _ => {
            return Err(CodedError::new(
                INVALID_ARGUMENT,
                "unknown attempt outcome: use network_error, timeout or response",
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
        RetryDecision::Retry { delay } => delay.as_millis() as f64,
        RetryDecision::Final(reason) => {
            let code = REASONS.iter().position(|r| r.code() == reason.code());
            -1.0 - code.unwrap_or(REASONS.len()) as f64
        }
    })
}

/// A `Retry-After` value (delta-seconds or an IMF-fixdate relative to `nowMs`) in milliseconds;
/// `undefined` when it is neither.
#[wasm_bindgen(js_name = parseRetryAfter)]
pub fn parse_retry_after(value: &str, now_ms: f64) -> JsResult<Option<f64>> {
    let now = UnixMillis(millis(now_ms, "nowMs")?);
    Ok(retry::parse_retry_after(value, now).map(|span| span.as_millis() as f64))
}

/// What a status means to the client, as the index of its class in `StatusClass::ALL` (names:
/// `statusClasses` of [`crate::defaults::defaults`]).
#[wasm_bindgen(js_name = classifyStatus)]
pub fn classify_status(status: u16) -> u8 {
    let class = retry::classify(status);
    StatusClass::ALL
        .iter()
        .position(|c| *c == class)
        .unwrap_or(StatusClass::ALL.len()) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(attempts_made: u32, outcome: u8, status: u16, retry_after: Option<&str>) -> f64 {
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
        assert_eq!(step(1, 1, 0, None), 125.0);
        assert_eq!(step(3, 2, 0, None), 500.0);
        assert_eq!(step(1, 0, 503, Some("2")), 2000.0);
        assert_eq!(step(1, 0, 201, None), -1.0);
        assert_eq!(step(1, 0, 422, None), -2.0);
        assert_eq!(step(5, 0, 409, None), -3.0);
        let codes: [&str; 4] = REASONS.map(|r| r.code());
        assert_eq!(
            codes,
            [
                "success",
                "not_retryable",
                "retry_exhausted_attempts",
                "retry_exhausted_time"
            ]
        );
        let bad = Step {
            attempts_made: 1,
            elapsed: Span(0),
            outcome: 3,
            status: 0,
            retry_after: None,
            now: UnixMillis(0),
            random: 0,
        };
        assert_eq!(
            decide(&RetryPolicy::default(), &bad).map_err(|e| e.code),
            Err(INVALID_ARGUMENT)
        );
    }

    #[test]
    fn classes_are_indexes() {
        let name = |status| StatusClass::ALL[usize::from(classify_status(status))].name();
        assert_eq!(name(409), "in_flight");
        assert_eq!(name(422), "key_reused");
        assert_eq!(name(99), "invalid");
        assert_eq!(name(200), "success");
    }
}
