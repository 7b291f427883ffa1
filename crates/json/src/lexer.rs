//! String lexer that survives chunk boundaries: every multi-byte construct (UTF-8 sequence, escape,
//! surrogate pair) keeps its partial state here instead of looking ahead in the buffer.

use crate::sink::{Run, Sink};
use crate::{misplaced, JsonError};

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

/// Decodes string content and hands it to the tokenizer's [`Sink`] as it goes, so neither the lexer
/// nor the hasher ever holds a whole string.
pub(super) struct StrLexer {
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

/// Outcome of feeding string bytes: the string goes on, or it ended and parsing resumes at this
/// index (just past the closing quote).
pub(super) enum Scan {
    More,
    Done(usize),
}

impl StrLexer {
    pub(super) fn new() -> Self {
        StrLexer {
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
        self.mode = Mode::Plain;
        self.need = 0;
        self.high = 0;
    }

    /// What a body ending inside this string means.
    pub(super) fn eof_error(&self, end: u64) -> JsonError {
        if self.mode == Mode::Plain && self.need > 0 {
            JsonError::InvalidUtf8 { offset: end }
        } else {
            JsonError::UnexpectedEnd { offset: end }
        }
    }

    /// Consumes string content from `buf[i..]` into `sink`; `base` is the offset of `buf[0]`.
    pub(super) fn scan<S: Sink>(
        &mut self,
        buf: &[u8],
        mut i: usize,
        base: u64,
        sink: &mut S,
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
                    // `plain_run` only moves forward within `buf`, so this is never `None`.
                    if i > start {
                        sink.text(Run::within(buf, start, i).ok_or(JsonError::Internal)?);
                    }
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
                    sink.text(Run::whole(&[decoded]));
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
                        self.code_unit(at, sink)?;
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
        loop {
            if self.need == 0 {
                i = skip_ascii(buf, i);
                let Some(&b) = buf.get(i) else {
                    return Ok(i);
                };
                let (need, lo, hi) = match b {
                    0x00..=0x7F => return Ok(i),
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
            } else {
                let Some(&b) = buf.get(i) else {
                    return Ok(i);
                };
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
    }

    /// Handles a complete `\uXXXX` code unit, pairing surrogates.
    fn code_unit<S: Sink>(&mut self, at: u64, sink: &mut S) -> Result<(), JsonError> {
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
        if ch == '\0' {
            // The only way a 00 byte reaches a string: told apart, as the hasher escapes it.
            sink.text_nul();
        } else {
            let mut utf8 = [0u8; 4];
            sink.text(Run::whole(ch.encode_utf8(&mut utf8).as_bytes()));
        }
        self.mode = Mode::Plain;
        Ok(())
    }
}

/// Index of the first byte at or after `i` that is not printable ASCII other than `"` and `\\`.
/// Eight bytes at a time, since string content is most of a typical body; the word that holds
/// the byte also tells where it is, so only the last few bytes of a chunk go one by one.
pub(super) fn skip_ascii(buf: &[u8], i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let Some(mut rest) = buf.get(i..) else {
        return i;
    };
    let mut at = i;
    while let Some((word, tail)) = rest.split_first_chunk::<8>() {
        let x = u64::from_le_bytes(*word);
        let quote = x ^ (ONES * u64::from(b'"'));
        let backslash = x ^ (ONES * u64::from(b'\\'));
        // Exact "some byte is < 0x20, == '"', == '\\' or >= 0x80" test (no false positives
        // without a true one, as borrows only start at a matching byte and run upwards: the
        // lowest flagged byte, the first in the text, is always a true one).
        let special = ((x.wrapping_sub(ONES * 0x20) & !x)
            | (quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | x)
            & HIGH;
        if special != 0 {
            return at + (special.trailing_zeros() / 8) as usize;
        }
        at += 8;
        rest = tail;
    }
    for &b in rest {
        if !(0x20..0x80).contains(&b) || b == b'"' || b == b'\\' {
            break;
        }
        at += 1;
    }
    at
}

fn invalid_escape(offset: u64) -> JsonError {
    JsonError::InvalidEscape { offset }
}
