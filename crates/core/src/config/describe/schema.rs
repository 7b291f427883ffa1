//! The description as a JSON Schema (draft-07, what VS Code's JSON service and
//! yaml-language-server read best): `additionalProperties: false` where the reader refuses unknown
//! members, `null` wherever it reads "not given", patterns for durations, sizes and shares.

use super::{section, Field, Section, Type, SECTIONS};
use crate::request::json::{write_string, Value};
use alloc::borrow::ToOwned;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// `Span`'s syntax (`time.rs`): digits and a unit, repeated, around the trimmed text.
const DURATION: &str = r"^\s*(?:[0-9]+(?:ms|s|m|h|d))+\s*$";
/// `parse_size`'s syntax (`config.rs`): digits, then a unit or none.
const SIZE: &str = r"\s*[0-9]+\s*(?:B|KiB|MiB|GiB|KB|MB|GB)?\s*";
/// A share's percentage (`shares.rs`): 1 to 100, then `%`.
const PERCENT: &str = r"\s*\+?0*(?:[1-9][0-9]?|100)\s*%";
/// `shares.pressure`: 0 to 100, then `%`.
const PRESSURE: &str = r"^\s*\+?0*(?:[0-9]{1,2}|100)\s*%$";
/// An HTTP header name: a token (RFC 9110).
const HEADER: &str = r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$";

/// A JSON value to write: members in the order given.
enum Json {
    Bool(bool),
    Int(u64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(&'static str, Json)>),
    /// An object whose member names are not static (properties, definitions).
    Map(Vec<(String, Json)>),
    /// A default, as the description spells it.
    Doc(Value),
}

fn text(s: &str) -> Json {
    Json::Str(s.to_owned())
}

fn obj(members: Vec<(&'static str, Json)>) -> Json {
    Json::Obj(members)
}

/// The schema document, pretty-printed, with a final newline.
pub(crate) fn render() -> String {
    let root = section("").map_or_else(Vec::new, section_members);
    let mut members = vec![
        ("$schema", text("http://json-schema.org/draft-07/schema#")),
        (
            "$comment",
            text("Generated from the core's description of the configuration (crates/core/src/config/describe): edit there, then run `make reference`."),
        ),
        ("title", text("idemgate filter configuration")),
    ];
    members.extend(root);
    let definitions = SECTIONS
        .iter()
        .filter(|s| !s.path.is_empty())
        .map(|s| (definition(s.path), obj(section_members(s))))
        .collect();
    members.push(("definitions", Json::Map(definitions)));
    let mut out = String::new();
    write(&mut out, &obj(members), 0);
    out.push('\n');
    out
}

/// A section's name under `definitions`: its path, `[]` spelt `_item` (a fragment may not hold
/// brackets).
pub(crate) fn definition(path: &str) -> String {
    path.replace("[]", "_item")
}

fn section_members(s: &Section) -> Vec<(&'static str, Json)> {
    let properties = s
        .fields
        .iter()
        .map(|f| (f.name.to_owned(), field(f, s.nullable)))
        .collect();
    let required: Vec<Json> = s
        .fields
        .iter()
        .filter(|f| f.required)
        .map(|f| text(f.name))
        .collect();
    let mut members = vec![("description", text(s.about)), ("type", text("object"))];
    members.push(("properties", Json::Map(properties)));
    if !required.is_empty() {
        members.push(("required", Json::Arr(required)));
    }
    members.push(("additionalProperties", Json::Bool(false)));
    members
}

fn field(f: &Field, nullable: bool) -> Json {
    let shape = shape(&f.ty);
    let shape = if nullable && !f.required {
        or_null(shape)
    } else {
        shape
    };
    let mut members = vec![("description", text(f.meaning))];
    if let Some(value) = default(f.default) {
        members.push(("default", Json::Doc(value)));
    }
    match shape {
        Json::Obj(rest) => members.extend(rest),
        other => members.push(("allOf", Json::Arr(vec![other]))),
    }
    obj(members)
}

/// The default as JSON, when the description gives it as one code span of JSON text.
pub(crate) fn default(shown: &str) -> Option<Value> {
    let inner = shown.strip_prefix('`')?.strip_suffix('`')?;
    if inner.contains('`') {
        return None;
    }
    Value::parse(inner).ok()
}

fn pattern(regex: &str) -> Json {
    text(regex)
}

fn shape(ty: &Type) -> Json {
    let string = |regex: String| obj(vec![("type", text("string")), ("pattern", pattern(&regex))]);
    let count_or = |regex: String| {
        obj(vec![
            ("type", Json::Arr(vec![text("integer"), text("string")])),
            ("minimum", Json::Int(0)),
            ("pattern", pattern(&regex)),
        ])
    };
    match ty {
        Type::Text => obj(vec![("type", text("string"))]),
        Type::Header => string(HEADER.to_owned()),
        Type::Path => string("^/".to_owned()),
        Type::Bool => obj(vec![("type", text("boolean"))]),
        Type::True => obj(vec![("const", Json::Bool(true))]),
        Type::False => obj(vec![("const", Json::Bool(false))]),
        Type::Choice(names) => obj(vec![
            ("type", text("string")),
            ("enum", Json::Arr(names.iter().map(|n| text(n)).collect())),
        ]),
        Type::Duration => string(DURATION.to_owned()),
        Type::Size => count_or(["^", SIZE, "$"].concat()),
        Type::Share => count_or(["^(?:off|", PERCENT, ")$"].concat()),
        Type::ByteShare => count_or(["^(?:off|", PERCENT, "|", SIZE, ")$"].concat()),
        Type::Pressure => string(PRESSURE.to_owned()),
        Type::Integer(min, max) => obj(vec![
            ("type", text("integer")),
            ("minimum", Json::Int(*min)),
            ("maximum", Json::Int(*max)),
        ]),
        Type::Array(item) => obj(vec![("type", text("array")), ("items", shape(item))]),
        Type::Tuple(items) => obj(vec![
            ("type", text("array")),
            ("items", Json::Arr(items.iter().map(shape).collect())),
            ("minItems", Json::Int(items.len() as u64)),
            ("maxItems", Json::Int(items.len() as u64)),
        ]),
        Type::Section(path) => obj(vec![(
            "$ref",
            Json::Str(["#/definitions/", &definition(path)].concat()),
        )]),
        Type::Member(name, value) => obj(vec![
            ("type", text("object")),
            (
                "properties",
                Json::Map(vec![((*name).to_owned(), shape(value))]),
            ),
            ("required", Json::Arr(vec![text(name)])),
            ("additionalProperties", Json::Bool(false)),
        ]),
        Type::OneOf(shapes) => obj(vec![(
            "oneOf",
            Json::Arr(shapes.iter().map(shape).collect()),
        )]),
        Type::Retired => obj(vec![("type", text("null"))]),
    }
}

/// `shape`, or `null` ("not given").
fn or_null(shape: Json) -> Json {
    let Json::Obj(mut members) = shape else {
        return shape;
    };
    let null = || text("null");
    let has = |members: &[(&str, Json)], key: &str| members.iter().any(|(k, _)| *k == key);
    if has(&members, "$ref") || has(&members, "const") {
        return obj(vec![(
            "anyOf",
            Json::Arr(vec![obj(members), obj(vec![("type", null())])]),
        )]);
    }
    for (key, value) in members.iter_mut() {
        match (*key, value) {
            ("type", Json::Str(t)) if t == "null" => {}
            ("type", value @ Json::Str(_)) => {
                let Json::Str(t) = core::mem::replace(value, Json::Bool(false)) else {
                    continue;
                };
                *value = Json::Arr(vec![Json::Str(t), null()]);
            }
            ("type", Json::Arr(types)) => types.push(null()),
            ("enum", Json::Arr(names)) => names.push(Json::Doc(Value::Null)),
            ("oneOf", Json::Arr(shapes)) => shapes.push(obj(vec![("type", null())])),
            _ => {}
        }
    }
    obj(members)
}

fn indent(out: &mut String, depth: usize) {
    out.push('\n');
    for _ in 0..depth {
        out.push_str("  ");
    }
}

fn write(out: &mut String, value: &Json, depth: usize) {
    match value {
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Int(n) => out.push_str(&alloc::format!("{n}")),
        Json::Str(s) => write_string(out, s),
        Json::Doc(v) => write_value(out, v),
        Json::Arr(items)
            if items
                .iter()
                .all(|i| matches!(i, Json::Str(_) | Json::Int(_) | Json::Doc(_))) =>
        {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write(out, item, depth);
            }
            out.push(']');
        }
        Json::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                indent(out, depth + 1);
                write(out, item, depth + 1);
            }
            indent(out, depth);
            out.push(']');
        }
        Json::Obj(members) => {
            let members: Vec<(&str, &Json)> = members.iter().map(|(k, v)| (*k, v)).collect();
            write_object(out, &members, depth);
        }
        Json::Map(members) => {
            let members: Vec<(&str, &Json)> =
                members.iter().map(|(k, v)| (k.as_str(), v)).collect();
            write_object(out, &members, depth);
        }
    }
}

fn write_object(out: &mut String, members: &[(&str, &Json)], depth: usize) {
    if members.is_empty() {
        out.push_str("{}");
        return;
    }
    out.push('{');
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        indent(out, depth + 1);
        write_string(out, key);
        out.push_str(": ");
        write(out, value, depth + 1);
    }
    indent(out, depth);
    out.push('}');
}

/// A parsed default, written compactly (`["POST", "PATCH"]`).
pub(super) fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(n.as_str()),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            for (i, (key, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string(out, key);
                out.push_str(": ");
                write_value(out, item);
            }
            out.push('}');
        }
    }
}
