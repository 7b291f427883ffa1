//! Group `target` (browser-edge parity: the browser and the edge spell a request alike). Input:
//! `{"policy"?: config, "method": as an app gives it to `fetch`, "path": path and query as sent,
//! "headers"?: [[name, value]], "body"|"body_hex"?}`. Output what the edge does with the request
//! `fetch` sends: `null` when no route guards it, else `{"method", "path", "fingerprint"}` — the
//! method on the wire ([`crate::request::target::sent_method`]), the path its fingerprint hashes
//! ([`crate::policy::Matched::target`]) and the fingerprint (hex). The filter's own request path
//! calls the same two functions.

use crate::conformance::{bytes_field, header_pairs, policy_field, str_field, Outcome};
use crate::hash::to_hex;
use crate::request::fingerprint::FingerprintBuilder;
use crate::request::json::Value;
use alloc::string::String;

pub fn eval(input: &Value) -> Outcome {
    let policy = policy_field(input)?;
    let method = crate::request::target::sent_method(str_field(input, "method")?);
    let raw = str_field(input, "path")?;
    let Some(matched) = policy.match_request(method, raw) else {
        return Ok(Value::Null);
    };
    let path = matched.target(raw);
    let headers = header_pairs(input, "headers")?;
    let body = bytes_field(input, "body")?.unwrap_or_default();
    let mut builder = FingerprintBuilder::new(
        &policy.fingerprint,
        method,
        &path,
        headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes())),
    );
    builder.update(&body).map_err(|e| String::from(e.code()))?;
    let fingerprint = builder.finish().map_err(|e| String::from(e.code()))?;
    Ok(object! {
        "method" => method,
        "path" => &*path,
        "fingerprint" => to_hex(&fingerprint.0),
    })
}
