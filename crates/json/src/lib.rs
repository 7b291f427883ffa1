//! # idemgate-json
//!
//! The JSON idemgate reads and writes, with no I/O and nothing of the core: streaming canonical
//! JSON digests for request fingerprints ([`JsonHasher`]), documents ([`document`]: the
//! configuration, the conformance vectors), JSON pointers ([`JsonPointer`]), the one JSON string
//! writer ([`write_string`]), and the small pieces they stand on ([`text`], [`sort`]).
//! `idemgate-core` re-exports it as `idemgate_core::request::json`.
//!
//! ## Streaming canonical JSON digests
//!
//! A retry must fingerprint equal to the original when it carries the same JSON document however it
//! is spelled (member order, whitespace, escapes, number spelling), so the digest is defined over
//! the decoded value, not its bytes. Bodies arrive in chunks and may be hostile, so [`JsonHasher`]
//! is a push parser with an explicit stack: it never recurses and never panics. It writes one
//! canonical encoding `E` of the value and hashes it with a single SHA-256 stream, so the cost is
//! one compression per 64 canonical bytes, close to hashing the raw body. Only an open object's
//! members are held (their order is known when it closes); everything before can no longer move
//! and is hashed and dropped, so memory is the canonical size of the largest top-level object
//! (about the body's size; fields mode keeps the whole encoding, as a selected value is hashed
//! when it completes), plus O(1) per open container.
//!
//! ### Digest (`H` = SHA-256): `H(E(value))`
//! - `null`/`true`/`false` → `n`/`t`/`f`.
//! - number → `d`, its exact decimal value as canonical text, then `;`. The text is `0` for zero
//!   (`-0` included); otherwise an optional `-`, the significant digits without leading or trailing
//!   zeros, `e`, and the decimal exponent (with `-` when negative) such that value = digits ×
//!   10^exponent. So `1`, `1.0`, `1e0` and `10e-1` are all `1e0`, `-0.250` is `-25e-2`, and
//!   `9007199254740993` ≠ `9007199254740992` (unlike RFC 8785, which compares numbers as doubles:
//!   a changed id or amount must not fingerprint as the old one). No float is ever parsed. A
//!   non-zero number whose order of magnitude (`a` in `d.dd… × 10^a`) is beyond ±9999 is
//!   refused (`json_number_out_of_range`); the token length is bounded by `max_number_len`.
//! - string → `s`, the decoded UTF-8 with each `00` byte written `00 01`, then `00 00`.
//! - array → `a`, `E(e1) E(e2) ...`, then `]`.
//! - object → `o`, `E(k1) E(v1) E(k2) E(v2) ...` with members in bytewise order of their decoded
//!   keys (the order of the `E(k)`), then `}`.
//! - zero-byte body → `H("empty")`, since requests without a body are legitimate.
//!
//! Every `E` is self-delimiting, so `E` is injective and equal digests mean equal values.
//!
//! Fields mode hashes only the values at chosen [`JsonPointer`]s (clients add volatile fields such
//! as timestamps): `H("F" || per pointer: u64be(len) || text || (0x00 | 0x01 || H(E(value))))`.
//! The whole document must still be valid.
//!
//! ### Which error wins
//! The first offending byte decides, so the answer does not depend on chunking and an independent
//! recursive-descent reference agrees. A byte that is both misplaced and impossible in UTF-8
//! (`80..=C1`, `F5..=FF`) is `json_invalid_utf8`. Duplicate keys are found when their object
//! closes (offset of the `}`). Input ending inside a value is `json_unexpected_end`, except inside a
//! UTF-8 sequence (`json_invalid_utf8`). A lone or mismatched UTF-16 surrogate escape is
//! `json_invalid_escape`.
//!
//! ### Documents
//! The configuration and the conformance vectors are small JSON documents read whole; [`document`]
//! parses them into a [`Value`] tree (and writes vector answers back out) without serde.
//!
//! ### One grammar
//! Both readers are consumers of one push tokenizer (`tokenizer.rs`): the same grammar, the same
//! limits ([`JsonLimits`], the number magnitude) and the same [`JsonError`], so a document the
//! configuration reader accepts is exactly one the hasher accepts (duplicate keys included),
//! and the offsets and messages of an error do not depend on which reader met it.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod document;
mod hasher;
mod lexer;
mod members;
mod number;
mod pointer;
mod sha;
mod sink;
pub mod sort;
#[cfg(test)]
mod tests;
pub mod text;
mod tokenizer;
mod write;

pub use document::{Number, Quoted, Value};
pub use hasher::JsonHasher;
pub use pointer::{JsonPointer, Pointers};
pub use write::{write_escaped, write_string};

use core::fmt;
use text::Text;

/// Bounds that keep hostile bodies from costing more than the gateway budgets for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonLimits {
    /// Deepest container nesting accepted; the top-level array/object is depth 1.
    pub max_depth: u16,
    /// Longest number token accepted, in bytes; longer tokens are refused before being parsed.
    pub max_number_len: u16,
}

impl JsonLimits {
    /// 64 levels, 64-byte numbers: what request bodies get unless configured otherwise, and what
    /// documents (configuration, vectors) always get.
    pub const DEFAULT: JsonLimits = JsonLimits {
        max_depth: 64,
        max_number_len: 64,
    };
}

impl Default for JsonLimits {
    fn default() -> Self {
        JsonLimits::DEFAULT
    }
}

/// Why a text is not acceptable JSON, from either reader (a streamed body or a document).
/// Offsets count bytes from the start of the text.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonError {
    /// Any grammar violation not covered by a more specific variant.
    Syntax { offset: u64 },
    /// The text ended inside a value, or held only whitespace; `offset` is its length.
    UnexpectedEnd { offset: u64 },
    /// Something other than whitespace follows the top-level value.
    TrailingData { offset: u64 },
    /// A container opened at `offset` would exceed `max` levels.
    TooDeep { offset: u64, max: u16 },
    /// An object has two members with the same decoded key. The hasher learns it when the object
    /// closes (`offset` is the `}`, `key` is `None`: a body's keys are not echoed); the document
    /// reader names the repeated key and where its repetition starts.
    DuplicateKey {
        offset: u64,
        key: Option<alloc::string::String>,
    },
    /// Ill-formed UTF-8 (overlong, surrogate, out of range, truncated) at `offset`.
    InvalidUtf8 { offset: u64 },
    /// Unknown escape, bad `\u` hex digit, or lone/mismatched UTF-16 surrogate.
    InvalidEscape { offset: u64 },
    /// Unescaped byte below 0x20 inside a string.
    ControlCharacter { offset: u64 },
    /// The number starting at `offset` is longer than `max_number_len`.
    NumberTooLong { offset: u64 },
    /// The non-zero number starting at `offset` is beyond 10^±9999 in magnitude (e.g. `1e10000`).
    NumberOutOfRange { offset: u64 },
    /// A field selector is not an RFC 6901 JSON pointer.
    PointerInvalid,
    /// A broken invariant of a reader (a bug, not bad input): the text is refused rather than
    /// read or fingerprinted from bytes the reader did not mean.
    Internal,
}

impl JsonError {
    /// Stable code shared with the vectors, the browser module and problem bodies.
    pub fn code(&self) -> &'static str {
        match self {
            JsonError::Syntax { .. } => "json_syntax",
            JsonError::UnexpectedEnd { .. } => "json_unexpected_end",
            JsonError::TrailingData { .. } => "json_trailing_data",
            JsonError::TooDeep { .. } => "json_too_deep",
            JsonError::DuplicateKey { .. } => "json_duplicate_key",
            JsonError::InvalidUtf8 { .. } => "json_invalid_utf8",
            JsonError::InvalidEscape { .. } => "json_invalid_escape",
            JsonError::ControlCharacter { .. } => "json_control_character",
            JsonError::NumberTooLong { .. } => "json_number_too_long",
            JsonError::NumberOutOfRange { .. } => "json_number_out_of_range",
            JsonError::PointerInvalid => "json_pointer_invalid",
            JsonError::Internal => "json_internal",
        }
    }

    /// Where in the text the problem is (`None` for a selector or an internal error).
    pub fn offset(&self) -> Option<u64> {
        match self {
            JsonError::Syntax { offset }
            | JsonError::UnexpectedEnd { offset }
            | JsonError::TrailingData { offset }
            | JsonError::TooDeep { offset, .. }
            | JsonError::DuplicateKey { offset, .. }
            | JsonError::InvalidUtf8 { offset }
            | JsonError::InvalidEscape { offset }
            | JsonError::ControlCharacter { offset }
            | JsonError::NumberTooLong { offset }
            | JsonError::NumberOutOfRange { offset } => Some(*offset),
            JsonError::PointerInvalid | JsonError::Internal => None,
        }
    }

    /// The same text as `Display`, without `core::fmt` (see [`text`]); what the browser
    /// module shows.
    pub fn message(&self) -> alloc::string::String {
        text::message(|out| self.write_text(out))
    }

    /// Writes the text of `message()` and `Display` into `out`: for an error that wraps this one
    /// and writes its own text the same way (the core's fingerprint errors).
    pub fn write_text<T: Text>(&self, out: &mut T) -> fmt::Result {
        let (before, offset, after) = match self {
            JsonError::Syntax { offset } => ("JSON syntax error at byte ", offset, ""),
            JsonError::UnexpectedEnd { offset } => (
                "JSON text ended at byte ",
                offset,
                " before the value was complete",
            ),
            JsonError::TrailingData { offset } => {
                ("unexpected data after the JSON value at byte ", offset, "")
            }
            JsonError::TooDeep { offset, max } => {
                out.put_between("JSON nesting deeper than ", u64::from(*max), " levels")?;
                (" at byte ", offset, "")
            }
            JsonError::DuplicateKey { offset, key: None } => (
                "duplicate key in the JSON object closed at byte ",
                offset,
                "",
            ),
            JsonError::DuplicateKey {
                offset,
                key: Some(key),
            } => {
                out.put("duplicate key `")?;
                out.put(key)?;
                ("` at byte ", offset, "")
            }
            JsonError::InvalidUtf8 { offset } => ("invalid UTF-8 at byte ", offset, ""),
            JsonError::InvalidEscape { offset } => (
                "invalid string escape or lone surrogate at byte ",
                offset,
                "",
            ),
            JsonError::ControlCharacter { offset } => (
                "unescaped control character in a JSON string at byte ",
                offset,
                "",
            ),
            JsonError::NumberTooLong { offset } => {
                ("JSON number at byte ", offset, " exceeds the length limit")
            }
            JsonError::NumberOutOfRange { offset } => (
                "JSON number at byte ",
                offset,
                " is beyond 10^±9999 in magnitude",
            ),
            JsonError::PointerInvalid => {
                return out.put("field selector is not a valid JSON pointer (RFC 6901)")
            }
            JsonError::Internal => return out.put("internal error in the JSON reader"),
        };
        out.put_between(before, *offset, after)
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_text(f)
    }
}

/// Appends a few bytes to the canonical encoding. Most pieces are a handful of bytes (a short
/// string run, a terminator, a number's bits), and in wasm `extend_from_slice` becomes a
/// `memory.copy` whose fixed cost in V8 dwarfs such copies, so short pieces are pushed one by one.
#[inline]
fn append(out: &mut alloc::vec::Vec<u8>, bytes: &[u8]) {
    if bytes.len() <= 16 {
        out.reserve(bytes.len());
        for &b in bytes {
            out.push(b);
        }
    } else {
        out.extend_from_slice(bytes);
    }
}

/// Appends the first `len` bytes of `ahead` to `out` in whole 16- and 8-byte pieces read from
/// `ahead` (only the last piece of bytes at the very end of `ahead` goes byte by byte); the bytes
/// written past `len` are taken off again. Each piece is a load and a store, where a
/// byte-by-byte `push` costs about 25 wasm operators a byte and `extend_from_slice` a
/// `memory.copy` (in V8 a call out of the wasm code, whose fixed cost dwarfs a copy of a few
/// bytes). `ahead` shorter than `len` appends all of it.
#[inline]
fn append_ahead(out: &mut alloc::vec::Vec<u8>, len: usize, mut ahead: &[u8]) {
    let len = len.min(ahead.len());
    let end = out.len() + len;
    // Most strings and numbers: one piece, without the loop.
    if let Some(block) = ahead.first_chunk::<16>().filter(|_| len <= 16) {
        out.extend_from_slice(block);
        out.truncate(end);
        return;
    }
    out.reserve(len + 16);
    let mut left = len;
    while left > 0 {
        if let Some((block, rest)) = ahead.split_first_chunk::<16>() {
            out.extend_from_slice(block);
            (ahead, left) = (rest, left.saturating_sub(16));
        } else if let Some((word, rest)) = ahead.split_first_chunk::<8>() {
            out.extend_from_slice(word);
            (ahead, left) = (rest, left.saturating_sub(8));
        } else {
            for &b in ahead.iter().take(left) {
                out.push(b);
            }
            left = 0;
        }
    }
    out.truncate(end);
}

/// Classifies a byte the grammar rejects: one that can never occur in UTF-8 is reported as such,
/// so a binary body reads as "not text" rather than as a misplaced token.
fn misplaced(byte: u8, offset: u64, grammar: fn(u64) -> JsonError) -> JsonError {
    if byte >= 0x80 && !(0xC2..=0xF4).contains(&byte) {
        JsonError::InvalidUtf8 { offset }
    } else {
        grammar(offset)
    }
}
