//! A small JSON document tree: what the configuration and the conformance vectors are read into,
//! and what vector answers are written from.
//!
//! Why not serde_json: the Envoy filter ships as wasm, and serde + serde_json were about 81 KB of
//! its 485 KB, plus about 20 KB of f64 printing that only serde's error messages pulled in. The
//! core needs little from a JSON tree (read an operator's configuration once, read vector inputs,
//! write vector answers), so this module does just that:
//!
//! - The grammar is the core's one tokenizer (`tokenizer.rs`), the hasher's too: the same limits
//!   (nesting up to [`MAX_DEPTH`], numbers up to 64 bytes and within 10^±9999), the same
//!   [`JsonError`] with byte offsets. This module only builds the tree from its events, with an
//!   explicit stack: no recursion, no panic.
//! - Numbers stay as their source text and convert to integers exactly on request
//!   ([`Value::as_u64`], ...). Nothing here touches floating point, so no float formatting code
//!   is linked.
//! - Objects keep their members in document order ([`Value::Object`] is a list), and a key given
//!   twice is refused: in a configuration, `"ttl"` twice has no obvious meaning.
//! - [`Value`]'s `Display` writes compact JSON, escaping strings as RFC 8259 requires (the same
//!   bytes serde_json writes).
//!
//! Request bodies never come here: fingerprints stream through [`crate::JsonHasher`], which builds
//! no tree.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};

use crate::hasher::{Consumer, Frame};
use crate::number::Decimal;
use crate::pointer::JsonPointer;
use crate::sink::{Kind, Literal, Run, Sink};
use crate::tokenizer::Tokenizer;
use crate::{JsonError, JsonLimits};

/// Deepest container nesting [`Value::parse`] accepts; the top-level array/object is depth 1.
pub const MAX_DEPTH: usize = JsonLimits::DEFAULT.max_depth as usize;

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

    /// The number's value as text, one spelling per value (`1e2`, `100.0` → `100`; `1.5` →
    /// `15e-1`): see `number::value_text`. Integers up to `plain_max` digits are written plainly.
    pub fn value_text(&self, plain_max: usize) -> Option<String> {
        crate::number::value_text(&self.0, plain_max).and_then(|v| String::from_utf8(v).ok())
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
    /// Parses one JSON document (surrounding whitespace allowed, nothing else after the value),
    /// within [`JsonLimits::DEFAULT`].
    pub fn parse(text: &str) -> Result<Value, JsonError> {
        let mut tokens = Tokenizer::<Frame>::new(JsonLimits::DEFAULT);
        let mut tree = Builder {
            text,
            stack: Vec::new(),
            string: Vec::new(),
            key_at: 0,
            root: None,
        };
        tokens.feed(text.as_bytes(), &mut Consumer::Tree(&mut tree))?;
        tokens.finish(&mut Consumer::Tree(&mut tree))?;
        tree.root.ok_or(JsonError::Internal)
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

// Here rather than in `pointer.rs`: the pointers stand below the hasher, which stands below the
// document reader.
impl JsonPointer {
    /// The value this pointer selects in a parsed document (RFC 6901 §4), if any: object members
    /// by key, array elements only by a canonical decimal index.
    pub fn resolve<'v>(&self, doc: &'v Value) -> Option<&'v Value> {
        let mut at = doc;
        for token in &self.tokens {
            at = match at {
                Value::Object(members) => members
                    .iter()
                    .find(|(k, _)| *k == token.key)
                    .map(|(_, v)| v)?,
                Value::Array(items) => items.get(usize::try_from(token.index?).ok()?)?,
                _ => return None,
            };
        }
        Some(at)
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

/// A text written as a JSON string (quoted and escaped like [`Value::String`], without building
/// one): for log lines that name a client's text, which then cannot break the line or fake
/// another. `Debug`'s quoting would do the same, but it brings its Unicode escaping tables
/// into the filter's `.wasm`.
#[derive(Debug, Clone, Copy)]
pub struct Quoted<'a>(pub &'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_string(f, self.0)
    }
}

/// `s` as a JSON string literal ([`crate::write::write_escaped`]: the one JSON string writer).
fn write_string(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_char('"')?;
    crate::write::write_escaped(f, s)?;
    f.write_char('"')
}

/// A container being filled.
enum Partial {
    Array(Vec<Value>),
    Object {
        members: Vec<(String, Value)>,
        /// Where each member's key starts, for a duplicate's offset.
        key_offsets: Vec<u64>,
        /// The key read, waiting for its value.
        key: Option<String>,
    },
}

/// The document reader's side of the tokenizer's events: the tree, built bottom-up.
pub(super) struct Builder<'t> {
    text: &'t str,
    stack: Vec<Partial>,
    /// The string being decoded.
    string: Vec<u8>,
    /// Where the key being decoded starts.
    key_at: u64,
    root: Option<Value>,
}

impl Builder<'_> {
    /// A complete value goes into its container (or becomes the document).
    fn put(&mut self, value: Value) -> Result<(), JsonError> {
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Partial::Array(items)) => items.push(value),
            Some(Partial::Object { members, key, .. }) => {
                members.push((key.take().ok_or(JsonError::Internal)?, value));
            }
        }
        Ok(())
    }
}

impl Sink for Builder<'_> {
    type Mark = ();

    fn element(&mut self, _depth: usize, _index: u64) {}

    fn open(&mut self, kind: Kind) {
        self.stack.push(match kind {
            Kind::Array => Partial::Array(Vec::new()),
            Kind::Object => Partial::Object {
                members: Vec::new(),
                key_offsets: Vec::new(),
                key: None,
            },
        });
    }

    fn close(&mut self, kind: Kind, (): (), _at: u64) -> Result<(), JsonError> {
        let value = match (kind, self.stack.pop()) {
            (Kind::Array, Some(Partial::Array(items))) => Value::Array(items),
            (
                Kind::Object,
                Some(Partial::Object {
                    mut members,
                    key_offsets,
                    ..
                }),
            ) => {
                if let Some(i) = first_repeat(&members) {
                    return Err(JsonError::DuplicateKey {
                        offset: key_offsets.get(i).copied().ok_or(JsonError::Internal)?,
                        key: Some(members.swap_remove(i).0),
                    });
                }
                Value::Object(members)
            }
            _ => return Err(JsonError::Internal),
        };
        self.put(value)
    }

    fn string_begin(&mut self, key: bool, at: u64) {
        self.string.clear();
        if key {
            self.key_at = at;
        }
    }

    fn text(&mut self, run: Run<'_>) {
        self.string.extend_from_slice(run.bytes());
    }

    fn text_nul(&mut self) {
        self.string.push(0);
    }

    fn string_end(&mut self, key: bool) -> Result<(), JsonError> {
        // The tokenizer passes only well-formed UTF-8.
        let text = String::from_utf8(core::mem::take(&mut self.string))
            .map_err(|_| JsonError::Internal)?;
        if !key {
            return self.put(Value::String(text));
        }
        let key_at = self.key_at;
        match self.stack.last_mut() {
            Some(Partial::Object {
                key, key_offsets, ..
            }) => {
                *key = Some(text);
                key_offsets.push(key_at);
                Ok(())
            }
            _ => Err(JsonError::Internal),
        }
    }

    fn number(&mut self, _value: Decimal<'_>, start: u64, end: u64) -> Result<(), JsonError> {
        let span = usize::try_from(start).ok().zip(usize::try_from(end).ok());
        let text = span
            .and_then(|(start, end)| self.text.get(start..end))
            .ok_or(JsonError::Internal)?;
        self.put(Value::Number(Number(text.into())))
    }

    fn literal(&mut self, literal: Literal) -> Result<(), JsonError> {
        self.put(match literal {
            Literal::Null => Value::Null,
            Literal::True => Value::Bool(true),
            Literal::False => Value::Bool(false),
        })
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
    // The core's small sort, not the standard library's: a few KB less in every `.wasm`.
    crate::sort::sort(&mut order, |&a, &b| (key(a), a) < (key(b), b));
    order
        .windows(2)
        .filter_map(|pair| match *pair {
            [a, b] if key(a) == key(b) => Some(b),
            _ => None,
        })
        .min()
}

#[cfg(test)]
mod tests;
