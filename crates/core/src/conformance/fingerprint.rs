//! Group `fingerprint`: input `{"policy"?: {"fingerprint": {...}}, "method", "path",
//! "headers"?: [[name, value]], "body"|"body_hex"?, "chunks"?}`; output the fingerprint (hex).

use crate::conformance::{bytes_field, header_pairs, policy_field, str_field, Outcome};
use crate::hash::to_hex;
use crate::request::fingerprint::FingerprintBuilder;
use crate::request::json::Value;
use alloc::string::{String, ToString};

pub fn eval(input: &Value) -> Outcome {
    let policy = policy_field(input)?;
    let headers = header_pairs(input, "headers")?;
    let body = bytes_field(input, "body")?.unwrap_or_default();
    let mut builder = FingerprintBuilder::new(
        &policy.fingerprint,
        str_field(input, "method")?,
        str_field(input, "path")?,
        headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes())),
    );
    for chunk in crate::conformance::split_chunks(&body, input.get("chunks"))? {
        builder.update(chunk).map_err(|e| e.code().to_string())?;
    }
    builder
        .finish()
        .map(|fp| Value::String(to_hex(&fp.0)))
        .map_err(|e| String::from(e.code()))
}
