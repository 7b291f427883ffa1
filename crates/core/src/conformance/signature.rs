//! Group `signature`: input `{"scheme": "github"|"stripe", "secret", "tolerance"?, "header"?,
//! "body"|"body_hex", "chunks"?, "now_ms"}`; output `true` when the delivery's signature header
//! verifies against the body (`crate::signature`), else the error code. No `header`: the delivery
//! carries none.

use crate::conformance::{bytes_field, opt_str_field, split_chunks, str_field, u64_field, Outcome};
use crate::json::Value;
use crate::signature::{SignatureRule, SignatureScheme, DEFAULT_TOLERANCE};
use crate::time::{Span, UnixMillis};
use alloc::string::{String, ToString};
use alloc::vec::Vec;

pub fn eval(input: &Value) -> Outcome {
    let tolerance = match opt_str_field(input, "tolerance")? {
        Some(text) => text.parse::<Span>().map_err(|e| String::from(e.code()))?,
        None => DEFAULT_TOLERANCE,
    };
    let scheme = match str_field(input, "scheme")? {
        "github" => SignatureScheme::GitHub,
        "stripe" => SignatureScheme::Stripe { tolerance },
        _ => return Err("vector_bad_input:scheme".into()),
    };
    let secret = str_field(input, "secret")?;
    let rule = SignatureRule::new(scheme, secret.as_bytes()).map_err(|e| e.code().to_string())?;
    let header = opt_str_field(input, "header")?;
    let values: Vec<&[u8]> = header.map(str::as_bytes).into_iter().collect();
    let now = UnixMillis(u64_field(input, "now_ms")?);
    let body = bytes_field(input, "body")?.ok_or("vector_bad_input:body")?;
    let mut check = rule.start(&values, now).map_err(|e| e.code().to_string())?;
    for chunk in split_chunks(&body, input.get("chunks"))? {
        check.update(chunk);
    }
    check
        .verify()
        .map(|()| Value::Bool(true))
        .map_err(|e| e.code().to_string())
}
