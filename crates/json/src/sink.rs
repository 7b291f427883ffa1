//! What the one tokenizer tells its consumers (the hasher's canonical encoder, the document
//! reader): the events of a document in order, and the containers and literals they name. Below
//! the tokenizer and its string lexer, which both speak to a [`Sink`].

use crate::number::Decimal;
use crate::JsonError;

/// Which kind of container an event is about.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Kind {
    Array,
    Object,
}

/// `null`, `true` or `false`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Literal {
    Null,
    True,
    False,
}

impl Literal {
    pub(crate) fn spelling(self) -> &'static [u8] {
        match self {
            Literal::Null => b"null",
            Literal::True => b"true",
            Literal::False => b"false",
        }
    }
}

/// A piece of decoded string content, with the bytes that follow it in the same buffer: a
/// consumer may copy whole 8-byte words that run past the piece's end (and keep only its length),
/// which costs a fraction of copying it byte by byte and needs no `memory.copy` (whose fixed cost
/// in V8 dwarfs a copy of a few bytes).
#[derive(Clone, Copy)]
pub(super) struct Run<'a> {
    bytes: &'a [u8],
    /// `bytes` and what follows it in its buffer.
    ahead: &'a [u8],
}

impl<'a> Run<'a> {
    /// `buf[start..end]`; `None` if that is not inside `buf`.
    #[inline]
    pub(super) fn within(buf: &'a [u8], start: usize, end: usize) -> Option<Self> {
        let ahead = buf.get(start..)?;
        let bytes = ahead.get(..end.checked_sub(start)?)?;
        Some(Run { bytes, ahead })
    }

    /// Bytes with nothing after them (a decoded escape).
    #[inline]
    pub(super) fn whole(bytes: &'a [u8]) -> Self {
        Run {
            bytes,
            ahead: bytes,
        }
    }

    #[inline]
    pub(super) fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The piece followed by the rest of its buffer (at least the piece).
    #[inline]
    pub(super) fn ahead(&self) -> &'a [u8] {
        self.ahead
    }
}

/// What a consumer is told, in document order. Every value is announced exactly once when it
/// completes (`close`, `string_end` of a non-key, `number`, `literal`), so a consumer needs no
/// grammar of its own. Offsets count bytes from the start of the input.
pub(super) trait Sink {
    /// What the consumer keeps per open container (the hasher: where its encoding starts). The
    /// tokenizer holds it on its own stack and hands it back on close, so a consumer needs no
    /// second stack that could fall out of step.
    type Mark: Copy;
    /// A value starts at position `index` of the array that is the `depth`-th open container.
    fn element(&mut self, depth: usize, index: u64);
    /// A container opens (already checked against `max_depth`).
    fn open(&mut self, kind: Kind) -> Self::Mark;
    /// The innermost open container closes with the byte at `at`; `mark` is what `open` gave.
    fn close(&mut self, kind: Kind, mark: Self::Mark, at: u64) -> Result<(), JsonError>;
    /// A string starts at `at` (its opening quote); `key` when it is an object member's key.
    fn string_begin(&mut self, key: bool, at: u64);
    /// Decoded string content (well-formed UTF-8, never a `00` byte), in pieces.
    fn text(&mut self, run: Run<'_>);
    /// A decoded `00` byte (only `\u0000` produces one).
    fn text_nul(&mut self);
    /// The string ends (closing quote consumed).
    fn string_end(&mut self, key: bool) -> Result<(), JsonError>;
    /// A whole string at once, its content one piece (the common case: no escape, ASCII, inside
    /// one chunk): the same as `string_begin`, `text` (unless empty), `string_end`.
    #[inline]
    fn string(&mut self, key: bool, at: u64, run: Run<'_>) -> Result<(), JsonError> {
        self.string_begin(key, at);
        if !run.bytes().is_empty() {
            self.text(run);
        }
        self.string_end(key)
    }
    /// A number token `start..end`, with its exact value (already checked against the limits).
    fn number(&mut self, value: Decimal<'_>, start: u64, end: u64) -> Result<(), JsonError>;
    fn literal(&mut self, literal: Literal) -> Result<(), JsonError>;
}
