//! Group `storage_key`: input `{"scope_source", "scope_value"|"scope_value_hex", "method", "route",
//! "key", "key_scope"?}` (`key` is a raw header value, parsed first; `key_scope` a route's, `"route"`
//! unless given); output the storage key (hex).

use crate::client::scope::{Scope, StorageKey};
use crate::conformance::{bytes_field, str_field, Outcome};
use crate::request::json::Value;
use crate::request::key::IdempotencyKey;
use crate::request::key_format::{KeyRules, KeyScope};
use alloc::string::String;

pub fn eval(input: &Value) -> Outcome {
    let source = str_field(input, "scope_source")?;
    let value = bytes_field(input, "scope_value")?.ok_or("vector_bad_input:scope_value")?;
    let key = IdempotencyKey::parse(str_field(input, "key")?.as_bytes())
        .map_err(|e| String::from(e.code()))?;
    let rules = KeyRules {
        scope: match input.get("key_scope").and_then(Value::as_str) {
            None | Some("route") => KeyScope::Route,
            Some("client") => KeyScope::Client,
            Some(_) => return Err("vector_bad_input:key_scope".into()),
        },
        ..KeyRules::DEFAULT
    };
    let (method, route) = rules.namespace(str_field(input, "method")?, str_field(input, "route")?);
    let derived = StorageKey::derive(
        Scope {
            source,
            value: &value,
        },
        method,
        route,
        &key,
    );
    Ok(Value::String(derived.to_hex()))
}
