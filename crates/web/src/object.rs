//! Typed results across the boundary: an export that answers more than one value
//! returns a plain JS object with named members (`{retry: false, reason: 'success'}`,
//! `{event, keepsKey}`), never a number whose meaning a table elsewhere decodes.
//!
//! The object is written here as JSON text and made by one imported JS function (`JSON.parse`):
//! one small import for every shape, no per-field glue, and a host without JavaScript (the
//! wasmtime harness) stubs that one import and reads the same text. The writer avoids `core::fmt`
//! (size); its strings are `idemgate_json::write_string`.

use alloc::string::String;
use idemgate_json as json;
use wasm_bindgen::prelude::*;

#[wasm_bindgen(inline_js = "export function idemgate_object(json) { return JSON.parse(json); }")]
extern "C" {
    fn idemgate_object(json: &str) -> JsValue;
}

/// A minimal JSON writer for the flat objects the exports answer.
#[derive(Debug, Default)]
pub struct Json(pub String);

impl Json {
    /// An object from `members`, each a name (plain ASCII, written as is) and a value.
    pub fn object(members: &[(&str, Member<'_>)]) -> Json {
        let mut out = Json(String::with_capacity(64));
        out.raw("{");
        for (i, (name, value)) in members.iter().enumerate() {
            if i > 0 {
                out.raw(",");
            }
            out.string(name);
            out.raw(":");
            match value {
                Member::Text(text) => out.string(text),
                Member::Number(n) => out.number(*n),
                Member::Bool(b) => out.raw(if *b { "true" } else { "false" }),
            }
        }
        out.raw("}");
        out
    }

    /// The JS object this text describes.
    pub fn into_js(self) -> JsValue {
        idemgate_object(&self.0)
    }

    pub fn raw(&mut self, text: &str) {
        self.0.push_str(text);
    }

    /// A JSON string, written by the core's one JSON string writer.
    pub fn string(&mut self, text: &str) {
        json::write_string(&mut self.0, text);
    }

    pub fn strings<'a>(&mut self, items: impl Iterator<Item = &'a str>) {
        self.0.push('[');
        for (i, item) in items.enumerate() {
            if i > 0 {
                self.0.push(',');
            }
            self.string(item);
        }
        self.0.push(']');
    }

    pub fn number(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for &d in &digits[at..] {
            self.0.push(char::from(d));
        }
    }
}

/// A member's value.
#[derive(Debug, Clone, Copy)]
pub enum Member<'a> {
    Text(&'a str),
    Number(u64),
    Bool(bool),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_json() {
        let json = Json::object(&[
            ("a", Member::Text("x\"y\\z\u{1}é")),
            ("n", Member::Number(30_000)),
            ("ok", Member::Bool(false)),
        ]);
        assert_eq!(json.0, r#"{"a":"x\"y\\z\u0001é","n":30000,"ok":false}"#);
        let parsed = idemgate_json::Value::parse(&json.0).unwrap();
        assert_eq!(
            parsed.get("a").and_then(|v| v.as_str()),
            Some("x\"y\\z\u{1}é")
        );
        let mut out = Json::default();
        for n in [0, 7, 10, u64::MAX] {
            out.number(n);
            out.raw(" ");
        }
        assert_eq!(out.0, "0 7 10 18446744073709551615 ");
        assert_eq!(Json::object(&[]).0, "{}");
    }
}
