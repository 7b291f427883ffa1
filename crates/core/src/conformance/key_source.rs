//! Group `key_source`: input `{"route": {route config with key_from/key}, "headers"?: [[name,
//! value], ...], "body"|"body_hex", "chunks"?}`; output the key the route's admission finds (a
//! string, or `null` when there is none and none is required), else the refusal's code
//! (`crate::decision::admission`, `crate::request::key_source`).

use crate::conformance::{bytes_field, header_pairs, split_chunks, Outcome};
use crate::decision::admission::admit;
use crate::policy::Policy;
use crate::request::json::Value;
use crate::time::UnixMillis;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

pub fn eval(input: &Value) -> Outcome {
    let route = input.get("route").ok_or("vector_bad_input:route")?;
    let config = format!("{{\"routes\":[{route}]}}");
    let policy =
        Policy::from_json(&config, &|_| None).map_err(|e| format!("vector_bad_policy:{e}"))?;
    let route = policy.routes.first().ok_or("vector_bad_input:route")?;
    let headers: Vec<(String, String)> = header_pairs(input, "headers")?
        .into_iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), v))
        .collect();
    let lookup = |name: &str| -> Vec<&[u8]> {
        headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_bytes())
            .collect()
    };
    let body = bytes_field(input, "body")?.unwrap_or_default();
    let mut admission = admit(route, &lookup, UnixMillis(0)).map_err(|e| e.code().to_string())?;
    for chunk in split_chunks(&body, input.get("chunks"))? {
        admission.update(chunk);
    }
    match admission.finish() {
        Ok(Some(admitted)) => Ok(Value::String(admitted.key.as_str().into())),
        Ok(None) => Ok(Value::Null),
        Err(e) => Err(e.code().to_string()),
    }
}
