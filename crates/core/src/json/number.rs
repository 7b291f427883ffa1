//! Number tokens. Unlike strings they are buffered (up to `max_number_len`), because correct
//! rounding needs the whole token; the bound keeps that O(1).

use alloc::vec::Vec;

use super::{append, misplaced, JsonError};

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

    /// Appends the canonical encoding of the completed token: `d`, then the f64's big-endian
    /// bits without trailing zero bytes, after their count (so `0` is 2 bytes and `1` is 4: the
    /// encoding of a number array stays about the size of its text).
    pub(super) fn encode(&self, out: &mut Vec<u8>) -> Result<(), JsonError> {
        let out_of_range = JsonError::NumberOutOfRange { offset: self.start };
        let value = match fast_value(&self.text) {
            Some(value) => value,
            None => {
                let text = core::str::from_utf8(&self.text).map_err(|_| out_of_range.clone())?;
                text.parse().map_err(|_| out_of_range.clone())?
            }
        };
        if !value.is_finite() {
            return Err(out_of_range);
        }
        // -0 and +0 are one number when numbers compare as doubles.
        let bits = if value == 0.0 { 0 } else { value.to_bits() };
        let len = 8 - (bits.trailing_zeros() / 8) as usize;
        append(out, &[b'd', len as u8]);
        append(out, bits.to_be_bytes().get(..len).unwrap_or_default());
        Ok(())
    }

    fn push(&mut self, b: u8) -> Result<(), JsonError> {
        if self.text.len() >= self.max_len {
            return Err(JsonError::NumberTooLong { offset: self.start });
        }
        self.text.push(b);
        Ok(())
    }
}

/// Exact powers of ten representable as f64.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// Clinger's fast path for the numbers bodies are made of (`-12`, `19.99`, no exponent): with a
/// decimal mantissa below 2^53 and at most 22 fraction digits, both operands are exact doubles
/// and one IEEE multiplication or division rounds correctly. `None` sends the token to `core`'s
/// general parser.
fn fast_value(text: &[u8]) -> Option<f64> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let mut mantissa: u64 = 0;
    let mut fraction_digits = 0usize;
    let mut in_fraction = false;
    for &b in digits {
        match b {
            b'0'..=b'9' => {
                mantissa = mantissa * 10 + u64::from(b - b'0');
                if mantissa >= 1 << 53 {
                    return None;
                }
                fraction_digits += usize::from(in_fraction);
            }
            b'.' => in_fraction = true,
            _ => return None,
        }
    }
    let scale = POW10.get(fraction_digits)?;
    let magnitude = mantissa as f64 / scale;
    Some(if negative { -magnitude } else { magnitude })
}

fn syntax(offset: u64) -> JsonError {
    JsonError::Syntax { offset }
}

#[cfg(test)]
mod tests {
    use super::fast_value;

    /// The fast path must be the correctly rounded value whenever it answers.
    #[test]
    fn fast_path_agrees_with_the_general_parser() {
        let mut tokens: alloc::vec::Vec<alloc::string::String> = [
            "0",
            "-0",
            "0.0",
            "1",
            "-1",
            "0.1",
            "0.3",
            "19.99",
            "123.456",
            "-2.5",
            "9007199254740991",
            "9007199254740992",
            "900719925474099.1",
            "0.0000000000000000000001",
            "0.00000000000000000000001",
            "1e5",
            "3.14159265358979",
            "4503599627370497.5",
        ]
        .iter()
        .map(|t| alloc::string::String::from(*t))
        .collect();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let digits = alloc::format!("{}", x % 10u64.pow((x % 17) as u32 + 1));
            let point = (x >> 40) as usize % (digits.len() + 1);
            let (int, frac) = digits.split_at(point);
            let int = if int.is_empty() { "0" } else { int };
            tokens.push(if frac.is_empty() {
                alloc::string::String::from(int)
            } else {
                alloc::format!("{int}.{frac}")
            });
        }
        let mut answered = 0;
        for token in &tokens {
            if let Some(fast) = fast_value(token.as_bytes()) {
                answered += 1;
                let general: f64 = token.parse().unwrap();
                assert_eq!(fast.to_bits(), general.to_bits(), "{token}");
            }
        }
        assert!(
            answered > tokens.len() / 2,
            "{answered} of {}",
            tokens.len()
        );
    }
}
