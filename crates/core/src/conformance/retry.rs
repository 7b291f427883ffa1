//! Group `retry`: input `{"attempts_made":n,"elapsed_ms":n,"now":ms,"random":u32,"outcome":..,
//! "policy":{..}}` where `outcome` is `{"network_error":true}`, `{"timeout":true}` or
//! `{"status":503,"retry_after":"2"}` (`retry_after` optional) and the optional `policy` overrides
//! `max_attempts`, `base_delay_ms`, `max_delay_ms`, `max_total_ms`. Output `{"retry_ms": n}` or
//! `{"final": "<reason code>"}`.

use crate::browser::retry::{next, AttemptOutcome, RetryDecision, RetryPolicy};
use crate::conformance::{opt_str_field, u64_field, Outcome};
use crate::request::json::Value;
use crate::time::{Span, UnixMillis};
use alloc::format;
use alloc::string::String;

fn small<T: TryFrom<u64>>(input: &Value, name: &str) -> Result<T, String> {
    T::try_from(u64_field(input, name)?).map_err(|_| format!("vector_bad_input:{name}"))
}

fn policy(input: Option<&Value>) -> Result<RetryPolicy, String> {
    let mut policy = RetryPolicy::default();
    let Some(overrides) = input else {
        return Ok(policy);
    };
    let obj = overrides.as_object().ok_or("vector_bad_input:policy")?;
    for (name, _) in obj {
        match name.as_str() {
            "max_attempts" => policy.max_attempts = small(overrides, name)?,
            "base_delay_ms" => policy.base_delay = Span(u64_field(overrides, name)?),
            "max_delay_ms" => policy.max_delay = Span(u64_field(overrides, name)?),
            "max_total_ms" => policy.max_total = Span(u64_field(overrides, name)?),
            other => return Err(format!("vector_bad_input:policy.{other}")),
        }
    }
    Ok(policy)
}

pub fn eval(input: &Value) -> Outcome {
    let policy = policy(input.get("policy"))?;
    let raw = input.get("outcome").ok_or("vector_bad_input:outcome")?;
    let flag = |name: &str| raw.get(name).and_then(Value::as_bool) == Some(true);
    let outcome = if flag("network_error") {
        AttemptOutcome::NetworkError
    } else if flag("timeout") {
        AttemptOutcome::Timeout
    } else {
        AttemptOutcome::Response {
            status: small(raw, "status")?,
            retry_after: opt_str_field(raw, "retry_after")?,
        }
    };
    let decision = next(
        &policy,
        small(input, "attempts_made")?,
        Span(u64_field(input, "elapsed_ms")?),
        outcome,
        UnixMillis(u64_field(input, "now")?),
        small(input, "random")?,
    );
    Ok(match decision {
        RetryDecision::Retry { delay } => object! { "retry_ms" => delay.as_millis() },
        RetryDecision::Final(reason) => object! { "final" => reason.code() },
    })
}
