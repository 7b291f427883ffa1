//! Group `duration`: input `{"text": "24h"}`; output milliseconds.

use crate::conformance::str_field;
use crate::conformance::Outcome;
use crate::request::json::Value;
use crate::time::Span;
use alloc::string::String;

pub fn eval(input: &Value) -> Outcome {
    let text = str_field(input, "text")?;
    text.parse::<Span>()
        .map(|span| Value::from(span.as_millis()))
        .map_err(|e| String::from(e.code()))
}
