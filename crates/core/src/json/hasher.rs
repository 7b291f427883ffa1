//! The push parser: a byte-driven state machine over an explicit container stack, so nesting costs
//! heap frames bounded by `max_depth` rather than native stack. It writes the canonical encoding
//! (module docs) as it goes and hashes it with one SHA-256 stream.

use alloc::vec::Vec;
use core::cmp::Ordering;
use sha2::{Digest, Sha256};

use super::lexer::{Scan, StrLexer};
use super::number::{NumberLexer, Step};
use super::pointer::{FieldTracker, JsonPointer, Pointers};
use super::{misplaced, JsonError, JsonLimits};
use crate::sort::sort;

/// Canonical bytes are handed to SHA-256 in pieces at least this large, once no open object can
/// still reorder them.
pub(super) const FLUSH_AT: usize = 4096;

enum Frame {
    /// `start`: offset of this array's encoding in `JsonHasher::out`.
    Array { next_index: u64, start: usize },
    /// This object's members are `JsonHasher::members[first..]` until it closes.
    Object { first: usize, start: usize },
}

/// One member of an open object: its encoding is `out[start..]` up to the next member (or the
/// object's end); the key's encoding is `out[start..key_end]`.
#[derive(Clone, Copy)]
struct Member {
    start: usize,
    key_end: usize,
    end: usize,
    /// The key's encoding after the `s`, first 8 bytes big-endian, zero-padded: orders most keys
    /// without looking at `out`. Equal prefixes fall back to the whole encodings (a shorter
    /// encoding ends in `00 00`, so padding can never make two different keys look equal).
    prefix: u64,
}

impl Member {
    fn key<'o>(&self, out: &'o [u8]) -> &'o [u8] {
        out.get(self.start..self.key_end).unwrap_or_default()
    }

    fn order(&self, other: &Member, out: &[u8]) -> Ordering {
        self.prefix
            .cmp(&other.prefix)
            .then_with(|| self.key(out).cmp(other.key(out)))
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    /// A value must come next: document start, after `:`, after `,` in an array.
    Value,
    /// After `[`: a value or `]`.
    ArrayFirst,
    /// After `{`: a key or `}`.
    ObjectFirst,
    /// After `,` in an object.
    Key,
    Colon,
    /// After an element or member value: `,` or the closer.
    After,
    /// The top-level value is complete; only whitespace may follow.
    Done,
    Str,
    Num,
    Lit,
}

/// Chunk-fed digest of one JSON body (see the module docs for the digest and error rules).
pub struct JsonHasher<'p> {
    limits: JsonLimits,
    state: State,
    stack: Vec<Frame>,
    /// Open objects on `stack`: while there is none, `out` can no longer be reordered.
    open_objects: usize,
    /// Members of the open objects; their order is only known once the object closes.
    members: Vec<Member>,
    /// Canonical encoding not yet handed to `sink`.
    out: Vec<u8>,
    /// Reused when an object's members must be reordered.
    scratch: Vec<u8>,
    sink: Sha256,
    /// Offset in `out` where the string or number being lexed began.
    token_start: usize,
    in_key: bool,
    text: StrLexer,
    number: NumberLexer,
    literal: &'static [u8],
    literal_pos: usize,
    fields: Option<FieldTracker<'p>>,
    /// Body offset of the first byte of the next chunk.
    consumed: u64,
    error: Option<JsonError>,
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
            limits,
            state: State::Value,
            stack: Vec::new(),
            open_objects: 0,
            members: Vec::new(),
            out: Vec::new(),
            scratch: Vec::new(),
            sink: Sha256::new(),
            token_start: 0,
            in_key: false,
            text: StrLexer::new(),
            number: NumberLexer::new(limits.max_number_len),
            literal: b"",
            literal_pos: 0,
            fields: fields.map(FieldTracker::new),
            consumed: 0,
            error: None,
        }
    }

    /// Feeds the next chunk. After an error, every later call returns that same error, so a host
    /// may keep forwarding chunks and check once.
    pub fn update(&mut self, chunk: &[u8]) -> Result<(), JsonError> {
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

    /// Ends the body and returns the json-mode or fields-mode digest.
    pub fn finish(mut self) -> Result<[u8; 32], JsonError> {
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        if self.consumed == 0 {
            return Ok(match &self.fields {
                Some(tracker) => tracker.digest(),
                None => Sha256::digest(b"empty").into(),
            });
        }
        match self.state {
            State::Num if self.number.is_complete() => {
                self.number.encode(&mut self.out)?;
                self.complete_value(self.token_start);
            }
            State::Str => return Err(self.text.eof_error(self.consumed)),
            _ => {}
        }
        if self.state != State::Done {
            return Err(JsonError::UnexpectedEnd);
        }
        Ok(match &self.fields {
            Some(tracker) => tracker.digest(),
            None => {
                self.sink.update(&self.out);
                self.sink.finalize().into()
            }
        })
    }

    fn run(&mut self, buf: &[u8]) -> Result<(), JsonError> {
        let base = self.consumed;
        let mut i = 0;
        while let Some(&b) = buf.get(i) {
            match self.state {
                State::Str => {
                    let key = if self.in_key {
                        self.fields.as_mut()
                    } else {
                        None
                    };
                    match self.text.scan(buf, i, base, &mut self.out, key)? {
                        Scan::More => return Ok(()),
                        Scan::Done(next) => {
                            i = next;
                            self.end_string();
                        }
                    }
                }
                State::Num => i = self.number_run(buf, i, base)?,
                State::Lit => {
                    if self.literal.get(self.literal_pos) != Some(&b) {
                        return Err(misplaced(b, base + i as u64, syntax));
                    }
                    self.literal_pos += 1;
                    i += 1;
                    if self.literal_pos == self.literal.len() {
                        let start = self.out.len();
                        self.out.push(self.literal.first().copied().unwrap_or(b'n'));
                        self.complete_value(start);
                    }
                }
                _ => {
                    if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                        self.structural(b, base + i as u64)?;
                    }
                    i += 1;
                }
            }
        }
        Ok(())
    }

    fn number_run(&mut self, buf: &[u8], mut i: usize, base: u64) -> Result<usize, JsonError> {
        while let Some(&b) = buf.get(i) {
            match self.number.step(b, base + i as u64)? {
                Step::Take => i += 1,
                Step::End => {
                    // The terminating byte is left for the structural states to judge.
                    self.number.encode(&mut self.out)?;
                    self.complete_value(self.token_start);
                    return Ok(i);
                }
            }
        }
        Ok(i)
    }

    fn structural(&mut self, b: u8, at: u64) -> Result<(), JsonError> {
        match self.state {
            State::Value => self.begin_value(b, at),
            State::ArrayFirst if b == b']' => self.close_array(at),
            State::ArrayFirst => self.begin_value(b, at),
            State::ObjectFirst if b == b'}' => self.close_object(at),
            State::ObjectFirst | State::Key if b == b'"' => {
                self.begin_string(true);
                Ok(())
            }
            State::Colon if b == b':' => {
                self.state = State::Value;
                Ok(())
            }
            State::After => self.after_value(b, at),
            State::Done => Err(misplaced(b, at, trailing)),
            _ => Err(misplaced(b, at, syntax)),
        }
    }

    fn after_value(&mut self, b: u8, at: u64) -> Result<(), JsonError> {
        match (b, self.stack.last()) {
            (b',', Some(Frame::Array { .. })) => self.state = State::Value,
            (b',', Some(Frame::Object { .. })) => self.state = State::Key,
            (b']', Some(Frame::Array { .. })) => return self.close_array(at),
            (b'}', Some(Frame::Object { .. })) => return self.close_object(at),
            _ => return Err(misplaced(b, at, syntax)),
        }
        Ok(())
    }

    fn begin_value(&mut self, b: u8, at: u64) -> Result<(), JsonError> {
        let depth = self.stack.len();
        if let (Some(Frame::Array { next_index, .. }), Some(tracker)) =
            (self.stack.last(), self.fields.as_mut())
        {
            tracker.enter_index(depth, *next_index);
        }
        match b {
            b'[' | b'{' => {
                // Refuse before pushing, so a depth bomb allocates at most `max_depth` frames.
                if depth >= usize::from(self.limits.max_depth) {
                    return Err(JsonError::TooDeep {
                        offset: at,
                        max: self.limits.max_depth,
                    });
                }
                let start = self.out.len();
                if b == b'[' {
                    self.out.push(b'a');
                    self.stack.push(Frame::Array {
                        next_index: 0,
                        start,
                    });
                    self.state = State::ArrayFirst;
                } else {
                    self.out.push(b'o');
                    self.stack.push(Frame::Object {
                        first: self.members.len(),
                        start,
                    });
                    self.open_objects += 1;
                    self.state = State::ObjectFirst;
                }
            }
            b'"' => self.begin_string(false),
            b'-' | b'0'..=b'9' => {
                self.number.begin(b, at)?;
                self.token_start = self.out.len();
                self.state = State::Num;
            }
            b't' => self.begin_literal(b"true"),
            b'f' => self.begin_literal(b"false"),
            b'n' => self.begin_literal(b"null"),
            _ => return Err(misplaced(b, at, syntax)),
        }
        Ok(())
    }

    fn begin_literal(&mut self, literal: &'static [u8]) {
        self.literal = literal;
        self.literal_pos = 1;
        self.state = State::Lit;
    }

    fn begin_string(&mut self, key: bool) {
        self.in_key = key;
        self.text.begin();
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
                tracker.key_begin(self.stack.len());
            }
        }
        self.state = State::Str;
    }

    fn end_string(&mut self) {
        if self.in_key {
            if let Some(member) = self.members.last_mut() {
                member.key_end = self.out.len();
                let mut prefix = [0u8; 8];
                let key = self.out.get(member.start + 1..member.key_end);
                for (dst, src) in prefix.iter_mut().zip(key.unwrap_or_default()) {
                    *dst = *src;
                }
                member.prefix = u64::from_be_bytes(prefix);
            }
            if let Some(tracker) = self.fields.as_mut() {
                tracker.key_end();
            }
            self.state = State::Colon;
        } else {
            self.complete_value(self.token_start);
        }
    }

    /// The value whose encoding is `out[start..]` is complete.
    fn complete_value(&mut self, start: usize) {
        if let Some(tracker) = self.fields.as_mut() {
            let encoding = self.out.get(start..).unwrap_or_default();
            tracker.leave(self.stack.len(), || Sha256::digest(encoding).into());
        }
        match self.stack.last_mut() {
            None => self.state = State::Done,
            Some(Frame::Array { next_index, .. }) => {
                *next_index = next_index.saturating_add(1);
                self.state = State::After;
            }
            Some(Frame::Object { .. }) => self.state = State::After,
        }
        // Nothing before the end of `out` can move any more: hash it and forget it (fields mode
        // keeps it, as a selected value's hash needs its bytes).
        if self.open_objects == 0 && self.fields.is_none() && self.out.len() >= FLUSH_AT {
            self.sink.update(&self.out);
            self.out.clear();
        }
    }

    fn close_array(&mut self, at: u64) -> Result<(), JsonError> {
        match self.stack.pop() {
            Some(Frame::Array { start, .. }) => {
                self.out.push(b']');
                self.complete_value(start);
                Ok(())
            }
            _ => Err(JsonError::Syntax { offset: at }),
        }
    }

    /// Puts the members in key order (bytewise on the decoded keys, which is the order of their
    /// encodings) and refuses a repeated key.
    fn close_object(&mut self, at: u64) -> Result<(), JsonError> {
        let Some(Frame::Object { first, start }) = self.stack.pop() else {
            return Err(JsonError::Syntax { offset: at });
        };
        self.open_objects = self.open_objects.saturating_sub(1);
        let end = self.out.len();
        let members = self.members.get_mut(first..).unwrap_or_default();
        let mut next = end;
        for member in members.iter_mut().rev() {
            member.end = next;
            next = member.start;
        }
        let out = &self.out;
        let mut sorted = true;
        for pair in members.windows(2) {
            match pair[0].order(&pair[1], out) {
                Ordering::Less => {}
                Ordering::Equal => return Err(JsonError::DuplicateKey { offset: at }),
                Ordering::Greater => sorted = false,
            }
        }
        if !sorted {
            sort(members, |a, b| a.order(b, out) == Ordering::Less);
            if members
                .windows(2)
                .any(|pair| pair[0].order(&pair[1], out) == Ordering::Equal)
            {
                return Err(JsonError::DuplicateKey { offset: at });
            }
            self.scratch.clear();
            for member in members.iter() {
                self.scratch
                    .extend_from_slice(out.get(member.start..member.end).unwrap_or_default());
            }
            let region = start + 1;
            if let Some(dst) = self.out.get_mut(region..end) {
                dst.copy_from_slice(&self.scratch);
            }
        }
        self.members.truncate(first);
        self.out.push(b'}');
        self.complete_value(start);
        Ok(())
    }
}

fn syntax(offset: u64) -> JsonError {
    JsonError::Syntax { offset }
}

fn trailing(offset: u64) -> JsonError {
    JsonError::TrailingData { offset }
}
