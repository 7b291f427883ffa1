//! Errors that cross into JavaScript: an `Error` whose `name` is `IdemgateError` and whose `code` is
//! the core's stable `code()` string (or one of this crate's codes for misuse of the API).
//!
//! The object is made by one imported JS function taking two strings, so a host that runs the
//! `.wasm` without JavaScript (the wasmtime harness) can stub that one import and read the code.

use alloc::string::{String, ToString};
use core::fmt::Display;
use wasm_bindgen::prelude::*;

/// An argument a JS caller passed is out of range or of the wrong shape.
pub const INVALID_ARGUMENT: &str = "invalid_argument";
/// A `Fingerprinter` was used after `finish()`, or configured after its first `update()`.
pub const FINGERPRINTER_STATE: &str = "fingerprinter_state";

#[wasm_bindgen(inline_js = "export function idemgate_error(code, message) {
  const error = new Error(message);
  error.name = 'IdemgateError';
  error.code = code;
  return error;
}")]
extern "C" {
    fn idemgate_error(code: &str, message: &str) -> JsValue;
}

/// A stable code and a human message; becomes a JS `Error` at the boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodedError {
    pub code: &'static str,
    pub message: String,
}

impl CodedError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        CodedError {
            code,
            message: message.into(),
        }
    }

    /// From any core error: its `code()` and its `Display` text.
    pub fn from_core(code: &'static str, error: &impl Display) -> Self {
        CodedError::new(code, error.to_string())
    }
}

impl From<CodedError> for JsValue {
    fn from(error: CodedError) -> JsValue {
        idemgate_error(error.code, &error.message)
    }
}

/// Results of the exported functions.
pub type JsResult<T> = Result<T, JsValue>;

/// Milliseconds from JS (a double): finite, not negative; fractions are dropped; values beyond
/// 2^53 (no longer exact in JS) are refused.
pub fn millis(value: f64, name: &str) -> Result<u64, CodedError> {
    const MAX_SAFE: f64 = 9_007_199_254_740_991.0;
    if value.is_finite() && (0.0..=MAX_SAFE).contains(&value) {
        // Finite and in range: `as` drops the fraction and is exact for the rest.
        Ok(value as u64)
    } else {
        let mut message = String::from(name);
        message.push_str(" must be a number of milliseconds from 0 to 2^53-1");
        Err(CodedError::new(INVALID_ARGUMENT, message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_accepts_only_safe_non_negative_numbers() {
        assert_eq!(millis(0.0, "x"), Ok(0));
        assert_eq!(millis(1.9, "x"), Ok(1));
        assert_eq!(
            millis(9_007_199_254_740_991.0, "x"),
            Ok(9_007_199_254_740_991)
        );
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e300] {
            assert_eq!(millis(bad, "x").map_err(|e| e.code), Err(INVALID_ARGUMENT));
        }
    }
}
