//! Error texts without `core::fmt`'s machinery.
//!
//! `write!(f, "… {offset}")` pulls `fmt::write`, `Formatter::pad_integral` and the integer
//! `Display` impls into every `.wasm` that renders an error, and `to_string()` on any error pulls
//! `fmt::write` again through `String`'s `fmt::Write` vtable: ≈ 2 KB of the browser module, where
//! nothing else formats. So each error writes its text once, piece by piece, into a [`Text`]:
//! a `Formatter` for its `Display`, or a `String` for its `message()`, which is what the browser
//! module calls. The texts are the same either way (pinned by each error's tests).

use alloc::string::String;
use core::fmt;

/// One decimal digit per slot, so a number is written with no buffer index or UTF-8 check.
const DIGITS: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];

/// `n` in decimal ASCII digits, without `core::fmt` (which would pull its machinery into the
/// `.wasm`) and with no buffer index that could fall outside the buffer: a `u64` has at most 20
/// digits, so the 20 slots always hold all of them. Error texts and the canonical JSON encoding
/// (`json::number`) both write numbers with it.
pub(crate) struct Digits {
    digits: [u8; 20],
    len: usize,
}

impl Digits {
    #[inline]
    pub(crate) fn of(mut n: u64) -> Digits {
        let mut digits = [0u8; 20];
        let mut len = 0;
        for slot in digits.iter_mut().rev() {
            *slot = b'0' + (n % 10) as u8;
            n /= 10;
            len += 1;
            if n == 0 {
                break;
            }
        }
        Digits { digits, len }
    }

    /// The digits, most significant first.
    #[inline]
    pub(crate) fn ascii(&self) -> &[u8] {
        let start = self.digits.len().saturating_sub(self.len);
        self.digits.get(start..).unwrap_or_default()
    }
}

/// Where an error text is written.
pub trait Text {
    fn put(&mut self, piece: &str) -> fmt::Result;

    /// Writes `n` in decimal, like `{n}` would.
    fn put_u64(&mut self, n: u64) -> fmt::Result {
        for &digit in Digits::of(n).ascii() {
            self.put(
                DIGITS
                    .get(usize::from(digit - b'0'))
                    .copied()
                    .unwrap_or("?"),
            )?;
        }
        Ok(())
    }

    /// Writes `before`, `n` in decimal, then `after`: the shape of most error texts with a number.
    fn put_between(&mut self, before: &str, n: u64, after: &str) -> fmt::Result {
        self.put(before)?;
        self.put_u64(n)?;
        self.put(after)
    }
}

impl Text for fmt::Formatter<'_> {
    fn put(&mut self, piece: &str) -> fmt::Result {
        self.write_str(piece)
    }
}

impl Text for String {
    fn put(&mut self, piece: &str) -> fmt::Result {
        self.push_str(piece);
        Ok(())
    }
}

/// The text `write` produces, as a `String`.
pub fn message(write: impl FnOnce(&mut String) -> fmt::Result) -> String {
    let mut out = String::new();
    // Writing into a `String` cannot fail: its `put` always answers `Ok`.
    let _ = write(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn digits_are_the_decimal_spelling() {
        for n in [0, 7, 10, 99, 1_000_000_007, u64::MAX] {
            assert_eq!(Digits::of(n).ascii(), n.to_string().as_bytes());
        }
    }

    struct Between(u64);

    impl fmt::Display for Between {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.put_between("<", self.0, ">")
        }
    }

    #[test]
    fn numbers_read_as_the_formatter_writes_them() {
        let powers = (0..20).map(|e| 10u64.pow(e));
        let around = powers.flat_map(|p| [p - 1, p, p + 1]);
        for n in around.chain([12_345, u64::from(u32::MAX), u64::MAX - 1, u64::MAX]) {
            let mut expected = String::from("<");
            expected.push_str(&n.to_string());
            expected.push('>');
            assert_eq!(Between(n).to_string(), expected);
            assert_eq!(message(|t| t.put_between("<", n, ">")), expected);
        }
    }
}
