//! Group `key`: input `{"values": ["<header value>", ...]}` (or `values_hex`, each value hex) — every
//! occurrence of the header in one request; output the parsed key, `null` when absent.

use crate::conformance::Outcome;
use crate::request::json::Value;
use crate::request::key::IdempotencyKey;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

pub fn eval(input: &Value) -> Outcome {
    let values: Vec<Vec<u8>> = if let Some(list) = input.get("values_hex") {
        list.as_array()
            .ok_or("vector_bad_input:values_hex")?
            .iter()
            .map(|v| v.as_str().and_then(crate::hash::from_hex))
            .collect::<Option<_>>()
            .ok_or("vector_bad_input:values_hex")?
    } else {
        input
            .get("values")
            .and_then(Value::as_array)
            .ok_or("vector_bad_input:values")?
            .iter()
            .map(|v| v.as_str().map(|s| s.as_bytes().to_vec()))
            .collect::<Option<_>>()
            .ok_or("vector_bad_input:values")?
    };
    match IdempotencyKey::parse_all(values.iter().map(Vec::as_slice)) {
        Ok(Some(key)) => Ok(Value::String(key.as_str().to_string())),
        Ok(None) => Ok(Value::Null),
        Err(e) => Err(String::from(e.code())),
    }
}
