//! The shapes a configuration's values must have, read with the path that names them: each reader
//! refuses a value of another shape with a [`Shape`] that says where and what was expected.

use super::*;

/// A shape error's message ([`ConfigError::Syntax`]), boxed: one word, so that every `?` of the
/// readers passes a pointer on rather than a whole `ConfigError`.
// The extra allocation is the point: a `Box` is one word, a `String` three.
#[allow(clippy::box_collection)]
pub(super) struct Shape(pub(super) Box<String>);

/// A shape error at `path` (empty for the document itself): the path, then `reason`'s pieces.
#[cold]
#[inline(never)]
pub(super) fn shape(path: &str, reason: &[&str]) -> Shape {
    let mut message = if path.is_empty() {
        super::super::copy("the document: ")
    } else {
        ["`", path, "`: "].concat()
    };
    message.push_str(&reason.concat());
    Shape(Box::new(message))
}

/// `{expected}, found {what value is}`.
#[cold]
#[inline(never)]
pub(super) fn found(path: &str, expected: &str, value: &Value) -> Shape {
    shape(path, &[expected, ", found ", value.kind()])
}

/// `names`, each between `quote`s, separated by `, `.
pub(super) fn quoted(names: &[&str], quote: &str) -> String {
    let mut out = String::new();
    for (i, name) in names.iter().enumerate() {
        let comma = if i > 0 { ", " } else { "" };
        out.push_str(&[comma, quote, name, quote].concat());
    }
    out
}

#[cold]
#[inline(never)]
pub(super) fn unknown(path: &str, key: &str, expected: &[&str]) -> Shape {
    shape(
        &join(path, key),
        &["unknown field, expected one of ", &quoted(expected, "`")],
    )
}

/// `path.key` (`key` alone at the top).
pub(super) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        return super::super::copy(key);
    }
    [path, ".", key].concat()
}

/// `path[i]`, an item's path.
pub(super) fn index(path: &str, i: usize) -> String {
    super::super::item(path, i, "")
}

pub(super) fn members<'v>(path: &str, value: &'v Value) -> Result<&'v [(String, Value)], Shape> {
    value
        .as_object()
        .ok_or_else(|| found(path, "expected an object", value))
}

pub(super) fn boolean(path: &str, value: &Value) -> Result<bool, Shape> {
    value
        .as_bool()
        .ok_or_else(|| found(path, "expected true or false", value))
}

pub(super) fn string(path: &str, value: &Value) -> Result<String, Shape> {
    match value.as_str() {
        Some(s) => Ok(super::super::copy(s)),
        None => Err(found(path, "expected a string", value)),
    }
}

/// A string; `null` is "not given", like a missing member.
pub(super) fn opt_string(path: &str, value: &Value) -> Result<Option<String>, Shape> {
    if value.is_null() {
        return Ok(None);
    }
    string(path, value).map(Some)
}

/// An array's items; `null` is "not given".
pub(super) fn opt_array<'v>(path: &str, value: &'v Value) -> Result<Option<&'v [Value]>, Shape> {
    if value.is_null() {
        return Ok(None);
    }
    match value.as_array() {
        Some(items) => Ok(Some(items)),
        None => Err(found(path, "expected an array", value)),
    }
}

/// An array of strings; item paths are `path[i]`.
pub(super) fn strings(path: &str, value: &Value) -> Result<Vec<String>, Shape> {
    let Some(items) = value.as_array() else {
        return Err(found(path, "expected an array", value));
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        out.push(string(&index(path, i), item)?);
    }
    Ok(out)
}

pub(super) fn opt_strings(path: &str, value: &Value) -> Result<Option<Vec<String>>, Shape> {
    if value.is_null() {
        return Ok(None);
    }
    strings(path, value).map(Some)
}

/// A non-negative integer up to `max` (spelled `max_text` in the message).
pub(super) fn integer(path: &str, value: &Value, max: u64, max_text: &str) -> Result<u64, Shape> {
    match value.as_u64() {
        Some(n) if n <= max => Ok(n),
        _ => {
            let found = match value {
                Value::Number(n) => n.as_str(),
                other => other.kind(),
            };
            Err(shape(
                path,
                &[
                    "expected an integer from 0 to ",
                    max_text,
                    ", found ",
                    found,
                ],
            ))
        }
    }
}

pub(super) fn u16_at(path: &str, value: &Value) -> Result<u16, Shape> {
    // In range: `integer` checked it.
    integer(path, value, u64::from(u16::MAX), "65535").map(|n| n as u16)
}

pub(super) fn opt_u16(path: &str, value: &Value) -> Result<Option<u16>, Shape> {
    if value.is_null() {
        return Ok(None);
    }
    u16_at(path, value).map(Some)
}

pub(super) fn opt_u32(path: &str, value: &Value) -> Result<Option<u32>, Shape> {
    if value.is_null() {
        return Ok(None);
    }
    // In range: `integer` checked it.
    integer(path, value, u64::from(u32::MAX), "4294967295").map(|n| Some(n as u32))
}

/// The position in `names` of the string `value` holds.
pub(super) fn choice(path: &str, value: &Value, names: &[&str]) -> Result<usize, Shape> {
    let Some(text) = value.as_str() else {
        return Err(shape(
            path,
            &[
                "expected one of ",
                &quoted(names, "\""),
                ", found ",
                value.kind(),
            ],
        ));
    };
    match names.iter().position(|name| *name == text) {
        Some(i) => Ok(i),
        None => Err(shape(
            path,
            &[
                "unknown value \"",
                text,
                "\", expected one of ",
                &quoted(names, "\""),
            ],
        )),
    }
}

/// One of `choices`; `null` is "not given".
pub(super) fn opt_pick<T: Copy, const N: usize>(
    path: &str,
    value: &Value,
    choices: &Choices<T, N>,
) -> Result<Option<T>, Shape> {
    if value.is_null() {
        return Ok(None);
    }
    let i = choice(path, value, &choices.0)?;
    Ok(choices.1.get(i).copied())
}

/// A byte count (integer) or a size as text (`"64KiB"`, checked later by `compile`); `null` is
/// "not given".
pub(super) fn opt_size(path: &str, value: &Value) -> Result<Option<Size>, Shape> {
    match value {
        Value::Null => Ok(None),
        Value::String(text) => Ok(Some(Size::Text(super::super::copy(text)))),
        Value::Number(n) => match n.as_u64() {
            Some(n) => Ok(Some(Size::Bytes(n))),
            None => Err(shape(
                path,
                &["expected a byte count (a non-negative integer) or a size such as \"64KiB\""],
            )),
        },
        other => Err(found(
            path,
            "expected a byte count or a size such as \"64KiB\"",
            other,
        )),
    }
}
