//! Number tokens, kept as their exact decimal value: no float parsing, so `9007199254740993` and
//! `9007199254740992` stay two numbers while `1`, `1.0`, `1e0` and `10e-1` are one.
//!
//! A token is read digit by digit into a sign, its significant digits (leading zeros dropped as
//! they come, trailing ones at the end) and a decimal exponent, so that value = ± digits × 10^exp.
//! Only the significant digits are held, bounded by `max_number_len` (the token's length); the
//! written exponent is accumulated as an integer that saturates far beyond the accepted range.

use crate::text::Digits;
use alloc::vec::Vec;

use crate::{append, append_ahead, misplaced, JsonError};

/// Largest accepted magnitude of a non-zero number's order of magnitude (its exponent in
/// scientific notation, `d.ddd × 10^a`): numbers from 1e-9999 to 9.99…e9999 (and zero, however
/// written) are accepted, beyond that `json_number_out_of_range`. No API sends such numbers; the
/// bound keeps the canonical exponent a small integer.
pub const MAX_MAGNITUDE: i64 = 9999;

/// The written exponent stops growing here: far beyond any accepted value even after shifting by
/// the digits of a `u16`-bounded token, so saturation cannot change a verdict.
const EXPONENT_CAP: u64 = 1_000_000_000;

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
pub(super) enum Lexed {
    /// Part of the token (already taken in).
    Take,
    /// Not part of the token; the token is complete and the byte belongs to what follows.
    End,
}

/// Reads one number token into its exact decimal value.
pub(super) struct NumberLexer {
    state: NumState,
    negative: bool,
    /// Significant digits (ASCII) from the first non-zero one on.
    digits: Vec<u8>,
    /// Digits written after the `.` (leading zeros included).
    fraction_digits: u64,
    exponent_negative: bool,
    /// The written exponent's magnitude, saturated at `EXPONENT_CAP`.
    exponent: u64,
    /// Token bytes so far, bounded by `max_len`.
    len: usize,
    start: u64,
    max_len: usize,
}

impl NumberLexer {
    pub(super) fn new(max_len: u16) -> Self {
        NumberLexer {
            state: NumState::Int,
            negative: false,
            digits: Vec::new(),
            fraction_digits: 0,
            exponent_negative: false,
            exponent: 0,
            len: 0,
            start: 0,
            max_len: usize::from(max_len),
        }
    }

    /// Starts a token with its first byte (`-` or a digit).
    pub(super) fn begin(&mut self, b: u8, at: u64) -> Result<(), JsonError> {
        self.digits.clear();
        self.negative = b == b'-';
        self.fraction_digits = 0;
        self.exponent_negative = false;
        self.exponent = 0;
        self.len = 0;
        self.start = at;
        self.state = match b {
            b'-' => NumState::Minus,
            b'0' => NumState::Zero,
            _ => NumState::Int,
        };
        self.take(b)
    }

    // Inlined into the tokenizer's number loop: called once per byte of a number, the call and
    // its `Result` through memory cost about as much as the step itself (`make bench-work`).
    #[inline(always)]
    pub(super) fn step(&mut self, b: u8, at: u64) -> Result<Lexed, JsonError> {
        use NumState::*;
        let next = match (self.state, b) {
            (Minus, b'0') => Zero,
            (Minus | Int, b'0'..=b'9') => Int,
            (Zero | Int, b'.') => Dot,
            (Dot | Frac, b'0'..=b'9') => Frac,
            (Zero | Int | Frac, b'e' | b'E') => Exp,
            (Exp, b'+' | b'-') => ExpSign,
            (Exp | ExpSign | ExpDigits, b'0'..=b'9') => ExpDigits,
            (Zero | Int | Frac | ExpDigits, _) => return Ok(Lexed::End),
            (Minus | Dot | Exp | ExpSign, _) => return Err(misplaced(b, at, syntax)),
        };
        self.state = next;
        self.take(b)?;
        Ok(Lexed::Take)
    }

    /// Reads the whole token that starts at `buf[i]` (offset `at`) at once when it is plain (an
    /// integer or a decimal fraction, no exponent) and ends inside `buf` within the length limit,
    /// the common case: the same value `begin` and `step` would build, without a state per byte.
    /// Returns the index of the byte after the token and its value (its digits are borrowed from
    /// `buf`, not copied), or `None` (nothing taken) to leave the token to `begin` and `step`: an
    /// exponent, a malformed or too long token, the chunk's end.
    #[inline]
    pub(super) fn plain<'b>(
        &self,
        buf: &'b [u8],
        i: usize,
        at: u64,
    ) -> Option<(usize, Result<Decimal<'b>, JsonError>)> {
        let negative = buf.get(i) == Some(&b'-');
        let int_start = i + usize::from(negative);
        let int_end = match buf.get(int_start) {
            Some(b'0') => int_start + 1,
            Some(b'1'..=b'9') => digits_end(buf, int_start + 1),
            _ => return None,
        };
        let (frac_start, end) = match buf.get(int_end) {
            Some(b'.') => (int_end + 1, digits_end(buf, int_end + 1)),
            _ => (int_end, int_end),
        };
        // A `.` without digits, an exponent, a digit after a leading `0`, or the chunk's end: the
        // byte-by-byte steps decide (and report any error at the byte they do).
        if end == frac_start && frac_start != int_end
            || matches!(buf.get(end), None | Some(b'e' | b'E' | b'0'..=b'9'))
            || end - i > self.max_len
        {
            return None;
        }
        let int = buf.get(int_start..int_end)?;
        let fraction = buf.get(frac_start..end)?;
        // A fraction's trailing zeros are not significant: without them, a fraction of zeros
        // leaves the integer (`3.00` is `3`), and any other is the integer's digits followed by
        // the fraction's, both borrowed from `buf` (a `0` integer part has none, and then the
        // fraction's leading zeros are not significant either).
        let trailing = fraction.iter().rev().take_while(|&&d| d == b'0').count();
        let fraction = fraction.get(..fraction.len() - trailing)?;
        let int_ahead = buf.get(int_start..)?;
        if fraction.is_empty() {
            return Some((end, integer(negative, int, int_ahead, at)));
        }
        let fraction_ahead = buf.get(frac_start..)?;
        let (digits, digits_ahead, more, more_ahead) = if int == b"0" {
            let leading = fraction.iter().take_while(|&&d| d == b'0').count();
            let ahead = fraction_ahead.get(leading..)?;
            (fraction.get(leading..)?, ahead, &[][..], &[][..])
        } else {
            (int, int_ahead, fraction, fraction_ahead)
        };
        // Fewer than a `u16` of digits each: no overflow in i64.
        let exponent = -(fraction.len() as i64);
        let magnitude = exponent + (digits.len() + more.len()) as i64 - 1;
        if !(-MAX_MAGNITUDE..=MAX_MAGNITUDE).contains(&magnitude) {
            return Some((end, Err(JsonError::NumberOutOfRange { offset: at })));
        }
        Some((
            end,
            Ok(Decimal {
                negative,
                digits,
                digits_ahead,
                more,
                more_ahead,
                exponent,
            }),
        ))
    }

    /// Whether the token so far is a complete number (so end of input may follow).
    pub(super) fn is_complete(&self) -> bool {
        matches!(
            self.state,
            NumState::Zero | NumState::Int | NumState::Frac | NumState::ExpDigits
        )
    }

    /// Where the token began.
    pub(super) fn start(&self) -> u64 {
        self.start
    }

    /// The completed token's exact value, or `json_number_out_of_range` for a non-zero number
    /// whose order of magnitude is beyond ±[`MAX_MAGNITUDE`] (a limit of the one grammar: every
    /// consumer refuses such a number, not only the hasher).
    pub(super) fn value(&mut self) -> Result<Decimal<'_>, JsonError> {
        let trailing = self.digits.iter().rev().take_while(|&&d| d == b'0').count();
        self.digits.truncate(self.digits.len() - trailing);
        if self.digits.is_empty() {
            return Ok(Decimal::ZERO);
        }
        // |written| ≤ 1e9, the shifts are at most a u16 each: no overflow in i64.
        let written = if self.exponent_negative {
            -(self.exponent as i64)
        } else {
            self.exponent as i64
        };
        let exponent = written - self.fraction_digits as i64 + trailing as i64;
        let magnitude = exponent + self.digits.len() as i64 - 1;
        if !(-MAX_MAGNITUDE..=MAX_MAGNITUDE).contains(&magnitude) {
            return Err(JsonError::NumberOutOfRange { offset: self.start });
        }
        Ok(Decimal {
            negative: self.negative,
            digits: &self.digits,
            digits_ahead: &self.digits,
            more: &[],
            more_ahead: &[],
            exponent,
        })
    }

    /// Takes one byte of the token (already checked by the grammar) into the value.
    #[inline(always)]
    fn take(&mut self, b: u8) -> Result<(), JsonError> {
        if self.len >= self.max_len {
            return Err(JsonError::NumberTooLong { offset: self.start });
        }
        self.len += 1;
        match (self.state, b) {
            (NumState::Int | NumState::Frac, b'0'..=b'9') => {
                if self.state == NumState::Frac {
                    self.fraction_digits += 1;
                }
                if b != b'0' || !self.digits.is_empty() {
                    self.digits.push(b);
                }
            }
            (NumState::ExpSign, b'-') => self.exponent_negative = true,
            (NumState::ExpDigits, b'0'..=b'9') => {
                self.exponent = (self.exponent * 10 + u64::from(b - b'0')).min(EXPONENT_CAP);
            }
            // `-`, the lone `0` of `Zero`, `.`, `e`, `+`: structure, no value of their own.
            _ => {}
        }
        Ok(())
    }
}

/// A number's exact value: ± `digits` `more` × 10^`exponent`, with the significant digits
/// (ASCII) `digits` followed by `more` free of leading and trailing zeros; zero (however written,
/// `-0` included) has no digits. Two pieces, so a decimal fraction's digits are borrowed from the
/// token on both sides of its `.` rather than copied together.
#[derive(Clone, Copy, Debug)]
pub(super) struct Decimal<'d> {
    negative: bool,
    digits: &'d [u8],
    /// `digits` and the bytes after them in their buffer (at least `digits`): the encoder copies
    /// whole words from it and keeps the digits' length, where a `memory.copy` (in V8 a call out
    /// of the wasm code) cost more than the few digits.
    digits_ahead: &'d [u8],
    more: &'d [u8],
    /// `more` and the bytes after it, like `digits_ahead`.
    more_ahead: &'d [u8],
    exponent: i64,
}

impl Decimal<'_> {
    const ZERO: Decimal<'static> = Decimal {
        negative: false,
        digits: &[],
        digits_ahead: &[],
        more: &[],
        more_ahead: &[],
        exponent: 0,
    };
}

impl Decimal<'_> {
    /// Appends the canonical encoding: `d`, the canonical text, `;`. The text is `0` for zero;
    /// otherwise an optional `-`, the digits, `e` and the exponent in decimal (`-` if negative):
    /// `1.0` → `1e0`, `-0.250` → `-25e-2`, `1200` → `12e2`.
    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        if self.digits.is_empty() {
            append(out, b"d0;");
            return;
        }
        // The pieces around the digits as fixed-size copies (one store each), not byte by byte:
        // a push is a capacity check and a length update per byte.
        if self.negative {
            out.extend_from_slice(b"d-");
        } else {
            out.push(b'd');
        }
        append_ahead(out, self.digits.len(), self.digits_ahead);
        if !self.more.is_empty() {
            append_ahead(out, self.more.len(), self.more_ahead);
        }
        match self.exponent {
            // Most exponents are one digit (`0` for every integer without trailing zeros).
            small @ 0..=9 => out.extend_from_slice(&[b'e', b'0' + small as u8, b';']),
            small @ -9..=-1 => {
                out.extend_from_slice(&[b'e', b'-', b'0' + small.unsigned_abs() as u8, b';']);
            }
            large => {
                out.push(b'e');
                if large < 0 {
                    out.push(b'-');
                }
                write_decimal(out, large.unsigned_abs());
                out.push(b';');
            }
        }
    }
}

/// A number token's value as text (a key taken from a JSON body must compare by value,
/// exactly as the fingerprint does): `0` for zero; an integer as its plain decimal digits while
/// they are at most `plain_max` long (`1e2`, `100.0` and `100` are all `100`); any other value as
/// its canonical `<digits>e<exponent>` (`1.50` → `15e-1`). `None` if `token` is not one complete
/// number token or is out of range.
pub(super) fn value_text(token: &str, plain_max: usize) -> Option<Vec<u8>> {
    let mut lexer = NumberLexer::new(u16::try_from(token.len()).ok()?);
    let mut bytes = token.bytes();
    lexer.begin(bytes.next()?, 0).ok()?;
    for (at, b) in (1u64..).zip(bytes) {
        if !matches!(lexer.step(b, at).ok()?, Lexed::Take) {
            return None;
        }
    }
    if !lexer.is_complete() {
        return None;
    }
    let value = lexer.value().ok()?;
    let mut out = Vec::new();
    if value.digits.is_empty() {
        out.push(b'0');
        return Some(out);
    }
    if value.negative {
        out.push(b'-');
    }
    out.extend_from_slice(value.digits);
    let zeros = usize::try_from(value.exponent).ok();
    // The plain spelling's whole length, sign included, is what must fit.
    let sign = usize::from(value.negative);
    match zeros.filter(|z| sign + value.digits.len().saturating_add(*z) <= plain_max) {
        Some(zeros) => out.resize(out.len() + zeros, b'0'),
        None => {
            out.push(b'e');
            if value.exponent < 0 {
                out.push(b'-');
            }
            write_decimal(&mut out, value.exponent.unsigned_abs());
        }
    }
    Some(out)
}

/// The value of an integer token's digits `int` (no leading zero but a lone `0`), as `value`
/// would give it: trailing zeros become the exponent. `ahead` is `int` and what follows it in the
/// buffer (`Decimal::digits_ahead`).
#[inline]
fn integer<'b>(
    negative: bool,
    int: &'b [u8],
    ahead: &'b [u8],
    at: u64,
) -> Result<Decimal<'b>, JsonError> {
    let trailing = int.iter().rev().take_while(|&&d| d == b'0').count();
    let digits = int.get(..int.len() - trailing).unwrap_or_default();
    if digits.is_empty() {
        return Ok(Decimal::ZERO);
    }
    // The order of magnitude is the number of digits less one.
    if int.len() as i64 - 1 > MAX_MAGNITUDE {
        return Err(JsonError::NumberOutOfRange { offset: at });
    }
    Ok(Decimal {
        negative,
        digits,
        digits_ahead: ahead,
        more: &[],
        more_ahead: &[],
        exponent: trailing as i64,
    })
}

/// Index of the first byte at or after `i` that is not an ASCII digit.
#[inline]
fn digits_end(buf: &[u8], mut i: usize) -> usize {
    while matches!(buf.get(i), Some(b'0'..=b'9')) {
        i += 1;
    }
    i
}

/// Writes `n` in decimal ([`Digits`]: no `core::fmt`, no index that could fail).
#[inline]
fn write_decimal(out: &mut Vec<u8>, n: u64) {
    // Byte by byte: a few bytes are cheaper pushed than copied with `memory.copy` in wasm.
    for &digit in Digits::of(n).ascii() {
        out.push(digit);
    }
}

fn syntax(offset: u64) -> JsonError {
    JsonError::Syntax { offset }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn canonical(token: &str) -> Result<alloc::string::String, JsonError> {
        let mut lexer = NumberLexer::new(1024);
        let mut bytes = token.bytes();
        lexer.begin(bytes.next().unwrap(), 0)?;
        for (i, b) in bytes.enumerate() {
            assert!(
                matches!(lexer.step(b, i as u64 + 1)?, Lexed::Take),
                "{token}"
            );
        }
        assert!(lexer.is_complete(), "{token}");
        let mut out = Vec::new();
        lexer.value()?.encode(&mut out);
        Ok(alloc::string::String::from_utf8(out).unwrap())
    }

    #[test]
    fn spellings_of_one_value_are_one_encoding() {
        for (tokens, want) in [
            (
                &["1", "1.0", "1e0", "10e-1", "0.1e1", "1.000E+0", "100e-2"][..],
                "d1e0;",
            ),
            (
                &["0", "-0", "0.0", "-0.0e5", "0e-99999999999999999999"],
                "d0;",
            ),
            (&["1200", "12e2", "1.2e3", "0.0012e6"], "d12e2;"),
            (&["-0.250", "-25e-2", "-2.5E-1"], "d-25e-2;"),
            (&["9007199254740993"], "d9007199254740993e0;"),
            (&["9007199254740992"], "d9007199254740992e0;"),
            (&["1e9999", "10e9998"], "d1e9999;"),
            (&["1e-9999", "0.01e-9997"], "d1e-9999;"),
            (&["9.5e9999"], "d95e9998;"),
        ] {
            for token in tokens {
                assert_eq!(canonical(token).unwrap(), want, "{token}");
            }
        }
    }

    #[test]
    fn absurd_magnitudes_are_refused() {
        for token in [
            "1e10000",
            "10e9999",
            "1e-10000",
            "0.1e-9999",
            "1e99999999999999999999999",
            "-1e-99999999999999999999999",
        ] {
            assert_eq!(
                canonical(token),
                Err(JsonError::NumberOutOfRange { offset: 0 }),
                "{token}"
            );
        }
    }

    #[test]
    fn value_text_is_one_spelling_per_value() {
        let text =
            |t: &str| value_text(t, 20).map(|v| alloc::string::String::from_utf8(v).unwrap());
        for (tokens, want) in [
            (&["100", "1e2", "100.0", "1.00E+2", "10000e-2"][..], "100"),
            (&["0", "-0", "0.0e7"], "0"),
            (&["-42", "-4.2e1"], "-42"),
            (&["1.5", "15e-1", "1.50"], "15e-1"),
            (&["1e30"], "1e30"),
            (&["12345678901234567890"], "12345678901234567890"),
            // 20 characters with the sign: 19 digits plain, 20 digits in exponent form.
            (&["-1e18"], "-1000000000000000000"),
            (&["-1e19"], "-1e19"),
        ] {
            for token in tokens {
                assert_eq!(text(token).as_deref(), Some(want), "{token}");
            }
        }
        for bad in ["", "-", "1.", "1e", "01x", "1e10000"] {
            assert_eq!(text(bad), None, "{bad}");
        }
    }

    #[test]
    fn decimal_writer() {
        for n in [0u64, 7, 10, 99, 100, 9999, 10_000, u64::MAX / 10, u64::MAX] {
            let mut out = Vec::new();
            write_decimal(&mut out, n);
            assert_eq!(out, alloc::format!("{n}").into_bytes());
        }
    }
}
