//! The canonical hasher: a [`Sink`] of the one tokenizer that writes the canonical encoding
//! (module docs) as events arrive and hashes it with one SHA-256 stream; and [`Consumer`], the
//! tokenizer's two consumers (this one and the document reader) as one type.

use alloc::vec::Vec;
use sha2::{Digest, Sha256};

use crate::members::{reorder, Member};
use crate::number::Decimal;
use crate::pointer::{FieldTracker, JsonPointer, Pointers};
use crate::sha;
use crate::sink::{Kind, Literal, Run, Sink};
use crate::tokenizer::Tokenizer;
use crate::{append, append_ahead, JsonError, JsonLimits};

/// Canonical bytes are handed to SHA-256 in pieces at least this large, once no open object can
/// still reorder them.
pub(super) const FLUSH_AT: usize = 4096;

/// One open container, as the tokenizer keeps it for the hasher.
#[derive(Clone, Copy)]
pub(super) struct Frame {
    /// The offset of its `a`/`o` in `Canon::out`.
    start: usize,
    /// An object's members are `Canon::members[first..]` until it closes.
    first: usize,
}

impl Frame {
    /// What the document reader's containers carry (it keeps its own tree).
    pub(super) const NONE: Frame = Frame { start: 0, first: 0 };
}

/// Chunk-fed digest of one JSON body (see the module docs for the digest and error rules).
pub struct JsonHasher<'p> {
    tokens: Tokenizer<Frame>,
    canon: Canon<'p>,
    error: Option<JsonError>,
}

/// The hasher's side of the events: the canonical encoding and the digest.
pub(super) struct Canon<'p> {
    /// Containers open in the document.
    depth: usize,
    /// Open objects in `frames`: while there is none, `out` can no longer be reordered.
    open_objects: usize,
    /// Members of the open objects; their order is only known once the object closes.
    members: Vec<Member>,
    /// Canonical encoding not yet handed to `sink`.
    out: Vec<u8>,
    sink: Sha256,
    /// Offset in `out` where the string being decoded began.
    token_start: usize,
    in_key: bool,
    fields: Option<FieldTracker<'p>>,
}

impl<'p> JsonHasher<'p> {
    /// `fields == None`: json mode (digest of the whole document); `Some(ptrs)`: fields mode.
    pub fn new(limits: JsonLimits, fields: Option<&'p [JsonPointer]>) -> Self {
        Self::with_pointers(limits, fields.map(Pointers::Borrowed))
    }

    /// Like [`JsonHasher::new`], with the pointers borrowed or shared (`Pointers::Shared` gives a
    /// `JsonHasher<'static>` that a request context can own).
    pub fn with_pointers(limits: JsonLimits, fields: Option<Pointers<'p>>) -> Self {
        JsonHasher {
            tokens: Tokenizer::new(limits),
            canon: Canon {
                depth: 0,
                open_objects: 0,
                members: Vec::new(),
                out: Vec::new(),
                sink: Sha256::new(),
                token_start: 0,
                in_key: false,
                fields: fields.map(FieldTracker::new),
            },
            error: None,
        }
    }

    /// Feeds the next chunk. After an error, every later call returns that same error, so a host
    /// may keep forwarding chunks and check once.
    pub fn update(&mut self, chunk: &[u8]) -> Result<(), JsonError> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        if self.canon.out.capacity() == 0 {
            // The canonical encoding is about as long as the body: room for a first chunk up to
            // the flush size at once, rather than doubling from 8 bytes.
            self.canon.out.reserve(chunk.len().min(FLUSH_AT) + 64);
            self.canon.members.reserve(16);
        }
        let result = self
            .tokens
            .feed(chunk, &mut Consumer::Canon(&mut self.canon));
        if let Err(error) = &result {
            self.error = Some(error.clone());
        }
        result
    }

    /// Ends the body and returns the json-mode or fields-mode digest.
    pub fn finish(mut self) -> Result<[u8; 32], JsonError> {
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        let mut canon = self.canon;
        if self.tokens.consumed() == 0 {
            return Ok(match &canon.fields {
                Some(tracker) => tracker.digest(),
                None => sha::digest(b"empty"),
            });
        }
        self.tokens.finish(&mut Consumer::Canon(&mut canon))?;
        Ok(match &canon.fields {
            Some(tracker) => tracker.digest(),
            None => {
                sha::update(&mut canon.sink, &canon.out);
                sha::finish(canon.sink)
            }
        })
    }
}

impl Canon<'_> {
    /// The value whose encoding is `out[start..]` is complete. Inlined (json mode's path is a
    /// comparison); the rarer work is in functions of their own, so it is not copied into every
    /// event that completes a value.
    #[inline]
    fn complete_value(&mut self, start: usize) -> Result<(), JsonError> {
        if self.fields.is_some() {
            return self.leave_field(start);
        }
        // Nothing before the end of `out` can move any more: hash it and forget it (fields mode
        // keeps it, as a selected value's hash needs its bytes).
        if self.open_objects == 0 && self.out.len() >= FLUSH_AT {
            self.flush();
        }
        Ok(())
    }

    fn flush(&mut self) {
        sha::update(&mut self.sink, &self.out);
        self.out.clear();
    }

    /// Fields mode: the selectors learn that the value at `out[start..]` completed.
    fn leave_field(&mut self, start: usize) -> Result<(), JsonError> {
        if let Some(tracker) = self.fields.as_mut() {
            let encoding = self.out.get(start..).ok_or(JsonError::Internal)?;
            tracker.leave(self.depth, || sha::digest(encoding));
        }
        Ok(())
    }

    /// Puts the members of the object that just closed in key order (bytewise on the decoded
    /// keys, which is the order of their encodings) and refuses a repeated key.
    fn close_object(&mut self, first: usize, at: u64) -> Result<(), JsonError> {
        let end = self.out.len();
        let members = self.members.get_mut(first..).ok_or(JsonError::Internal)?;
        let mut next = end;
        for member in members.iter_mut().rev() {
            member.end = next;
            next = member.start;
        }
        reorder(&mut self.out, members, at)?;
        self.members.truncate(first);
        Ok(())
    }
}

/// Every event is `#[inline]`: the release profile optimises for size (`opt-level = "s"`), whose
/// inliner would otherwise leave these small calls out of the tokenizer's hot loop (≈10% slower).
impl Sink for Canon<'_> {
    type Mark = Frame;

    #[inline]
    fn element(&mut self, depth: usize, index: u64) {
        if let Some(tracker) = self.fields.as_mut() {
            tracker.enter_index(depth, index);
        }
    }

    #[inline]
    fn open(&mut self, kind: Kind) -> Frame {
        let start = self.out.len();
        self.depth += 1;
        if kind == Kind::Object {
            self.open_objects += 1;
        }
        self.out.push(if kind == Kind::Array { b'a' } else { b'o' });
        Frame {
            start,
            first: self.members.len(),
        }
    }

    #[inline]
    fn close(&mut self, kind: Kind, frame: Frame, at: u64) -> Result<(), JsonError> {
        self.depth = self.depth.saturating_sub(1);
        if kind == Kind::Object {
            self.open_objects = self.open_objects.saturating_sub(1);
            self.close_object(frame.first, at)?;
        }
        self.out.push(if kind == Kind::Array { b']' } else { b'}' });
        self.complete_value(frame.start)
    }

    #[inline]
    fn string_begin(&mut self, key: bool, _at: u64) {
        self.in_key = key;
        self.token_start = self.out.len();
        self.out.push(b's');
        if key {
            let start = self.token_start;
            self.members.push(Member {
                start,
                key_end: start,
                end: start,
                prefix: 0,
            });
            if let Some(tracker) = self.fields.as_mut() {
                tracker.key_begin(self.depth);
            }
        }
    }

    #[inline]
    fn text(&mut self, run: Run<'_>) {
        copy_run(&mut self.out, run);
        if self.in_key {
            if let Some(tracker) = self.fields.as_mut() {
                tracker.key_bytes(run.bytes());
            }
        }
    }

    #[inline]
    fn text_nul(&mut self) {
        // Escaped so the `00 00` terminator stays unique.
        append(&mut self.out, &[0, 1]);
        if self.in_key {
            if let Some(tracker) = self.fields.as_mut() {
                tracker.key_bytes(&[0]);
            }
        }
    }

    #[inline]
    fn string_end(&mut self, key: bool) -> Result<(), JsonError> {
        self.out.extend_from_slice(&[0, 0]);
        if !key {
            return self.complete_value(self.token_start);
        }
        let key_end = self.out.len();
        let member = self.members.last_mut().ok_or(JsonError::Internal)?;
        member.key_end = key_end;
        // The prefix is the key's first 8 encoded bytes, zero-padded: read as one word after
        // 8 zero bytes are put behind the key (one store), which are then taken off again.
        self.out.extend_from_slice(&[0; 8]);
        let prefix = self
            .out
            .get(member.start + 1..)
            .and_then(|key| key.first_chunk::<8>())
            .ok_or(JsonError::Internal)?;
        member.prefix = u64::from_le_bytes(*prefix);
        self.out.truncate(key_end);
        if let Some(tracker) = self.fields.as_mut() {
            tracker.key_end();
        }
        Ok(())
    }

    /// The common string in one go: `s`, the content, `00 00` with one reservation, and a key's
    /// member with its prefix read from the run. Fields mode takes the general events, which
    /// tell the selectors.
    #[inline]
    fn string(&mut self, key: bool, at: u64, run: Run<'_>) -> Result<(), JsonError> {
        if self.fields.is_some() {
            self.string_begin(key, at);
            self.text(run);
            return self.string_end(key);
        }
        let start = self.out.len();
        let len = run.bytes().len();
        let prefix = match run.ahead().first_chunk::<16>() {
            // Up to 13 bytes: `s`, the content and zeros (the `00 00` terminator, and bytes
            // taken off again) as one 16-byte store.
            Some(block) if len <= 13 => {
                let (lo, hi) = block.split_at(8);
                let word = |half: &[u8]| half.first_chunk::<8>().map(|w| u64::from_le_bytes(*w));
                let (content, hi) = (word(lo).unwrap_or(0), word(hi).unwrap_or(0));
                // The block moved up a byte for the `s`; the `s` and the content are kept.
                let (lo, hi) = (content << 8 | u64::from(b's'), hi << 8 | content >> 56);
                let mask = |bytes: usize| (1u64 << (8 * bytes)) - 1;
                let (lo, hi) = match len + 1 {
                    keep @ 0..=7 => (lo & mask(keep), 0),
                    keep => (lo, hi & mask(keep - 8)),
                };
                self.out.extend_from_slice(&lo.to_le_bytes());
                self.out.extend_from_slice(&hi.to_le_bytes());
                self.out.truncate(start + len + 3);
                // A key's prefix is the word of content already read ([`prefix_of`]).
                match len {
                    0..=7 => content & mask(len),
                    _ => content,
                }
            }
            _ => {
                self.out.reserve(len + 16);
                self.out.push(b's');
                copy_run(&mut self.out, run);
                self.out.extend_from_slice(&[0, 0]);
                prefix_of(run)
            }
        };
        if !key {
            return self.complete_value(start);
        }
        let end = self.out.len();
        self.members.push(Member {
            start,
            key_end: end,
            end,
            prefix,
        });
        Ok(())
    }

    #[inline]
    fn number(&mut self, value: Decimal<'_>, _start: u64, _end: u64) -> Result<(), JsonError> {
        let start = self.out.len();
        value.encode(&mut self.out);
        self.complete_value(start)
    }

    #[inline]
    fn literal(&mut self, literal: Literal) -> Result<(), JsonError> {
        let start = self.out.len();
        self.out.push(match literal {
            Literal::Null => b'n',
            Literal::True => b't',
            Literal::False => b'f',
        });
        self.complete_value(start)
    }
}

/// Appends `run` to `out` in whole words read from the run and what follows it
/// ([`append_ahead`]).
#[inline]
fn copy_run(out: &mut Vec<u8>, run: Run<'_>) {
    append_ahead(out, run.bytes().len(), run.ahead());
}

/// A key's [`Member::prefix`] from its content (no `00` byte: the tokenizer's plain runs), read
/// as one word when the buffer holds 8 bytes from its start: the bytes past the key are masked
/// off, as its encoding has `00 00` and zero padding there.
#[inline]
fn prefix_of(run: Run<'_>) -> u64 {
    let len = run.bytes().len();
    if let Some(word) = run.ahead().first_chunk::<8>() {
        let word = u64::from_le_bytes(*word);
        return match len {
            0 => 0,
            1..=7 => word & (u64::MAX >> (8 * (8 - len))),
            _ => word,
        };
    }
    let mut prefix = [0u8; 8];
    for (dst, src) in prefix.iter_mut().zip(run.bytes()) {
        *dst = *src;
    }
    u64::from_le_bytes(prefix)
}

/// The tokenizer's two consumers as one type: the tokenizer's loop is generic over its [`Sink`],
/// and instantiating it for each consumer would ship the whole grammar twice in the filter's
/// `.wasm`. Dispatching on this enum instead costs one well-predicted branch per event (the
/// hasher's events stay inlined) and keeps one copy of the grammar. The document reader is behind
/// a trait object, so a module that only hashes (the browser's) links no tree-building code.
pub(crate) enum Consumer<'a, 'p> {
    Canon(&'a mut Canon<'p>),
    /// The document reader (`document::Builder`).
    Tree(&'a mut dyn Sink<Mark = ()>),
}

impl Sink for Consumer<'_, '_> {
    type Mark = Frame;

    #[inline]
    fn element(&mut self, depth: usize, index: u64) {
        match self {
            Consumer::Canon(c) => c.element(depth, index),
            Consumer::Tree(t) => t.element(depth, index),
        }
    }

    #[inline]
    fn open(&mut self, kind: Kind) -> Frame {
        match self {
            Consumer::Canon(c) => c.open(kind),
            Consumer::Tree(t) => {
                t.open(kind);
                Frame::NONE
            }
        }
    }

    #[inline]
    fn close(&mut self, kind: Kind, mark: Frame, at: u64) -> Result<(), JsonError> {
        match self {
            Consumer::Canon(c) => c.close(kind, mark, at),
            Consumer::Tree(t) => t.close(kind, (), at),
        }
    }

    #[inline]
    fn string_begin(&mut self, key: bool, at: u64) {
        match self {
            Consumer::Canon(c) => c.string_begin(key, at),
            Consumer::Tree(t) => t.string_begin(key, at),
        }
    }

    #[inline]
    fn text(&mut self, run: Run<'_>) {
        match self {
            Consumer::Canon(c) => c.text(run),
            Consumer::Tree(t) => t.text(run),
        }
    }

    #[inline]
    fn text_nul(&mut self) {
        match self {
            Consumer::Canon(c) => c.text_nul(),
            Consumer::Tree(t) => t.text_nul(),
        }
    }

    #[inline]
    fn string_end(&mut self, key: bool) -> Result<(), JsonError> {
        match self {
            Consumer::Canon(c) => c.string_end(key),
            Consumer::Tree(t) => t.string_end(key),
        }
    }

    #[inline]
    fn number(&mut self, value: Decimal<'_>, start: u64, end: u64) -> Result<(), JsonError> {
        match self {
            Consumer::Canon(c) => c.number(value, start, end),
            Consumer::Tree(t) => t.number(value, start, end),
        }
    }

    #[inline]
    fn string(&mut self, key: bool, at: u64, run: Run<'_>) -> Result<(), JsonError> {
        match self {
            Consumer::Canon(c) => c.string(key, at, run),
            Consumer::Tree(t) => t.string(key, at, run),
        }
    }

    #[inline]
    fn literal(&mut self, literal: Literal) -> Result<(), JsonError> {
        match self {
            Consumer::Canon(c) => c.literal(literal),
            Consumer::Tree(t) => t.literal(literal),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_member_index_beyond_the_list_is_an_internal_error() {
        let mut canon = JsonHasher::new(JsonLimits::default(), None).canon;
        canon.out = b"o\x73b\0\0t\x73a\0\0f".to_vec();
        assert_eq!(canon.close_object(5, 11), Err(JsonError::Internal));
    }
}
