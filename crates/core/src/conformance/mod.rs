//! The conformance-vector evaluator: one function that turns a vector's `input` into the answer the
//! core gives. The native tests and the wasmtime harness (natively, and through the filter's test
//! build, whose one extra export wraps [`evaluate_json`]) call this same evaluator, so "the same
//! answer everywhere" is checked against one definition of what each group means (format:
//! `vectors/README.md`). Behind the non-default `conformance` feature: test scaffolding, never in a
//! shipped artifact.

use crate::request::json::Value;
use alloc::string::{String, ToString};

/// `object! { "key" => value, ... }`: an answer object, members in the order written, each value
/// converted with `Value::from` (what serde_json's `json!` did for these flat shapes).
macro_rules! object {
    ($($key:literal => $value:expr),+ $(,)?) => {
        $crate::request::json::Value::object(
            [$(($key, $crate::request::json::Value::from($value))),+]
        )
    };
}

mod fields;
mod groups;

pub use fields::{
    bytes_field, fingerprint_label, header_pairs, opt_str_field, policy_field, split_at_offsets,
    split_chunks, str_field, u64_field,
};

/// `Ok(value)` is compared with a vector's `{"ok": value}`, `Err(code)` with `{"error": code}`.
pub type Outcome = Result<Value, String>;

/// Every group this evaluator knows, in the order the vector files are documented.
pub const GROUPS: &[&str] = groups::NAMES;

/// Evaluates one vector input of `group`. An unknown group or a malformed input is an error code
/// starting with `vector_`, never a panic: hosts feed this from files they do not control.
pub fn evaluate(group: &str, input: &Value) -> Outcome {
    groups::dispatch(group, input)
}

/// Evaluates a case given as JSON text `{"group":..,"input":..}` and returns the outcome as JSON
/// text `{"ok":..}` or `{"error":..}`. This string-in, string-out form is what the `.wasm` exports
/// wrap, so a harness needs no knowledge of Rust types.
pub fn evaluate_json(case: &str) -> String {
    let outcome = match Value::parse(case) {
        Ok(case) => match case.get("group").and_then(Value::as_str) {
            Some(group) => evaluate(group, case.get("input").unwrap_or(&Value::Null)),
            None => Err("vector_missing_group".to_string()),
        },
        Err(_) => Err("vector_not_json".to_string()),
    };
    let wrapped = match outcome {
        Ok(value) => object! { "ok" => value },
        Err(code) => object! { "error" => code },
    };
    wrapped.to_string()
}
