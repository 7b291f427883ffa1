//! Group `json`: input `{"body"|"body_hex", "fields"?: [pointers], "max_depth"?: n,
//! "max_number_len"?: n, "chunks"?: [offsets]}`;
//! output the canonical digest (hex) of the document, or of the selected fields.

use crate::conformance::{bytes_field, split_chunks, Outcome};
use crate::hash::to_hex;
use crate::request::json::Value;
use crate::request::json::{JsonHasher, JsonLimits, JsonPointer};
use alloc::string::{String, ToString};
use alloc::vec::Vec;

pub fn eval(input: &Value) -> Outcome {
    let body = bytes_field(input, "body")?.ok_or("vector_bad_input:body")?;
    let mut limits = JsonLimits::default();
    if let Some(depth) = input.get("max_depth").and_then(Value::as_u64) {
        limits.max_depth = u16::try_from(depth).map_err(|_| "vector_bad_input:max_depth")?;
    }
    if let Some(len) = input.get("max_number_len").and_then(Value::as_u64) {
        limits.max_number_len =
            u16::try_from(len).map_err(|_| "vector_bad_input:max_number_len")?;
    }
    let pointers: Option<Vec<JsonPointer>> = match input.get("fields") {
        None => None,
        Some(list) => Some(
            list.as_array()
                .ok_or("vector_bad_input:fields")?
                .iter()
                .map(|p| {
                    let text = p.as_str().ok_or("vector_bad_input:fields")?;
                    JsonPointer::parse(text).map_err(|e| String::from(e.code()))
                })
                .collect::<Result<_, String>>()?,
        ),
    };
    let mut hasher = JsonHasher::new(limits, pointers.as_deref());
    for chunk in split_chunks(&body, input.get("chunks"))? {
        hasher.update(chunk).map_err(|e| e.code().to_string())?;
    }
    hasher
        .finish()
        .map(|digest| Value::String(to_hex(&digest)))
        .map_err(|e| e.code().to_string())
}
