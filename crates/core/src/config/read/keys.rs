//! `key_format`, `key_mismatch` and `key_scope`, read the same way at the top level and on a
//! route ([`crate::config::keys`] compiles them).

use super::*;
use crate::config::keys::{KeyFormatConfig, KeyRulesConfig};
use crate::request::key_format::{KeyMismatch, KeyScope};

pub(super) const MISMATCHES: Choices<KeyMismatch, 2> = (
    ["refuse", "ignore"],
    [KeyMismatch::Refuse, KeyMismatch::Ignore],
);
pub(super) const SCOPES: Choices<KeyScope, 2> =
    (["route", "client"], [KeyScope::Route, KeyScope::Client]);

/// Reads field `which` (0 `key_format`, 1 `key_mismatch`, 2 `key_scope`, their order in the
/// sections' field lists) at `path` into `rules`.
pub(super) fn key_rule(
    path: &str,
    which: usize,
    value: &Value,
    rules: &mut KeyRulesConfig,
) -> Result<(), Shape> {
    match which {
        0 => rules.format = key_format(path, value)?,
        1 => rules.mismatch = opt_pick(path, value, &MISMATCHES)?,
        _ => rules.scope = opt_pick(path, value, &SCOPES)?,
    }
    Ok(())
}

/// `"uuid"`, `{"prefix": text}` or `{"pattern": text}`; `null` is "not given". A pattern is
/// compiled where the route is ([`crate::config::keys`]), to be refused at its field.
fn key_format(path: &str, value: &Value) -> Result<Option<KeyFormatConfig>, Shape> {
    const EXPECTED: &str = "expected \"uuid\", {\"prefix\": text} or {\"pattern\": text}";
    match value {
        Value::Null => Ok(None),
        Value::String(s) if s == "uuid" => Ok(Some(KeyFormatConfig::Uuid)),
        Value::String(s) => Err(shape(path, &["unknown format \"", s, "\"; ", EXPECTED])),
        Value::Object(members) => match members.as_slice() {
            [(key, prefix)] if key == "prefix" => Ok(Some(KeyFormatConfig::Prefix(string(
                &join(path, key),
                prefix,
            )?))),
            [(key, pattern)] if key == "pattern" => Ok(Some(KeyFormatConfig::Pattern(string(
                &join(path, key),
                pattern,
            )?))),
            _ => Err(shape(path, &[EXPECTED])),
        },
        other => Err(found(path, EXPECTED, other)),
    }
}
