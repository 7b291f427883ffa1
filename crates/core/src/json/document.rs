//! A small JSON document tree: what the configuration and the conformance vectors are read into,
//! and what vector answers are written from.
//!
//! Why not serde_json: the Envoy filter ships as wasm, and serde + serde_json were about 81 KB of
//! its 485 KB, plus about 20 KB of f64 printing that only serde's error messages pulled in. The
//! core needs little from a JSON tree (read an operator's configuration once, read vector inputs,
//! write vector answers), so this module does just that:
//!
//! - Numbers stay as their source text (checked against the RFC 8259 grammar) and convert to
//!   integers exactly on request ([`Value::as_u64`], ...). Nothing here touches floating point, so
//!   no float formatting code is linked.
//! - The parser recurses one frame per container and refuses nesting deeper than [`MAX_DEPTH`], so
//!   hostile text cannot exhaust the stack. It never panics; every error carries a byte offset.
//! - Objects keep their members in document order ([`Value::Object`] is a list), and a key given
//!   twice is refused: in a configuration, `"ttl"` twice has no obvious meaning.
//! - [`Value`]'s `Display` writes compact JSON, escaping strings as RFC 8259 requires (the same
//!   bytes serde_json writes).
//!
//! Request bodies never come here: fingerprints stream through [`super::JsonHasher`], which builds
//! no tree.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};

/// Deepest container nesting [`Value::parse`] accepts; the top-level array/object is depth 1.
pub const MAX_DEPTH: usize = 64;

/// A parsed (or built) JSON value.
///
/// Equality is structural and order-sensitive for object members; numbers compare by their text
/// (`1` and `1.0` differ).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Value>),
    /// Members in document order; keys are unique in parsed documents.
    Object(Vec<(String, Value)>),
}

/// A JSON number, kept as text that matches the RFC 8259 `number` grammar.
///
/// Built only by the parser or from integers, so a [`Value`] always serialises to valid JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Number(String);

impl Number {
    /// The number as written in the source (or as the integer it was built from).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value if the number is written as a non-negative integer that fits (no fraction, no
    /// exponent: `1.0` and `1e3` are `None`, as in serde_json).
    pub fn as_u64(&self) -> Option<u64> {
        let text = self.0.as_str();
        if text.bytes().all(|b| b.is_ascii_digit()) {
            text.parse().ok()
        } else {
            None
        }
    }

    /// The value if the number is written as an integer that fits in an `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        let text = self.0.as_str();
        let digits = text.strip_prefix('-').unwrap_or(text);
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            text.parse().ok()
        } else {
            None
        }
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

macro_rules! number_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Number {
            fn from(n: $t) -> Number {
                Number(alloc::format!("{n}"))
            }
        }
        impl From<$t> for Value {
            fn from(n: $t) -> Value {
                Value::Number(Number::from(n))
            }
        }
    )*};
}
number_from!(u8, u16, u32, u64, usize, i32, i64);

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.into())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}

/// `None` is `null`.
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(items: Vec<T>) -> Value {
        Value::Array(items.into_iter().map(Into::into).collect())
    }
}

impl<T: Clone + Into<Value>> From<&[T]> for Value {
    fn from(items: &[T]) -> Value {
        Value::Array(items.iter().cloned().map(Into::into).collect())
    }
}

/// A pair is a two-element array (how header lists `[[name, value], ...]` are written).
impl<A: Into<Value>, B: Into<Value>> From<(A, B)> for Value {
    fn from((a, b): (A, B)) -> Value {
        Value::Array(alloc::vec![a.into(), b.into()])
    }
}

impl Value {
    /// Parses one JSON document (surrounding whitespace allowed, nothing else after the value).
    pub fn parse(text: &str) -> Result<Value, DocumentError> {
        let mut parser = Parser {
            text,
            bytes: text.as_bytes(),
            pos: 0,
        };
        parser.skip_ws();
        let value = parser.value(0)?;
        parser.skip_ws();
        if parser.pos < parser.bytes.len() {
            return Err(DocumentError::TrailingData { offset: parser.pos });
        }
        Ok(value)
    }

    /// An object from `(key, value)` pairs, in the order given. Keys are not checked for
    /// duplicates: the caller builds the document.
    pub fn object<K: Into<String>>(members: impl IntoIterator<Item = (K, Value)>) -> Value {
        Value::Object(members.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// The member `key` of an object; `None` for a missing key or a value that is not an object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_object()?
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_number(&self) -> Option<&Number> {
        match self {
            Value::Number(n) => Some(n),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&[(String, Value)]> {
        match self {
            Value::Object(members) => Some(members),
            _ => None,
        }
    }

    /// An integer number that fits a `u64` (see [`Number::as_u64`]).
    pub fn as_u64(&self) -> Option<u64> {
        self.as_number()?.as_u64()
    }

    /// An integer number that fits an `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_number()?.as_i64()
    }

    /// An integer number that fits a `u32`.
    pub fn as_u32(&self) -> Option<u32> {
        self.as_u64().and_then(|n| u32::try_from(n).ok())
    }

    /// An integer number that fits a `u16`.
    pub fn as_u16(&self) -> Option<u16> {
        self.as_u64().and_then(|n| u16::try_from(n).ok())
    }

    /// What kind of value this is, for error messages ("expected a string, found an array").
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        }
    }
}

/// Compact JSON (no whitespace), strings escaped per RFC 8259.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(true) => f.write_str("true"),
            Value::Bool(false) => f.write_str("false"),
            Value::Number(n) => f.write_str(n.as_str()),
            Value::String(s) => write_string(f, s),
            Value::Array(items) => {
                f.write_char('[')?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    fmt::Display::fmt(item, f)?;
                }
                f.write_char(']')
            }
            Value::Object(members) => {
                f.write_char('{')?;
                for (i, (key, value)) in members.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write_string(f, key)?;
                    f.write_char(':')?;
                    fmt::Display::fmt(value, f)?;
                }
                f.write_char('}')
            }
        }
    }
}

/// `"`, `\` and the controls below 0x20 are escaped (short forms where JSON has them, `\u00XX`
/// otherwise); everything else, including non-ASCII, is written as is.
fn write_string(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    f.write_char('"')?;
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let short = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0C => "\\f",
            0x00..=0x1F => "",
            _ => continue,
        };
        // `i` is an ASCII byte, so both slice ends are character boundaries.
        f.write_str(s.get(start..i).unwrap_or_default())?;
        if short.is_empty() {
            f.write_str("\\u00")?;
            f.write_char(char::from(HEX[usize::from(b >> 4)]))?;
            f.write_char(char::from(HEX[usize::from(b & 0xF)]))?;
        } else {
            f.write_str(short)?;
        }
        start = i + 1;
    }
    f.write_str(s.get(start..).unwrap_or_default())?;
    f.write_char('"')
}

/// Why a text is not a JSON document. Offsets count bytes from the start of the text.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentError {
    /// Any grammar violation not covered by a more specific variant.
    Syntax { offset: usize },
    /// The text ended inside a value, or held only whitespace; `offset` is the text's length.
    UnexpectedEnd { offset: usize },
    /// Something other than whitespace follows the value.
    TrailingData { offset: usize },
    /// A container opened at `offset` would be nested deeper than [`MAX_DEPTH`].
    TooDeep { offset: usize },
    /// An object repeats `key`; `offset` is where the repetition starts.
    DuplicateKey { offset: usize, key: String },
    /// Unknown escape, bad `\u` hex digit, or lone/mismatched UTF-16 surrogate.
    InvalidEscape { offset: usize },
    /// Unescaped byte below 0x20 inside a string.
    ControlCharacter { offset: usize },
}

impl DocumentError {
    /// Where in the text the problem is.
    pub fn offset(&self) -> usize {
        match self {
            DocumentError::Syntax { offset }
            | DocumentError::UnexpectedEnd { offset }
            | DocumentError::TrailingData { offset }
            | DocumentError::TooDeep { offset }
            | DocumentError::DuplicateKey { offset, .. }
            | DocumentError::InvalidEscape { offset }
            | DocumentError::ControlCharacter { offset } => *offset,
        }
    }
}

impl fmt::Display for DocumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DocumentError::Syntax { offset } => write!(f, "JSON syntax error at byte {offset}"),
            DocumentError::UnexpectedEnd { offset } => {
                write!(
                    f,
                    "JSON text ended at byte {offset} before the value was complete"
                )
            }
            DocumentError::TrailingData { offset } => {
                write!(f, "unexpected data after the JSON value at byte {offset}")
            }
            DocumentError::TooDeep { offset } => {
                write!(
                    f,
                    "JSON nesting deeper than {MAX_DEPTH} levels at byte {offset}"
                )
            }
            DocumentError::DuplicateKey { offset, key } => {
                write!(f, "duplicate key `{key}` at byte {offset}")
            }
            DocumentError::InvalidEscape { offset } => {
                write!(
                    f,
                    "invalid string escape or lone surrogate at byte {offset}"
                )
            }
            DocumentError::ControlCharacter { offset } => {
                write!(
                    f,
                    "unescaped control character in a JSON string at byte {offset}"
                )
            }
        }
    }
}

struct Parser<'t> {
    text: &'t str,
    bytes: &'t [u8],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn end(&self) -> DocumentError {
        DocumentError::UnexpectedEnd {
            offset: self.bytes.len(),
        }
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// Consumes `byte` (after whitespace) or reports what is there instead.
    fn expect(&mut self, byte: u8) -> Result<(), DocumentError> {
        self.skip_ws();
        match self.peek() {
            Some(b) if b == byte => {
                self.pos += 1;
                Ok(())
            }
            Some(_) => Err(DocumentError::Syntax { offset: self.pos }),
            None => Err(self.end()),
        }
    }

    /// One value starting at `pos`; `depth` containers enclose it.
    fn value(&mut self, depth: usize) -> Result<Value, DocumentError> {
        match self.peek() {
            None => Err(self.end()),
            Some(b'{' | b'[') if depth >= MAX_DEPTH => {
                Err(DocumentError::TooDeep { offset: self.pos })
            }
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string().map(Value::String),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number().map(Value::Number),
            Some(_) => Err(DocumentError::Syntax { offset: self.pos }),
        }
    }

    fn literal(&mut self, word: &str, value: Value) -> Result<Value, DocumentError> {
        for want in word.bytes() {
            match self.peek() {
                Some(b) if b == want => self.pos += 1,
                Some(_) => return Err(DocumentError::Syntax { offset: self.pos }),
                None => return Err(self.end()),
            }
        }
        Ok(value)
    }

    fn array(&mut self, depth: usize) -> Result<Value, DocumentError> {
        self.pos += 1; // `[`
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                Some(_) => return Err(DocumentError::Syntax { offset: self.pos }),
                None => return Err(self.end()),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, DocumentError> {
        self.pos += 1; // `{`
        let mut members: Vec<(String, Value)> = Vec::new();
        let mut key_offsets = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(members));
        }
        loop {
            self.skip_ws();
            match self.peek() {
                Some(b'"') => {}
                Some(_) => return Err(DocumentError::Syntax { offset: self.pos }),
                None => return Err(self.end()),
            }
            key_offsets.push(self.pos);
            let key = self.string()?;
            self.expect(b':')?;
            self.skip_ws();
            let value = self.value(depth)?;
            members.push((key, value));
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                Some(_) => return Err(DocumentError::Syntax { offset: self.pos }),
                None => return Err(self.end()),
            }
        }
        if let Some(i) = first_repeat(&members) {
            return Err(DocumentError::DuplicateKey {
                offset: key_offsets.get(i).copied().unwrap_or(self.pos),
                key: members.swap_remove(i).0,
            });
        }
        Ok(Value::Object(members))
    }

    /// A string starting at the opening quote, decoded.
    fn string(&mut self) -> Result<String, DocumentError> {
        self.pos += 1; // `"`
        let mut out = String::new();
        loop {
            let start = self.pos;
            while matches!(self.peek(), Some(b) if b >= 0x20 && b != b'"' && b != b'\\') {
                self.pos += 1;
            }
            // Both ends sit before an ASCII byte (or at the end), so they are char boundaries.
            out.push_str(self.text.get(start..self.pos).unwrap_or_default());
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    out.push(self.escape()?);
                }
                Some(_) => return Err(DocumentError::ControlCharacter { offset: self.pos }),
                None => return Err(self.end()),
            }
        }
    }

    /// The character an escape stands for (the backslash has been consumed).
    fn escape(&mut self) -> Result<char, DocumentError> {
        let Some(b) = self.peek() else {
            return Err(self.end());
        };
        self.pos += 1;
        Ok(match b {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => return self.unicode_escape(),
            _ => {
                return Err(DocumentError::InvalidEscape {
                    offset: self.pos - 1,
                })
            }
        })
    }

    /// `XXXX` after `\u`, and the low half after a high surrogate.
    fn unicode_escape(&mut self) -> Result<char, DocumentError> {
        let unit = self.hex4()?;
        let scalar = if (0xD800..=0xDBFF).contains(&unit) {
            for want in [b'\\', b'u'] {
                match self.peek() {
                    Some(b) if b == want => self.pos += 1,
                    Some(_) => return Err(DocumentError::InvalidEscape { offset: self.pos }),
                    None => return Err(self.end()),
                }
            }
            let at = self.pos;
            let low = self.hex4()?;
            if !(0xDC00..=0xDFFF).contains(&low) {
                return Err(DocumentError::InvalidEscape { offset: at });
            }
            0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
        } else {
            unit
        };
        // `None` exactly for a lone low surrogate.
        char::from_u32(scalar).ok_or(DocumentError::InvalidEscape {
            offset: self.pos - 4,
        })
    }

    fn hex4(&mut self) -> Result<u32, DocumentError> {
        let mut unit = 0;
        for _ in 0..4 {
            let digit = match self.peek() {
                Some(b @ b'0'..=b'9') => b - b'0',
                Some(b @ b'a'..=b'f') => b - b'a' + 10,
                Some(b @ b'A'..=b'F') => b - b'A' + 10,
                Some(_) => return Err(DocumentError::InvalidEscape { offset: self.pos }),
                None => return Err(self.end()),
            };
            unit = (unit << 4) | u32::from(digit);
            self.pos += 1;
        }
        Ok(unit)
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, kept as text.
    fn number(&mut self) -> Result<Number, DocumentError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            Some(_) => return Err(DocumentError::Syntax { offset: self.pos }),
            None => return Err(self.end()),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            self.some_digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            self.some_digits()?;
        }
        let text = self.text.get(start..self.pos).unwrap_or_default();
        Ok(Number(text.into()))
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
    }

    /// At least one digit.
    fn some_digits(&mut self) -> Result<(), DocumentError> {
        match self.peek() {
            Some(b'0'..=b'9') => {
                self.digits();
                Ok(())
            }
            Some(_) => Err(DocumentError::Syntax { offset: self.pos }),
            None => Err(self.end()),
        }
    }
}

/// Index of the first member whose key an earlier member already used. Sorting indices keeps this
/// O(n log n), so an object with many members costs no more than it takes to read.
fn first_repeat(members: &[(String, Value)]) -> Option<usize> {
    if members.len() < 2 {
        return None;
    }
    let key = |i: usize| members.get(i).map(|(k, _)| k.as_str());
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_unstable_by(|&a, &b| key(a).cmp(&key(b)).then(a.cmp(&b)));
    order
        .windows(2)
        .filter_map(|pair| match *pair {
            [a, b] if key(a) == key(b) => Some(b),
            _ => None,
        })
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn parse(text: &str) -> Result<Value, DocumentError> {
        Value::parse(text)
    }

    #[test]
    fn parses_every_kind_and_keeps_member_order() {
        let v = parse(r#" {"b": [1, -2.5e3, true, false, null], "a": "x\ty", "c": {}} "#).unwrap();
        let members = v.as_object().unwrap();
        assert_eq!(members[0].0, "b");
        assert_eq!(members[1].0, "a");
        assert_eq!(v.get("a").and_then(Value::as_str), Some("x\ty"));
        let list = v.get("b").and_then(Value::as_array).unwrap();
        assert_eq!(list[0].as_u64(), Some(1));
        assert_eq!(list[1].as_number().map(Number::as_str), Some("-2.5e3"));
        assert_eq!(list[1].as_u64(), None);
        assert_eq!(list[2], Value::Bool(true));
        assert!(list[4].is_null());
        assert_eq!(
            v.to_string(),
            r#"{"b":[1,-2.5e3,true,false,null],"a":"x\ty","c":{}}"#
        );
    }

    #[test]
    fn integers_are_exact() {
        assert_eq!(
            parse("18446744073709551615").unwrap().as_u64(),
            Some(u64::MAX)
        );
        assert_eq!(parse("18446744073709551616").unwrap().as_u64(), None);
        assert_eq!(
            parse("-9223372036854775808").unwrap().as_i64(),
            Some(i64::MIN)
        );
        assert_eq!(parse("-1").unwrap().as_u64(), None);
        assert_eq!(parse("1.0").unwrap().as_u64(), None);
        assert_eq!(parse("1e2").unwrap().as_i64(), None);
        assert_eq!(parse("65535").unwrap().as_u16(), Some(65535));
        assert_eq!(parse("65536").unwrap().as_u16(), None);
        assert_eq!(parse("65536").unwrap().as_u32(), Some(65536));
        assert_eq!(Value::from(u64::MAX).to_string(), "18446744073709551615");
    }

    #[test]
    fn strings_decode_escapes_and_surrogate_pairs() {
        let v = parse(r#""\"\\\/\b\f\n\r\t\u0041\u00e9\ud83d\ude00é""#).unwrap();
        assert_eq!(v.as_str(), Some("\"\\/\u{8}\u{c}\n\r\tAé😀é"));
        // Written back the way serde_json writes it.
        assert_eq!(v.to_string(), "\"\\\"\\\\/\\b\\f\\n\\r\\tAé😀é\"");
        assert_eq!(
            Value::from("\u{1}\u{1f}\u{7f}").to_string(),
            "\"\\u0001\\u001f\u{7f}\""
        );
    }

    #[test]
    fn errors_carry_offsets() {
        use DocumentError::*;
        let cases: &[(&str, DocumentError)] = &[
            ("", UnexpectedEnd { offset: 0 }),
            ("   ", UnexpectedEnd { offset: 3 }),
            ("[1,", UnexpectedEnd { offset: 3 }),
            ("{\"a\"", UnexpectedEnd { offset: 4 }),
            ("tru", UnexpectedEnd { offset: 3 }),
            ("trux", Syntax { offset: 3 }),
            ("{ttl: 1}", Syntax { offset: 1 }),
            ("[1,]", Syntax { offset: 3 }),
            ("{\"a\":1,}", Syntax { offset: 7 }),
            ("01", TrailingData { offset: 1 }),
            ("1.", UnexpectedEnd { offset: 2 }),
            ("1.x", Syntax { offset: 2 }),
            ("-", UnexpectedEnd { offset: 1 }),
            ("+1", Syntax { offset: 0 }),
            ("1 2", TrailingData { offset: 2 }),
            ("\"a\u{1}\"", ControlCharacter { offset: 2 }),
            ("\"\\x\"", InvalidEscape { offset: 2 }),
            ("\"\\u12g4\"", InvalidEscape { offset: 5 }),
            ("\"\\ud800\"", InvalidEscape { offset: 7 }),
            ("\"\\ud800\\u0041\"", InvalidEscape { offset: 9 }),
            ("\"\\udc00\"", InvalidEscape { offset: 3 }),
            (
                "{\"a\":1,\"b\":2,\"a\":3}",
                DuplicateKey {
                    offset: 13,
                    key: "a".into(),
                },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).as_ref(), Err(want), "{text:?}");
        }
    }

    #[test]
    fn nesting_is_bounded() {
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(parse(&ok).is_ok());
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert_eq!(
            parse(&deep),
            Err(DocumentError::TooDeep { offset: MAX_DEPTH })
        );
        // Far deeper than any stack would survive unbounded: refused, not a crash.
        let hostile = "[{\"a\":".repeat(100_000);
        assert!(matches!(
            parse(&hostile),
            Err(DocumentError::TooDeep { .. })
        ));
    }

    #[test]
    fn builders_write_json() {
        let v = Value::object([
            ("n", Value::from(7u16)),
            ("s", Value::from(Some("x"))),
            ("none", Value::from(None::<u64>)),
            ("pairs", Value::from(alloc::vec![("a", "b")])),
        ]);
        assert_eq!(
            v.to_string(),
            r#"{"n":7,"s":"x","none":null,"pairs":[["a","b"]]}"#
        );
        assert_eq!(parse(&v.to_string()), Ok(v));
    }
}
