//! Group `fingerprint`: input `{"policy"?: {"fingerprint": {...}, "routes"?: [...]}, "method",
//! "path", "headers"?: [[name, value]], "body"|"body_hex"?, "chunks"?}`; output the fingerprint
//! (hex). On a route with a `precondition`, `If-Match` is part of it, as at the edge.

use crate::conformance::{bytes_field, header_pairs, policy_field, str_field, Outcome};
use crate::hash::to_hex;
use crate::request::fingerprint::FingerprintBuilder;
use crate::request::json::Value;
use alloc::string::{String, ToString};

pub fn eval(input: &Value) -> Outcome {
    let policy = policy_field(input)?;
    let headers = header_pairs(input, "headers")?;
    let body = bytes_field(input, "body")?.unwrap_or_default();
    let (method, path) = (str_field(input, "method")?, str_field(input, "path")?);
    let pairs = headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes()));
    let mut builder = FingerprintBuilder::new(&policy.fingerprint, method, path, pairs.clone());
    let matched = policy.match_request(method, path);
    if let Some(rule) = matched.as_ref().and_then(|m| m.route.precondition.as_ref()) {
        rule.bind(&mut builder, pairs);
    }
    for chunk in crate::conformance::split_chunks(&body, input.get("chunks"))? {
        builder.update(chunk).map_err(|e| e.code().to_string())?;
    }
    builder
        .finish()
        .map(|fp| Value::String(to_hex(&fp.0)))
        .map_err(|e| String::from(e.code()))
}
