//! A JSON value as JS already parsed it (`JSON.parse`), carried across the boundary as an outline
//! the core's `Value` is rebuilt from: the browser module then needs no JSON document reader of its
//! own (≈ 3.5 KB of the module), and the value reaches the same `DeclaredTable::from_value` as the
//! edge's configuration, so both hosts refuse a table with the same code and text.
//!
//! The outline is a list of `u32`s and one buffer of UTF-8 text, written depth first:
//! `0` a value that is no string, array or object (null, a number, a boolean: nothing the core
//! reads from a table); `1, len` a string (the next `len` bytes of `text`); `2, n` an array of the
//! `n` values that follow; `3, n` an object of `n` members, each a key's byte length (its bytes
//! from `text`) and then its value. JS decides nothing here: it writes what it parsed.

use crate::error::{CodedError, INVALID_ARGUMENT};
use alloc::string::String;
use alloc::vec::Vec;
use idemgate_json::document::MAX_DEPTH;
use idemgate_json::Value;

/// Why an outline gave no value.
#[derive(Debug, PartialEq)]
pub enum Unread {
    /// No value at all (JS could not parse the text), or one nested deeper than the core's own
    /// reader accepts ([`MAX_DEPTH`]): a text the edge would refuse as not JSON.
    NotJson,
    /// An outline that does not add up: the JS layer's mistake, not the document's.
    Broken(CodedError),
}

/// The value an outline describes.
pub fn read(text: &[u8], shape: &[u32]) -> Result<Value, Unread> {
    if shape.is_empty() {
        return Err(Unread::NotJson);
    }
    let mut reader = Reader {
        text,
        shape: shape.iter(),
    };
    let value = reader.value(0)?;
    if reader.shape.len() != 0 || !reader.text.is_empty() {
        return Err(broken("the outline has more than one value"));
    }
    Ok(value)
}

/// The outline of `value` (what `js/table.js` writes from a parsed value), for Rust callers and
/// tests.
pub fn write(value: &Value, text: &mut Vec<u8>, shape: &mut Vec<u32>) {
    let string = |s: &str, text: &mut Vec<u8>, shape: &mut Vec<u32>| {
        shape.push(s.len() as u32);
        text.extend_from_slice(s.as_bytes());
    };
    match value {
        Value::String(s) => {
            shape.push(1);
            string(s, text, shape);
        }
        Value::Array(items) => {
            shape.extend([2, items.len() as u32]);
            for item in items {
                write(item, text, shape);
            }
        }
        Value::Object(members) => {
            shape.extend([3, members.len() as u32]);
            for (key, item) in members {
                string(key, text, shape);
                write(item, text, shape);
            }
        }
        _ => shape.push(0),
    }
}

fn broken(message: &'static str) -> Unread {
    Unread::Broken(CodedError::new(INVALID_ARGUMENT, message))
}

struct Reader<'a> {
    text: &'a [u8],
    shape: core::slice::Iter<'a, u32>,
}

impl Reader<'_> {
    fn next(&mut self) -> Result<u32, Unread> {
        self.shape
            .next()
            .copied()
            .ok_or_else(|| broken("the outline ends inside a value"))
    }

    fn string(&mut self) -> Result<String, Unread> {
        let len = self.next()? as usize;
        let (bytes, rest) = self
            .text
            .split_at_checked(len)
            .ok_or_else(|| broken("the outline's strings exceed its text"))?;
        self.text = rest;
        let text = core::str::from_utf8(bytes).map_err(|_| broken("not UTF-8 text"))?;
        Ok(String::from(text))
    }

    /// A value at `depth` containers deep (the top level is 0, as `MAX_DEPTH` counts).
    fn value(&mut self, depth: usize) -> Result<Value, Unread> {
        let kind = self.next()?;
        if kind == 1 {
            return Ok(Value::String(self.string()?));
        }
        if kind == 0 {
            return Ok(Value::Null);
        }
        if depth >= MAX_DEPTH {
            return Err(Unread::NotJson);
        }
        let count = self.next()?;
        let (mut items, mut members) = (Vec::new(), Vec::new());
        for _ in 0..count {
            match kind {
                2 => items.push(self.value(depth + 1)?),
                3 => members.push((self.string()?, self.value(depth + 1)?)),
                _ => return Err(broken("unknown kind in the outline")),
            }
        }
        match kind {
            2 => Ok(Value::Array(items)),
            3 => Ok(Value::Object(members)),
            _ => Err(broken("unknown kind in the outline")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) -> Result<Value, Unread> {
        let value = Value::parse(text).unwrap();
        let (mut bytes, mut shape) = (Vec::new(), Vec::new());
        write(&value, &mut bytes, &mut shape);
        read(&bytes, &shape)
    }

    #[test]
    fn a_value_comes_back_as_written_but_scalars_are_null() {
        let text = r#"{"a": ["x", ["é", "y"], {}], "b": {"c": ""}, "n": 5, "t": true}"#;
        let back = round_trip(text).unwrap();
        let mut want = Value::parse(text).unwrap();
        if let Value::Object(members) = &mut want {
            members[2].1 = Value::Null;
            members[3].1 = Value::Null;
        }
        assert_eq!(back, want);
    }

    #[test]
    fn too_deep_or_nothing_is_not_json_and_a_bad_outline_is_an_argument_error() {
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(round_trip(&ok).is_ok());
        let mut deep = [2u32, 1].repeat(MAX_DEPTH + 1);
        deep.push(0);
        assert_eq!(read(b"", &deep), Err(Unread::NotJson));
        assert_eq!(read(b"", &[]), Err(Unread::NotJson));
        for (text, shape) in [
            (&b""[..], &[2u32, 2, 0][..]),
            (b"ab", &[1, 3]),
            (b"ab", &[1, 1]),
            (b"", &[0, 0]),
            (b"\xff", &[1, 1]),
            (b"", &[7, 0]),
        ] {
            match read(text, shape) {
                Err(Unread::Broken(e)) => assert_eq!(e.code, INVALID_ARGUMENT, "{shape:?}"),
                other => panic!("{shape:?}: {other:?}"),
            }
        }
    }
}
