//! Streaming canonical digests of `application/x-www-form-urlencoded` bodies (Stripe-style APIs).
//!
//! A retry must fingerprint equal to the original when its form carries the same pairs however
//! they are spelled, so the digest is defined over the decoded pairs: `+`, `%20` and a raw space
//! are one byte, `%40` and `@` are one byte, hex digits of an escape may be either case. The order
//! of distinct names does not matter (`a=1&b=2` = `b=2&a=1`); the order of a repeated name does
//! (`tag=x&tag=y` ≠ `tag=y&tag=x`, since `tag[]`-style lists are ordered).
//!
//! # Parsing (WHATWG `application/x-www-form-urlencoded`, strict about escapes)
//! The body is split at `&`; empty pieces are skipped (`a=1&&b=2` = `a=1&b=2`). A piece is split
//! at its first `=` into name and value; a piece without `=` has a name and *no* value, which is
//! kept distinct from an empty value (`flag` ≠ `flag=`: Rack and others read them differently).
//! In a name or value, `+` is a space and `%` must be followed by two hex digits, decoded to that
//! byte; any other byte stands for itself. Decoded bytes are compared as bytes (no charset, no
//! Unicode normalisation). A `%` not followed by two hex digits (`%zz`, `%4`, `%` at the end) is
//! refused with [`FormError::InvalidEscape`] at the offset of that `%`: it is not a form body, and
//! guessing (WHATWG keeps it literally, Rack refuses it) could make two different requests equal.
//! The first malformed escape decides, so the answer does not depend on chunking.
//!
//! # Digest: `H(E(pair_1) E(pair_2) ...)`
//! With `esc(x)` = `x` with each `00` byte written `00 01`, then `00 00`:
//! `E(pair)` = `esc(name)`, then `00` (no `=`) or `01 esc(value)`. Pairs are sorted by name
//! (bytewise), pairs with equal names keep their order in the body. An empty body (or one made of
//! `&` only) has no pairs: `H("")`. Every `E` is self-delimiting, so equal digests mean equal
//! sorted pair lists.
//!
//! # Memory
//! Pairs can only be ordered once the body has ended, so the decoded pairs are kept: their
//! encodings (at most twice the body: decoding never grows a byte, and a pair's framing bytes are
//! at most its `=` and `&` plus three) and one `usize` per pair. The worst case is a body of
//! one-byte pieces (`a&a&a…`): 2 bytes of encoding and half a `usize` per body byte, so at most
//! 4× the body on wasm32 (6× on 64-bit), before vector slack; the body itself is limited by
//! `max_request_body`. Nothing else grows: no recursion, no per-byte allocation.

use crate::hash::hex_digit;
use crate::text::{self, Text};
use alloc::vec::Vec;
use core::cmp::Ordering;
use core::fmt;
use idemgate_json::sort::sort;
use sha2::{Digest, Sha256};

/// Why a form body could not be hashed. Offsets count bytes from the start of the body.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormError {
    /// A `%` at `offset` is not followed by two hex digits.
    InvalidEscape { offset: u64 },
}

impl FormError {
    /// Stable code shared with the vectors, the browser module and problem bodies.
    pub fn code(&self) -> &'static str {
        match self {
            FormError::InvalidEscape { .. } => "form_invalid_escape",
        }
    }

    /// The same text as `Display`, without `core::fmt` (see `crate::text`).
    pub fn message(&self) -> alloc::string::String {
        text::message(|out| self.write_text(out))
    }

    pub(crate) fn write_text<T: Text>(&self, out: &mut T) -> fmt::Result {
        match self {
            FormError::InvalidEscape { offset } => out.put_between(
                "form body has a '%' not followed by two hex digits at byte ",
                *offset,
                "",
            ),
        }
    }
}

impl fmt::Display for FormError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_text(f)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Name,
    Value,
}

/// Chunk-fed digest of one form body (see the module docs for the digest and error rules).
pub struct FormHasher {
    /// Encoded pairs, in body order.
    out: Vec<u8>,
    /// Where each pair's encoding starts in `out`, in body order until `finish` sorts them.
    pairs: Vec<usize>,
    /// Start in `out` of the pair being read.
    current: usize,
    part: Part,
    /// Hex digits of a `%` escape read so far (0 = not in an escape) and their value.
    escape_len: u8,
    escape_value: u8,
    /// Body offset of the `%` of the escape being read.
    escape_at: u64,
    /// Body offset of the first byte of the next chunk.
    consumed: u64,
    error: Option<FormError>,
}

impl Default for FormHasher {
    fn default() -> Self {
        FormHasher::new()
    }
}

impl FormHasher {
    pub fn new() -> Self {
        FormHasher {
            out: Vec::new(),
            pairs: Vec::new(),
            current: 0,
            part: Part::Name,
            escape_len: 0,
            escape_value: 0,
            escape_at: 0,
            consumed: 0,
            error: None,
        }
    }

    /// Feeds the next chunk. After an error, every later call returns that same error.
    pub fn update(&mut self, chunk: &[u8]) -> Result<(), FormError> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        let result = self.run(chunk);
        self.consumed = self.consumed.saturating_add(chunk.len() as u64);
        if let Err(error) = &result {
            self.error = Some(error.clone());
        }
        result
    }

    /// Ends the body and returns the digest.
    pub fn finish(mut self) -> Result<[u8; 32], FormError> {
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        if self.escape_len > 0 {
            return Err(FormError::InvalidEscape {
                offset: self.escape_at,
            });
        }
        self.end_pair();
        let out = &self.out;
        // Name order, then body order: a total order, so any sort gives the one canonical list.
        sort(&mut self.pairs, |a, b| {
            name_of(out, *a).cmp(name_of(out, *b)).then(a.cmp(b)) == Ordering::Less
        });
        let mut sink = Sha256::new();
        for &start in &self.pairs {
            sink.update(out.get(start..pair_end(out, start)).unwrap_or_default());
        }
        Ok(sink.finalize().into())
    }

    fn run(&mut self, buf: &[u8]) -> Result<(), FormError> {
        let base = self.consumed;
        for (i, &b) in buf.iter().enumerate() {
            if self.escape_len > 0 {
                let Some(digit) = hex_digit(b) else {
                    return Err(FormError::InvalidEscape {
                        offset: self.escape_at,
                    });
                };
                self.escape_value = (self.escape_value << 4) | digit;
                self.escape_len += 1;
                if self.escape_len == 3 {
                    self.escape_len = 0;
                    self.byte(self.escape_value);
                }
                continue;
            }
            match b {
                b'&' => self.end_pair(),
                b'=' if self.part == Part::Name => {
                    self.out.extend_from_slice(&[0, 0, 1]);
                    self.part = Part::Value;
                }
                b'+' => self.byte(b' '),
                b'%' => {
                    self.escape_len = 1;
                    self.escape_value = 0;
                    self.escape_at = base + i as u64;
                }
                _ => self.byte(b),
            }
        }
        Ok(())
    }

    /// Appends one decoded byte of the current name or value.
    fn byte(&mut self, b: u8) {
        if b == 0 {
            self.out.extend_from_slice(&[0, 1]);
        } else {
            self.out.push(b);
        }
    }

    /// Closes the pair being read (at `&` or the end of the body); an empty piece leaves nothing.
    fn end_pair(&mut self) {
        match self.part {
            Part::Name if self.out.len() == self.current => return,
            Part::Name => self.out.extend_from_slice(&[0, 0, 0]),
            Part::Value => self.out.extend_from_slice(&[0, 0]),
        }
        self.pairs.push(self.current);
        self.current = self.out.len();
        self.part = Part::Name;
    }
}

/// End (exclusive) of the escaped string starting at `at`, terminator included.
fn esc_end(out: &[u8], mut at: usize) -> usize {
    while let Some(&b) = out.get(at) {
        if b == 0 {
            // `00 00` ends the string, `00 01` is an escaped 00 byte.
            if out.get(at + 1) == Some(&0) {
                return at + 2;
            }
            at += 2;
        } else {
            at += 1;
        }
    }
    at
}

/// The escaped name (with its terminator) of the pair at `start`: the escaping keeps byte order,
/// so ordering these orders the decoded names.
fn name_of(out: &[u8], start: usize) -> &[u8] {
    out.get(start..esc_end(out, start)).unwrap_or_default()
}

fn pair_end(out: &[u8], start: usize) -> usize {
    let name_end = esc_end(out, start);
    match out.get(name_end) {
        Some(1) => esc_end(out, name_end + 1),
        _ => name_end + 1,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The text is written without `write!` and reads as the `write!` one did; so does the
    /// fingerprint error that wraps it.
    #[test]
    fn message_is_pinned() {
        let error = FormError::InvalidEscape { offset: 31 };
        let text = "form body has a '%' not followed by two hex digits at byte 31";
        assert_eq!(alloc::format!("{error}"), text);
        assert_eq!(error.message(), text);
        let wrapped = crate::request::fingerprint::FingerprintError::Form(error);
        assert_eq!(
            alloc::format!("{wrapped}"),
            alloc::format!("the request body is not a valid form (urlencoded): {text}")
        );
        assert_eq!(wrapped.message(), alloc::format!("{wrapped}"));
        let json = crate::request::fingerprint::FingerprintError::Json(
            crate::request::json::JsonError::Syntax { offset: 2 },
        );
        assert_eq!(
            alloc::format!("{json}"),
            "the request body is not valid JSON: JSON syntax error at byte 2"
        );
        assert_eq!(json.message(), alloc::format!("{json}"));
    }

    fn digest(body: &[u8]) -> Result<[u8; 32], FormError> {
        let mut h = FormHasher::new();
        h.update(body)?;
        h.finish()
    }

    fn bytewise(body: &[u8]) -> Result<[u8; 32], FormError> {
        let mut h = FormHasher::new();
        for b in body.chunks(1) {
            let _ = h.update(b);
        }
        h.finish()
    }

    /// The digest spelled out from the module docs.
    fn spelled(pairs: &[(&[u8], Option<&[u8]>)]) -> [u8; 32] {
        let esc = |x: &[u8]| {
            let mut v = Vec::new();
            for &b in x {
                if b == 0 {
                    v.extend_from_slice(&[0, 1]);
                } else {
                    v.push(b);
                }
            }
            v.extend_from_slice(&[0, 0]);
            v
        };
        let mut pre = Vec::new();
        for (name, value) in pairs {
            pre.extend(esc(name));
            match value {
                None => pre.push(0),
                Some(v) => {
                    pre.push(1);
                    pre.extend(esc(v));
                }
            }
        }
        Sha256::digest(&pre).into()
    }

    #[test]
    fn spellings_of_one_form_are_equal() {
        let base = digest(b"email=a%40b.c&name=J+Doe").unwrap();
        for other in [
            &b"name=J%20Doe&email=a@b.c"[..],
            b"name=J Doe&&email=a%40b.c&",
            b"&email=a%40b%2Ec&name=J%20Doe",
        ] {
            assert_eq!(digest(other).unwrap(), base, "{other:?}");
            assert_eq!(bytewise(other).unwrap(), base, "{other:?}");
        }
        assert_eq!(
            base,
            spelled(&[(b"email", Some(b"a@b.c")), (b"name", Some(b"J Doe"))])
        );
    }

    #[test]
    fn repeated_names_keep_their_order_and_values_matter() {
        let xy = digest(b"t=x&a=1&t=y").unwrap();
        assert_eq!(digest(b"a=1&t=x&t=y").unwrap(), xy);
        assert_ne!(digest(b"t=y&a=1&t=x").unwrap(), xy);
        assert_eq!(
            xy,
            spelled(&[(b"a", Some(b"1")), (b"t", Some(b"x")), (b"t", Some(b"y"))])
        );
        assert_ne!(digest(b"flag").unwrap(), digest(b"flag=").unwrap());
        assert_ne!(digest(b"a=1").unwrap(), digest(b"a=2").unwrap());
        assert_ne!(digest(b"a%2B=1").unwrap(), digest(b"a+=1").unwrap());
        assert_eq!(digest(b"a=b=c").unwrap(), spelled(&[(b"a", Some(b"b=c"))]));
        assert_eq!(digest(b"").unwrap(), digest(b"&&").unwrap());
        assert_eq!(digest(b"").unwrap(), spelled(&[]));
    }

    #[test]
    fn zero_bytes_keep_names_apart() {
        // "a\0" sorts after "a" and before "a\x01"; the escaping must not merge or reorder them.
        let d = digest(b"a%01=3&a%00=2&a=1").unwrap();
        assert_eq!(
            d,
            spelled(&[
                (b"a", Some(b"1")),
                (b"a\0", Some(b"2")),
                (b"a\x01", Some(b"3"))
            ])
        );
        assert_eq!(bytewise(b"a%01=3&a%00=2&a=1").unwrap(), d);
    }

    #[test]
    fn malformed_escapes_are_refused_at_their_percent() {
        for (body, offset) in [
            (&b"a=%zz"[..], 2),
            (b"a=1&b=%4", 6),
            (b"a=%", 2),
            (b"%%41", 0),
            (b"a=%4g&b=%", 2),
        ] {
            assert_eq!(
                digest(body),
                Err(FormError::InvalidEscape { offset }),
                "{body:?}"
            );
            assert_eq!(
                bytewise(body),
                Err(FormError::InvalidEscape { offset }),
                "{body:?}"
            );
        }
        let mut h = FormHasher::new();
        assert!(h.update(b"a=%x").is_err());
        assert_eq!(h.update(b"ok"), Err(FormError::InvalidEscape { offset: 2 }));
    }

    #[test]
    fn many_pairs_sort_like_the_spelled_out_order() {
        let mut body = Vec::new();
        let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for i in 0..100u32 {
            let name = alloc::format!("k{}", (i * 37) % 23).into_bytes();
            let value = alloc::format!("{i}").into_bytes();
            if !body.is_empty() {
                body.push(b'&');
            }
            body.extend_from_slice(&name);
            body.push(b'=');
            body.extend_from_slice(&value);
            pairs.push((name, value));
        }
        pairs.sort_by(|a, b| a.0.cmp(&b.0)); // stable
        let want: Vec<(&[u8], Option<&[u8]>)> = pairs
            .iter()
            .map(|(n, v)| (n.as_slice(), Some(v.as_slice())))
            .collect();
        assert_eq!(digest(&body).unwrap(), spelled(&want));
    }
}
