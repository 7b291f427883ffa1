//! Lists of byte strings across the boundary as one buffer and their lengths: one copy and two
//! arguments however long the list, and no per-item JS glue (an array of strings would cost both).

use crate::error::{CodedError, INVALID_ARGUMENT};
use alloc::vec::Vec;

/// Splits `joined` into consecutive parts of `lengths` bytes; the lengths must cover it exactly.
pub fn split<'a>(joined: &'a [u8], lengths: &[u32]) -> Result<Vec<&'a [u8]>, CodedError> {
    let mut parts = Vec::with_capacity(lengths.len());
    let mut rest = joined;
    for &len in lengths {
        let (part, tail) = usize::try_from(len)
            .ok()
            .and_then(|len| rest.split_at_checked(len))
            .ok_or_else(|| CodedError::new(INVALID_ARGUMENT, "lengths exceed the joined values"))?;
        parts.push(part);
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(CodedError::new(
            INVALID_ARGUMENT,
            "lengths do not cover the joined values",
        ));
    }
    Ok(parts)
}

/// A part that must be text (a method, a path, a name).
pub fn text(part: &[u8]) -> Result<&str, CodedError> {
    core::str::from_utf8(part).map_err(|_| CodedError::new(INVALID_ARGUMENT, "not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_must_cover_the_buffer() {
        assert_eq!(
            split(b"abcd", &[1, 0, 3]),
            Ok(alloc::vec![&b"a"[..], b"", b"bcd"])
        );
        assert_eq!(split(b"", &[]), Ok(Vec::new()));
        for lengths in [&[5u32][..], &[3]] {
            assert_eq!(
                split(b"abcd", lengths).map_err(|e| e.code),
                Err(INVALID_ARGUMENT)
            );
        }
        assert_eq!(text(b"\xff").map_err(|e| e.code), Err(INVALID_ARGUMENT));
    }
}
