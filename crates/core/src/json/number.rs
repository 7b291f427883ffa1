//! Number tokens. Unlike strings they are buffered (up to `max_number_len`), because correct
//! rounding needs the whole token; the bound keeps that O(1).

use alloc::vec::Vec;
use sha2::{Digest, Sha256};

use super::cache::HashCache;
use super::lexer::Hash;
use super::{misplaced, JsonError};

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
    pub(super) fn digest(&self, cache: &mut HashCache) -> Result<Hash, JsonError> {
        cache.get(b'd', &self.text, || self.compute())
    }

    fn compute(&self) -> Result<Hash, JsonError> {
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
