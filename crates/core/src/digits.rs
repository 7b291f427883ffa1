//! Integers in error texts without `core::fmt`'s integer formatting.
//!
//! `write!(f, "… {offset}")` pulls `fmt::write`, `Formatter::pad_integral` and the integer
//! `Display` impls into every `.wasm` that renders an error (≈ 1.3 KB of the browser module,
//! where nothing else formats numbers). The error texts write their pieces with `write_str` and
//! their integers with [`write_u64`] instead, so the texts are unchanged and that code is gone.

use core::fmt::{self, Write};

/// Writes `n` in decimal, like `{n}` would, with no buffer index that could fall outside its
/// buffer: a `u64` has at most 20 digits, so the 20 slots always hold all of them.
pub(crate) fn write_u64(f: &mut fmt::Formatter<'_>, mut n: u64) -> fmt::Result {
    let mut digits = [0u8; 20];
    let mut len = 0;
    for slot in digits.iter_mut() {
        *slot = b'0' + (n % 10) as u8;
        n /= 10;
        len += 1;
        if n == 0 {
            break;
        }
    }
    for &digit in digits.iter().take(len).rev() {
        f.write_char(char::from(digit))?;
    }
    Ok(())
}

/// Writes `before`, `n` in decimal, then `after`: the shape of most error texts with a number.
pub(crate) fn write_between(
    f: &mut fmt::Formatter<'_>,
    before: &str,
    n: u64,
    after: &str,
) -> fmt::Result {
    f.write_str(before)?;
    write_u64(f, n)?;
    f.write_str(after)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::{String, ToString};

    struct Between(u64);

    impl fmt::Display for Between {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write_between(f, "<", self.0, ">")
        }
    }

    #[test]
    fn writes_what_the_formatter_writes() {
        for n in [
            0,
            1,
            9,
            10,
            99,
            100,
            12_345,
            u64::from(u32::MAX),
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut expected = String::from("<");
            expected.push_str(&n.to_string());
            expected.push('>');
            assert_eq!(Between(n).to_string(), expected);
        }
    }
}
