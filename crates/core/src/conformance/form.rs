//! Group `form`: input `{"body"|"body_hex", "chunks"?: [offsets]}`; output the canonical form
//! digest (hex) of `crate::request::form`.

use crate::conformance::{bytes_field, split_chunks, Outcome};
use crate::hash::to_hex;
use crate::request::form::FormHasher;
use crate::request::json::Value;
use alloc::string::ToString;

pub fn eval(input: &Value) -> Outcome {
    let body = bytes_field(input, "body")?.ok_or("vector_bad_input:body")?;
    let mut hasher = FormHasher::new();
    for chunk in split_chunks(&body, input.get("chunks"))? {
        hasher.update(chunk).map_err(|e| e.code().to_string())?;
    }
    hasher
        .finish()
        .map(|digest| Value::String(to_hex(&digest)))
        .map_err(|e| e.code().to_string())
}
