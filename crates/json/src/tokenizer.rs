//! The core's one JSON grammar: a byte-driven push tokenizer over an explicit container stack.
//!
//! Two consumers read JSON, and they must never disagree on what JSON is: the canonical hasher
//! (request bodies, fed in arbitrary chunks) and the document reader (the configuration, the
//! vectors, body keys). So the grammar (structure, strings with their escapes and UTF-8 checks,
//! numbers, literals) and the limits (`max_depth`, `max_number_len`, the number magnitude) live
//! here once, and each consumer is a [`Sink`] that only receives well-formed events. The
//! tokenizer keeps every partial construct (a UTF-8 sequence, an escape, a number) in its own
//! state, so a chunk may end anywhere; nesting costs one small frame per level on the heap,
//! bounded by `max_depth`, never native stack. It never panics, and the first offending byte
//! decides the error (see the module docs of [`super`]), however the input is chunked.
//!
//! Most of a body is plain tokens that lie inside one chunk (ASCII strings without escapes,
//! numbers without an exponent, a `:` or `,` right after a value): those are read in one pass
//! and told to the sink whole, since a state per byte cost most of a keyed request's work
//! (`make bench-work`). Anything else, and any token the chunk cuts, is left to the per-byte
//! states from the byte where the pass stopped, so the result and the error never depend on it.
//!
//! The sink is a generic parameter, instantiated once, with the hasher's `Consumer` enum of the two
//! consumers: one copy of the grammar in each `.wasm`, and the hasher's event calls still inlined
//! into the loop (no dynamic dispatch).

use alloc::vec::Vec;

use crate::lexer::{skip_ascii, Scan, StrLexer};
use crate::number::{Lexed, NumberLexer};
use crate::sink::{Kind, Literal, Run, Sink};
use crate::{misplaced, JsonError, JsonLimits};

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

/// One open container, as far as the grammar needs it, with the consumer's mark.
enum Open<M> {
    Array { next_index: u64, mark: M },
    Object { mark: M },
}

/// The push tokenizer (see the module docs), for a consumer whose marks are `M`.
pub(super) struct Tokenizer<M> {
    limits: JsonLimits,
    state: State,
    stack: Vec<Open<M>>,
    in_key: bool,
    text: StrLexer,
    number: NumberLexer,
    literal: Literal,
    literal_pos: usize,
    /// Offset of the first byte of the next chunk.
    consumed: u64,
}

impl<M: Copy> Tokenizer<M> {
    pub(super) fn new(limits: JsonLimits) -> Self {
        Tokenizer {
            limits,
            state: State::Value,
            stack: Vec::new(),
            in_key: false,
            text: StrLexer::new(),
            number: NumberLexer::new(limits.max_number_len),
            literal: Literal::Null,
            literal_pos: 0,
            consumed: 0,
        }
    }

    /// Bytes fed so far.
    pub(super) fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Feeds the next chunk. After an error the tokenizer must not be fed again (the hasher
    /// keeps the first error and repeats it).
    pub(super) fn feed<S: Sink<Mark = M>>(
        &mut self,
        chunk: &[u8],
        sink: &mut S,
    ) -> Result<(), JsonError> {
        let result = self.run(chunk, sink);
        self.consumed = self.consumed.saturating_add(chunk.len() as u64);
        result
    }

    /// The input ended: completes a trailing number, then requires a complete top-level value.
    pub(super) fn finish<S: Sink<Mark = M>>(&mut self, sink: &mut S) -> Result<(), JsonError> {
        let end = self.consumed;
        match self.state {
            State::Num if self.number.is_complete() => {
                let start = self.number.start();
                sink.number(self.number.value()?, start, end)?;
                self.value_done();
            }
            State::Str => return Err(self.text.eof_error(end)),
            _ => {}
        }
        if self.state != State::Done {
            return Err(JsonError::UnexpectedEnd { offset: end });
        }
        Ok(())
    }

    fn run<S: Sink<Mark = M>>(&mut self, buf: &[u8], sink: &mut S) -> Result<(), JsonError> {
        let base = self.consumed;
        let mut i = 0;
        while let Some(&b) = buf.get(i) {
            match self.state {
                State::Str => match self.text.scan(buf, i, base, sink)? {
                    Scan::More => return Ok(()),
                    Scan::Done(next) => {
                        i = next;
                        sink.string_end(self.in_key)?;
                        self.after_string(self.in_key);
                    }
                },
                State::Num => i = self.number_run(buf, i, base, sink)?,
                State::Lit => {
                    let spelling = self.literal.spelling();
                    if spelling.get(self.literal_pos) != Some(&b) {
                        return Err(misplaced(b, base + i as u64, syntax));
                    }
                    self.literal_pos += 1;
                    i += 1;
                    if self.literal_pos == spelling.len() {
                        sink.literal(self.literal)?;
                        self.value_done();
                    }
                }
                _ => {
                    if is_space(b) {
                        // A run of whitespace (indentation, padding) in one tight loop.
                        i += 1;
                        while buf.get(i).is_some_and(|&b| is_space(b)) {
                            i += 1;
                        }
                    } else {
                        i = self.structural(buf, i, base, sink)?;
                    }
                }
            }
        }
        Ok(())
    }

    #[inline]
    fn number_run<S: Sink<Mark = M>>(
        &mut self,
        buf: &[u8],
        mut i: usize,
        base: u64,
        sink: &mut S,
    ) -> Result<usize, JsonError> {
        while let Some(&b) = buf.get(i) {
            let at = base + i as u64;
            match self.number.step(b, at)? {
                Lexed::Take => i += 1,
                Lexed::End => {
                    // The terminating byte is left for the structural states to judge.
                    let start = self.number.start();
                    sink.number(self.number.value()?, start, at)?;
                    self.value_done();
                    return Ok(i);
                }
            }
        }
        Ok(i)
    }

    /// A value completed: the enclosing container (if any) expects a separator next.
    #[inline]
    fn value_done(&mut self) {
        self.state = match self.stack.last_mut() {
            None => State::Done,
            Some(Open::Array { next_index, .. }) => {
                *next_index = next_index.saturating_add(1);
                State::After
            }
            Some(Open::Object { .. }) => State::After,
        };
    }

    /// Handles the byte `buf[i]`, which is not whitespace, in a state between tokens; returns the
    /// index of the next byte to read (past the whole token when it is complete in `buf`).
    fn structural<S: Sink<Mark = M>>(
        &mut self,
        buf: &[u8],
        i: usize,
        base: u64,
        sink: &mut S,
    ) -> Result<usize, JsonError> {
        let (b, at) = (
            buf.get(i).copied().ok_or(JsonError::Internal)?,
            base + i as u64,
        );
        match self.state {
            State::Value => self.begin_value(buf, i, base, sink),
            State::ArrayFirst if b != b']' => self.begin_value(buf, i, base, sink),
            State::ObjectFirst | State::Key if b == b'"' => self.string(true, buf, i, base, sink),
            state => {
                self.punctuation(state, b, at, sink)?;
                // After a closer, the `,` that usually follows.
                Ok(self.separator(buf, i + 1))
            }
        }
    }

    /// A byte between tokens that is not the start of a value or key.
    fn punctuation<S: Sink<Mark = M>>(
        &mut self,
        state: State,
        b: u8,
        at: u64,
        sink: &mut S,
    ) -> Result<(), JsonError> {
        match state {
            State::ArrayFirst if b == b']' => self.close(at, sink),
            State::ObjectFirst if b == b'}' => self.close(at, sink),
            State::Colon if b == b':' => {
                self.state = State::Value;
                Ok(())
            }
            State::After => match (b, self.stack.last()) {
                (b',', Some(Open::Array { .. })) => {
                    self.state = State::Value;
                    Ok(())
                }
                (b',', Some(Open::Object { .. })) => {
                    self.state = State::Key;
                    Ok(())
                }
                (b']', Some(Open::Array { .. })) | (b'}', Some(Open::Object { .. })) => {
                    self.close(at, sink)
                }
                _ => Err(misplaced(b, at, syntax)),
            },
            State::Done => Err(misplaced(b, at, trailing)),
            _ => Err(misplaced(b, at, syntax)),
        }
    }

    /// A value starts with `buf[i]`; returns the index of the next byte to read.
    fn begin_value<S: Sink<Mark = M>>(
        &mut self,
        buf: &[u8],
        i: usize,
        base: u64,
        sink: &mut S,
    ) -> Result<usize, JsonError> {
        let (b, at) = (
            buf.get(i).copied().ok_or(JsonError::Internal)?,
            base + i as u64,
        );
        let depth = self.stack.len();
        if let Some(Open::Array { next_index, .. }) = self.stack.last() {
            sink.element(depth, *next_index);
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
                if b == b'[' {
                    let mark = sink.open(Kind::Array);
                    self.stack.push(Open::Array {
                        next_index: 0,
                        mark,
                    });
                    self.state = State::ArrayFirst;
                } else {
                    let mark = sink.open(Kind::Object);
                    self.stack.push(Open::Object { mark });
                    self.state = State::ObjectFirst;
                }
            }
            b'"' => return self.string(false, buf, i, base, sink),
            b'-' | b'0'..=b'9' => {
                if let Some((end, value)) = self.number.plain(buf, i, at) {
                    sink.number(value?, at, base + end as u64)?;
                    self.value_done();
                    return Ok(self.separator(buf, end));
                }
                self.number.begin(b, at)?;
                self.state = State::Num;
            }
            b't' => self.begin_literal(Literal::True),
            b'f' => self.begin_literal(Literal::False),
            b'n' => self.begin_literal(Literal::Null),
            _ => return Err(misplaced(b, at, syntax)),
        }
        Ok(i + 1)
    }

    #[inline]
    fn begin_literal(&mut self, literal: Literal) {
        self.literal = literal;
        self.literal_pos = 1;
        self.state = State::Lit;
    }

    /// A string (a key if `key`) opens with the quote at `buf[i]`. Most strings are plain ASCII
    /// and end in the same chunk: found with one scan for the next special byte and told as one
    /// piece, without the string lexer. Anything else (an escape, non-ASCII, a control byte, the
    /// chunk's end) is the lexer's from that byte on. Returns the index of the next byte to read.
    #[inline]
    fn string<S: Sink<Mark = M>>(
        &mut self,
        key: bool,
        buf: &[u8],
        i: usize,
        base: u64,
        sink: &mut S,
    ) -> Result<usize, JsonError> {
        let at = base + i as u64;
        let start = i + 1;
        let end = skip_ascii(buf, start);
        let run = Run::within(buf, start, end).ok_or(JsonError::Internal)?;
        if buf.get(end) == Some(&b'"') {
            sink.string(key, at, run)?;
            self.after_string(key);
            return Ok(self.separator(buf, end + 1));
        }
        sink.string_begin(key, at);
        if end > start {
            sink.text(run);
        }
        self.in_key = key;
        self.text.begin();
        self.state = State::Str;
        Ok(end)
    }

    /// Takes the `:` after a key or the `,` after a value when it follows at once, as the
    /// structural states would, without a turn of the byte loop; returns the index after it.
    #[inline]
    fn separator(&mut self, buf: &[u8], i: usize) -> usize {
        match (self.state, buf.get(i)) {
            (State::Colon, Some(b':')) => self.state = State::Value,
            (State::After, Some(b',')) => match self.stack.last() {
                Some(Open::Array { .. }) => self.state = State::Value,
                Some(Open::Object { .. }) => self.state = State::Key,
                None => return i,
            },
            _ => return i,
        }
        i + 1
    }

    /// A string (a key if `key`) has been told whole to the sink.
    #[inline]
    fn after_string(&mut self, key: bool) {
        if key {
            self.state = State::Colon;
        } else {
            self.value_done();
        }
    }

    /// Closes the innermost container: only reached with its closer (the states guarantee it).
    fn close<S: Sink<Mark = M>>(&mut self, at: u64, sink: &mut S) -> Result<(), JsonError> {
        match self.stack.pop() {
            Some(Open::Array { mark, .. }) => sink.close(Kind::Array, mark, at)?,
            Some(Open::Object { mark }) => sink.close(Kind::Object, mark, at)?,
            None => return Err(JsonError::Internal),
        }
        self.value_done();
        Ok(())
    }
}

#[inline]
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn syntax(offset: u64) -> JsonError {
    JsonError::Syntax { offset }
}

fn trailing(offset: u64) -> JsonError {
    JsonError::TrailingData { offset }
}
