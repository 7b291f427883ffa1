//! Group `storage_key`: input `{"scope_source", "scope_value"|"scope_value_hex", "method", "route",
//! "key"}` (`key` is a raw header value, parsed first); output the storage key (hex).

use crate::client::scope::{Scope, StorageKey};
use crate::conformance::{bytes_field, str_field, Outcome};
use crate::request::json::Value;
use crate::request::key::IdempotencyKey;
use alloc::string::String;

pub fn eval(input: &Value) -> Outcome {
    let source = str_field(input, "scope_source")?;
    let value = bytes_field(input, "scope_value")?.ok_or("vector_bad_input:scope_value")?;
    let key = IdempotencyKey::parse(str_field(input, "key")?.as_bytes())
        .map_err(|e| String::from(e.code()))?;
    let derived = StorageKey::derive(
        Scope {
            source,
            value: &value,
        },
        str_field(input, "method")?,
        str_field(input, "route")?,
        &key,
    );
    Ok(Value::String(derived.to_hex()))
}
