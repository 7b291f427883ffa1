//! Reading typed fields out of a vector's `input`, with `vector_*` error codes for malformed inputs.

use crate::request::json::Value;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// A required string field.
pub fn str_field<'a>(input: &'a Value, name: &str) -> Result<&'a str, String> {
    input
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("vector_bad_input:{name}"))
}

/// An optional string field (absent or null → `None`).
pub fn opt_str_field<'a>(input: &'a Value, name: &str) -> Result<Option<&'a str>, String> {
    match input.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("vector_bad_input:{name}")),
    }
}

/// A required unsigned integer field.
pub fn u64_field(input: &Value, name: &str) -> Result<u64, String> {
    input
        .get(name)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("vector_bad_input:{name}"))
}

/// A byte string given as UTF-8 text under `name` or as hex under `name_hex`; absent → `None`.
pub fn bytes_field(input: &Value, name: &str) -> Result<Option<Vec<u8>>, String> {
    if let Some(text) = input.get(name) {
        return text
            .as_str()
            .map(|s| Some(s.as_bytes().to_vec()))
            .ok_or_else(|| format!("vector_bad_input:{name}"));
    }
    let hex_name = format!("{name}_hex");
    match input.get(&hex_name) {
        None => Ok(None),
        Some(hex) => hex
            .as_str()
            .and_then(crate::hash::from_hex)
            .map(Some)
            .ok_or_else(|| format!("vector_bad_input:{hex_name}")),
    }
}

/// The policy a case runs under: `input.policy` is a configuration document (absent → defaults).
pub fn policy_field(input: &Value) -> Result<crate::policy::Policy, String> {
    match input.get("policy") {
        None | Some(Value::Null) => Ok(crate::policy::Policy::defaults()),
        Some(config) => crate::policy::Policy::from_json(&config.to_string(), &|_| None)
            .map_err(|e| format!("vector_bad_policy:{e}")),
    }
}

/// Fingerprints in decision vectors are symbolic: `"A"` stands for 32 bytes of `A`, so cases read
/// as "same payload" / "other payload" without spelling hashes out.
pub fn fingerprint_label(
    input: &Value,
    name: &str,
) -> Result<crate::request::fingerprint::Fingerprint, String> {
    let label = str_field(input, name)?;
    match label.as_bytes() {
        [byte] => Ok(crate::request::fingerprint::Fingerprint([*byte; 32])),
        _ => Err(format!("vector_bad_input:{name}")),
    }
}

/// `[[name, value], ...]` header lists.
pub fn header_pairs(input: &Value, name: &str) -> Result<Vec<(String, String)>, String> {
    let Some(list) = input.get(name) else {
        return Ok(Vec::new());
    };
    list.as_array()
        .ok_or_else(|| format!("vector_bad_input:{name}"))?
        .iter()
        .map(|pair| match pair.as_array() {
            Some([Value::String(n), Value::String(v)]) => Ok((n.clone(), v.clone())),
            _ => Err(format!("vector_bad_input:{name}")),
        })
        .collect()
}

/// Splits `body` at the offsets in a vector's `chunks` (absent → one chunk), so every host feeds
/// an incremental API the same pieces.
pub fn split_chunks<'b>(body: &'b [u8], chunks: Option<&Value>) -> Result<Vec<&'b [u8]>, String> {
    let offsets: Vec<u64> = match chunks {
        None => Vec::new(),
        Some(list) => list
            .as_array()
            .ok_or("vector_bad_input:chunks")?
            .iter()
            .map(Value::as_u64)
            .collect::<Option<_>>()
            .ok_or("vector_bad_input:chunks")?,
    };
    Ok(split_at_offsets(body, offsets))
}

/// Splits `body` at `offsets` (any order; offsets past the end are ignored, repeated ones give
/// empty chunks). Hosts that read `chunks` with their own JSON library call this directly.
pub fn split_at_offsets(body: &[u8], offsets: impl IntoIterator<Item = u64>) -> Vec<&[u8]> {
    let mut offsets: Vec<usize> = offsets
        .into_iter()
        .filter_map(|o| usize::try_from(o).ok())
        .filter(|&o| o <= body.len())
        .collect();
    offsets.sort_unstable();
    let mut parts = Vec::new();
    let mut start = 0;
    for offset in offsets {
        parts.push(body.get(start..offset).unwrap_or_default());
        start = offset;
    }
    parts.push(body.get(start..).unwrap_or_default());
    parts
}
