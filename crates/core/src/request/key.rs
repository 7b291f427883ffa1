//! The `Idempotency-Key` header value (`docs/semantics.md` §1).
//!
//! The IETF draft makes the value a structured-field string (`"8e03…"`); most clients send it bare,
//! Stripe style. Both spell the same key, so `"abc"` and `abc` parse equal. Everything else is refused
//! with the one rule it broke, so a client developer can fix their request from the 400 alone.

use crate::text::{self, Text};
use alloc::string::String;
use core::fmt;

/// Longest key accepted, in characters after unquoting.
pub const MAX_KEY_LEN: usize = 255;

/// The header a key travels in unless configured otherwise (`header`; lowercase, as HTTP/2 sends it).
pub const HEADER: &str = "idempotency-key";

/// A validated key: 1 to 255 visible ASCII characters (0x21..=0x7e), unquoted.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Parses one header value, bare or as an RFC 8941 sf-string. Surrounding spaces and tabs are
    /// optional whitespace in HTTP and are ignored.
    pub fn parse(raw: &[u8]) -> Result<Self, KeyError> {
        let raw = trim_ows(raw);
        let unquoted = if raw.first() == Some(&b'"') {
            unquote(raw)?
        } else {
            raw.to_vec()
        };
        if unquoted.is_empty() {
            return Err(KeyError::Empty);
        }
        if unquoted.len() > MAX_KEY_LEN {
            return Err(KeyError::TooLong {
                len: unquoted.len(),
            });
        }
        if let Some(index) = unquoted.iter().position(|b| !(0x21..=0x7e).contains(b)) {
            return Err(if unquoted[index] >= 0x80 {
                KeyError::NonAscii { index }
            } else {
                KeyError::InvalidCharacter { index }
            });
        }
        // Every byte is visible ASCII, so this cannot fail; map the impossible case to an error
        // rather than a panic all the same.
        String::from_utf8(unquoted)
            .map(IdempotencyKey)
            .map_err(|_| KeyError::NonAscii { index: 0 })
    }

    /// Parses every occurrence of the header in one request. Absent → `Ok(None)`. The same key
    /// twice (a proxy that duplicated the header) is that key; two different keys are refused,
    /// since either choice could replay the wrong request.
    pub fn parse_all<'a, I>(values: I) -> Result<Option<Self>, KeyError>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let mut found: Option<IdempotencyKey> = None;
        for value in values {
            let key = IdempotencyKey::parse(value)?;
            match &found {
                Some(first) if *first != key => return Err(KeyError::Conflicting),
                Some(_) => {}
                None => found = Some(key),
            }
        }
        Ok(found)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Without leading and trailing optional whitespace (spaces and tabs, RFC 9110 §5.6.3).
pub(crate) fn trim_ows(mut raw: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = raw {
        raw = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = raw {
        raw = rest;
    }
    raw
}

/// RFC 8941 §4.2.5: `"` chars `"`, where chars are 0x20..=0x7e except `"` and `\`, and `\"`, `\\`.
fn unquote(raw: &[u8]) -> Result<alloc::vec::Vec<u8>, KeyError> {
    let mut out = alloc::vec::Vec::with_capacity(raw.len());
    let mut i = 1;
    while i < raw.len() {
        match raw[i] {
            b'\\' => {
                match raw.get(i + 1) {
                    Some(&c @ (b'"' | b'\\')) => out.push(c),
                    _ => return Err(KeyError::MalformedQuotedString),
                }
                i += 2;
            }
            b'"' => {
                return if i + 1 == raw.len() {
                    Ok(out)
                } else {
                    Err(KeyError::MalformedQuotedString)
                };
            }
            c if (0x20..=0x7e).contains(&c) => {
                out.push(c);
                i += 1;
            }
            // Non-ASCII or control bytes inside quotes: report them as the character rule.
            c => {
                return Err(if c >= 0x80 {
                    KeyError::NonAscii { index: out.len() }
                } else {
                    KeyError::InvalidCharacter { index: out.len() }
                })
            }
        }
    }
    Err(KeyError::MalformedQuotedString)
}

/// The rule a key broke. Each variant is one problem `type` at the edge and one JS error `code`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// No characters (after unquoting).
    Empty,
    /// More than [`MAX_KEY_LEN`] characters.
    TooLong { len: usize },
    /// A space, a control character or DEL at this index of the unquoted key.
    InvalidCharacter { index: usize },
    /// A byte outside ASCII at this index of the unquoted key.
    NonAscii { index: usize },
    /// Starts with `"` but is not a valid structured-field string.
    MalformedQuotedString,
    /// The header was sent more than once with different keys.
    Conflicting,
    /// A body field named as the key source holds an object, array, boolean or null.
    NotText,
}

impl KeyError {
    /// Stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            KeyError::Empty => "key_empty",
            KeyError::TooLong { .. } => "key_too_long",
            KeyError::InvalidCharacter { .. } => "key_invalid_character",
            KeyError::NonAscii { .. } => "key_non_ascii",
            KeyError::MalformedQuotedString => "key_malformed_quoted_string",
            KeyError::Conflicting => "key_conflicting",
            KeyError::NotText => "key_not_text",
        }
    }

    /// The same text as `Display`, without `core::fmt` (see `crate::text`); what the browser
    /// module shows.
    pub fn message(&self) -> String {
        text::message(|out| self.write_text(out))
    }

    fn write_text<T: Text>(&self, out: &mut T) -> fmt::Result {
        match self {
            KeyError::Empty => out.put("the Idempotency-Key is empty"),
            KeyError::TooLong { len } => {
                out.put_between("the Idempotency-Key has ", *len as u64, " characters")?;
                out.put_between("; at most ", MAX_KEY_LEN as u64, " are allowed")
            }
            KeyError::InvalidCharacter { index } => out.put_between(
                "the Idempotency-Key has a space or control character at position ",
                *index as u64,
                "; only visible ASCII is allowed",
            ),
            KeyError::NonAscii { index } => out.put_between(
                "the Idempotency-Key has a non-ASCII character at position ",
                *index as u64,
                "; only visible ASCII is allowed",
            ),
            KeyError::MalformedQuotedString => out.put(
                "the Idempotency-Key starts with a quote but is not a valid structured-field string",
            ),
            KeyError::Conflicting => {
                out.put("the Idempotency-Key header was sent more than once with different values")
            }
            KeyError::NotText => out.put(
                "the body field that carries the idempotency key is not a string or a number",
            ),
        }
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_text(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts with numbers, pinned: written without `write!`, they read as the `write!` ones did.
    #[test]
    fn messages_with_numbers_are_pinned() {
        let cases = [
            (
                KeyError::TooLong { len: 256 },
                "the Idempotency-Key has 256 characters; at most 255 are allowed",
            ),
            (
                KeyError::InvalidCharacter { index: 0 },
                "the Idempotency-Key has a space or control character at position 0; only visible ASCII is allowed",
            ),
            (
                KeyError::NonAscii { index: 17 },
                "the Idempotency-Key has a non-ASCII character at position 17; only visible ASCII is allowed",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(alloc::format!("{error}"), text);
            assert_eq!(error.message(), text);
        }
    }

    fn parse(s: &str) -> Result<String, &'static str> {
        IdempotencyKey::parse(s.as_bytes())
            .map(|k| k.as_str().into())
            .map_err(|e| e.code())
    }

    #[test]
    fn bare_and_quoted_are_the_same_key() {
        assert_eq!(parse("abc"), Ok("abc".into()));
        assert_eq!(parse("\"abc\""), Ok("abc".into()));
        assert_eq!(parse("  abc\t"), Ok("abc".into()));
        assert_eq!(parse(r#""a\"b\\c""#), Ok(r#"a"b\c"#.into()));
    }

    #[test]
    fn each_rule_has_its_error() {
        assert_eq!(parse(""), Err("key_empty"));
        assert_eq!(parse("\"\""), Err("key_empty"));
        assert_eq!(parse(&"a".repeat(256)), Err("key_too_long"));
        assert_eq!(parse(&"a".repeat(255)).map(|k| k.len()), Ok(255));
        assert_eq!(parse("a b"), Err("key_invalid_character"));
        assert_eq!(parse("\"a b\""), Err("key_invalid_character"));
        assert_eq!(parse("a\x01b"), Err("key_invalid_character"));
        assert_eq!(parse("a\x7fb"), Err("key_invalid_character"));
        assert_eq!(parse("é"), Err("key_non_ascii"));
        assert_eq!(parse("\"abc"), Err("key_malformed_quoted_string"));
        assert_eq!(parse("\"a\"b"), Err("key_malformed_quoted_string"));
        assert_eq!(parse(r#""a\x""#), Err("key_malformed_quoted_string"));
    }

    #[test]
    fn duplicates() {
        let same = [b"abc".as_slice(), b"\"abc\"".as_slice()];
        assert_eq!(
            IdempotencyKey::parse_all(same).map(|k| k.map(|k| k.0)),
            Ok(Some("abc".into()))
        );
        let different = [b"abc".as_slice(), b"abd".as_slice()];
        assert_eq!(
            IdempotencyKey::parse_all(different),
            Err(KeyError::Conflicting)
        );
        assert_eq!(IdempotencyKey::parse_all([]), Ok(None));
    }
}
