//! Token lexers that survive chunk boundaries: every multi-byte construct (UTF-8 sequence, escape,
//! surrogate pair, number) keeps its partial state here instead of looking ahead in the buffer.

use alloc::vec::Vec;
use sha2::{Digest, Sha256};

use super::pointer::FieldTracker;
use super::{misplaced, JsonError};

pub(super) type Hash = [u8; 32];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Plain,
    Escape,
    Hex,
    /// After a high surrogate: the next thing must be `\`.
    PairBackslash,
    /// After a high surrogate and `\`: the next thing must be `u`.
    PairU,
}

/// Decodes string content straight into the string's running hash, so no string is ever held.
pub(super) struct StrLexer {
    hasher: Sha256,
    mode: Mode,
    /// Continuation bytes still owed by the current UTF-8 sequence.
    need: u8,
    /// Allowed range of the next continuation byte (narrowed after E0, ED, F0, F4 leads).
    lo: u8,
    hi: u8,
    hex_len: u8,
    hex: u32,
    /// Pending high surrogate, 0 when none.
    high: u32,
}

/// Outcome of feeding string bytes: the string goes on, or ended just before this index.
pub(super) enum Scan {
    More,
    Done(usize),
}

impl StrLexer {
    pub(super) fn new() -> Self {
        StrLexer {
            hasher: Sha256::new(),
            mode: Mode::Plain,
            need: 0,
            lo: 0x80,
            hi: 0xBF,
            hex_len: 0,
            hex: 0,
            high: 0,
        }
    }

    /// Starts a string (the opening quote has been consumed).
    pub(super) fn begin(&mut self) {
        self.hasher = Sha256::new();
        self.hasher.update(b"s");
        self.mode = Mode::Plain;
        self.need = 0;
        self.high = 0;
    }

    /// The value hash of the string just ended.
    pub(super) fn digest(&mut self) -> Hash {
        core::mem::take(&mut self.hasher).finalize().into()
    }

    /// What a body ending inside this string means.
    pub(super) fn eof_error(&self, end: u64) -> JsonError {
        if self.mode == Mode::Plain && self.need > 0 {
            JsonError::InvalidUtf8 { offset: end }
        } else {
            JsonError::UnexpectedEnd
        }
    }

    /// Consumes string content from `buf[i..]`; `base` is the body offset of `buf[0]`. `key`
    /// receives the decoded bytes too when the string is an object key watched by field pointers.
    pub(super) fn scan(
        &mut self,
        buf: &[u8],
        mut i: usize,
        base: u64,
        mut key: Option<&mut FieldTracker<'_>>,
    ) -> Result<Scan, JsonError> {
        loop {
            let Some(&b) = buf.get(i) else {
                return Ok(Scan::More);
            };
            let at = base + i as u64;
            match self.mode {
                Mode::Plain => {
                    let start = i;
                    i = self.plain_run(buf, i, base)?;
                    let run = buf.get(start..i).unwrap_or_default();
                    self.emit(run, key.as_deref_mut());
                    let Some(&b) = buf.get(i) else {
                        return Ok(Scan::More);
                    };
                    match b {
                        b'"' => return Ok(Scan::Done(i + 1)),
                        b'\\' => self.mode = Mode::Escape,
                        _ => {
                            return Err(JsonError::ControlCharacter {
                                offset: base + i as u64,
                            })
                        }
                    }
                }
                Mode::Escape => {
                    let decoded = match b {
                        b'"' | b'\\' | b'/' => b,
                        b'b' => 0x08,
                        b'f' => 0x0C,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            self.mode = Mode::Hex;
                            self.hex_len = 0;
                            self.hex = 0;
                            i += 1;
                            continue;
                        }
                        _ => return Err(misplaced(b, at, invalid_escape)),
                    };
                    self.emit(&[decoded], key.as_deref_mut());
                    self.mode = Mode::Plain;
                }
                Mode::Hex => {
                    let digit = match b {
                        b'0'..=b'9' => b - b'0',
                        b'a'..=b'f' => b - b'a' + 10,
                        b'A'..=b'F' => b - b'A' + 10,
                        _ => return Err(misplaced(b, at, invalid_escape)),
                    };
                    self.hex = (self.hex << 4) | u32::from(digit);
                    self.hex_len += 1;
                    if self.hex_len == 4 {
                        self.code_unit(at, key.as_deref_mut())?;
                    }
                }
                Mode::PairBackslash | Mode::PairU => {
                    let want = if self.mode == Mode::PairBackslash {
                        b'\\'
                    } else {
                        b'u'
                    };
                    if b != want {
                        return Err(misplaced(b, at, invalid_escape));
                    }
                    if self.mode == Mode::PairBackslash {
                        self.mode = Mode::PairU;
                    } else {
                        self.mode = Mode::Hex;
                        self.hex_len = 0;
                        self.hex = 0;
                    }
                }
            }
            i += 1;
        }
    }

    /// Skips over plain content (ASCII text and well-formed UTF-8), returning the index of the
    /// first byte that needs attention (quote, backslash, control) or the end of the buffer.
    fn plain_run(&mut self, buf: &[u8], mut i: usize, base: u64) -> Result<usize, JsonError> {
        while let Some(&b) = buf.get(i) {
            if self.need == 0 {
                if b < 0x80 {
                    if b < 0x20 || b == b'"' || b == b'\\' {
                        return Ok(i);
                    }
                } else {
                    let (need, lo, hi) = match b {
                        0xC2..=0xDF => (1, 0x80, 0xBF),
                        0xE0 => (2, 0xA0, 0xBF),
                        0xED => (2, 0x80, 0x9F),
                        0xE1..=0xEF => (2, 0x80, 0xBF),
                        0xF0 => (3, 0x90, 0xBF),
                        0xF1..=0xF3 => (3, 0x80, 0xBF),
                        0xF4 => (3, 0x80, 0x8F),
                        _ => {
                            return Err(JsonError::InvalidUtf8 {
                                offset: base + i as u64,
                            })
                        }
                    };
                    self.need = need;
                    self.lo = lo;
                    self.hi = hi;
                }
            } else {
                if b < self.lo || b > self.hi {
                    return Err(JsonError::InvalidUtf8 {
                        offset: base + i as u64,
                    });
                }
                self.need -= 1;
                self.lo = 0x80;
                self.hi = 0xBF;
            }
            i += 1;
        }
        Ok(i)
    }

    /// Handles a complete `\uXXXX` code unit, pairing surrogates.
    fn code_unit(&mut self, at: u64, key: Option<&mut FieldTracker<'_>>) -> Result<(), JsonError> {
        let unit = self.hex;
        let scalar = if self.high != 0 {
            if !(0xDC00..=0xDFFF).contains(&unit) {
                return Err(JsonError::InvalidEscape { offset: at });
            }
            let combined = 0x10000 + ((self.high - 0xD800) << 10) + (unit - 0xDC00);
            self.high = 0;
            combined
        } else if (0xD800..=0xDBFF).contains(&unit) {
            self.high = unit;
            self.mode = Mode::PairBackslash;
            return Ok(());
        } else {
            unit
        };
        let Some(ch) = char::from_u32(scalar) else {
            return Err(JsonError::InvalidEscape { offset: at });
        };
        let mut utf8 = [0u8; 4];
        self.emit(ch.encode_utf8(&mut utf8).as_bytes(), key);
        self.mode = Mode::Plain;
        Ok(())
    }

    fn emit(&mut self, bytes: &[u8], key: Option<&mut FieldTracker<'_>>) {
        if bytes.is_empty() {
            return;
        }
        self.hasher.update(bytes);
        if let Some(tracker) = key {
            tracker.key_bytes(bytes);
        }
    }
}

fn invalid_escape(offset: u64) -> JsonError {
    JsonError::InvalidEscape { offset }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum NumState {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpDigits,
}

/// What the next byte does to a number token.
pub(super) enum Step {
    /// Part of the token (already buffered).
    Take,
    /// Not part of the token; the token is complete and the byte belongs to what follows.
    End,
}

/// Buffers one number token (bounded by `max_number_len`) so it can be parsed with correct
/// rounding by `core`'s float parser, which needs the whole token.
pub(super) struct NumberLexer {
    state: NumState,
    text: Vec<u8>,
    start: u64,
    max_len: usize,
}

impl NumberLexer {
    pub(super) fn new(max_len: u16) -> Self {
        NumberLexer {
            state: NumState::Int,
            text: Vec::new(),
            start: 0,
            max_len: usize::from(max_len),
        }
    }

    /// Starts a token with its first byte (`-` or a digit).
    pub(super) fn begin(&mut self, b: u8, at: u64) -> Result<(), JsonError> {
        self.text.clear();
        self.start = at;
        self.state = match b {
            b'-' => NumState::Minus,
            b'0' => NumState::Zero,
            _ => NumState::Int,
        };
        self.push(b)
    }

    pub(super) fn step(&mut self, b: u8, at: u64) -> Result<Step, JsonError> {
        use NumState::*;
        let next = match (self.state, b) {
            (Minus, b'0') => Zero,
            (Minus | Int, b'0'..=b'9') => Int,
            (Zero | Int, b'.') => Dot,
            (Dot | Frac, b'0'..=b'9') => Frac,
            (Zero | Int | Frac, b'e' | b'E') => Exp,
            (Exp, b'+' | b'-') => ExpSign,
            (Exp | ExpSign | ExpDigits, b'0'..=b'9') => ExpDigits,
            (Zero | Int | Frac | ExpDigits, _) => return Ok(Step::End),
            (Minus | Dot | Exp | ExpSign, _) => return Err(misplaced(b, at, syntax)),
        };
        self.state = next;
        self.push(b)?;
        Ok(Step::Take)
    }

    /// Whether the token so far is a complete number (so end of input may follow).
    pub(super) fn is_complete(&self) -> bool {
        matches!(
            self.state,
            NumState::Zero | NumState::Int | NumState::Frac | NumState::ExpDigits
        )
    }

    /// Value hash of the completed token.
    pub(super) fn digest(&self) -> Result<Hash, JsonError> {
        let out_of_range = JsonError::NumberOutOfRange { offset: self.start };
        let text = core::str::from_utf8(&self.text).map_err(|_| out_of_range.clone())?;
        let value: f64 = text.parse().map_err(|_| out_of_range.clone())?;
        if !value.is_finite() {
            return Err(out_of_range);
        }
        // -0 and +0 are one number when numbers compare as doubles.
        let value = if value == 0.0 { 0.0 } else { value };
        let mut hasher = Sha256::new();
        hasher.update(b"d");
        hasher.update(value.to_bits().to_be_bytes());
        Ok(hasher.finalize().into())
    }

    fn push(&mut self, b: u8) -> Result<(), JsonError> {
        if self.text.len() >= self.max_len {
            return Err(JsonError::NumberTooLong { offset: self.start });
        }
        self.text.push(b);
        Ok(())
    }
}

fn syntax(offset: u64) -> JsonError {
    JsonError::Syntax { offset }
}
