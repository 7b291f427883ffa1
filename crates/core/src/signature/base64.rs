//! Strict standard base64 (RFC 4648 §4: `+` and `/`, `=` padding), the spelling Standard Webhooks,
//! Svix and Shopify use for secrets, public keys and signatures.
//!
//! Strict so every value has one spelling: the length is a multiple of 4, padding only at the end
//! (at most two `=`), no whitespace, and the unused low bits of the last character are zero. The
//! token module's base64url reads a different alphabet without padding; the two stay apart because
//! each must refuse the other's spelling.

use alloc::vec::Vec;

fn value(c: u8) -> Option<u32> {
    let v = match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    };
    Some(u32::from(v))
}

/// Decodes `text`; `None` if it is not canonical padded standard base64. The empty text decodes to
/// no bytes (callers refuse empty keys by length).
pub fn decode(text: &[u8]) -> Option<Vec<u8>> {
    if text.len() % 4 != 0 {
        return None;
    }
    let padding = match text {
        [.., b'=', b'='] => 2,
        [.., b'='] => 1,
        _ => 0,
    };
    let data = text.get(..text.len() - padding)?;
    let mut out = Vec::with_capacity(data.len() / 4 * 3 + 2);
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    for &c in data {
        // A `=` inside the data (not only at the end) has no value: refused here.
        acc = (acc << 6) | value(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // Leftover bits are the last character's unused ones: they must be zero (one spelling only).
    (acc == 0).then_some(out)
}

/// Decodes into exactly `N` bytes (a MAC, a key, a signature).
pub fn decode_array<const N: usize>(text: &[u8]) -> Option<[u8; N]> {
    decode(text)?.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4648_test_vectors() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(
                decode(encoded.as_bytes()).as_deref(),
                Some(plain.as_bytes())
            );
        }
        assert_eq!(decode(b"+/+/"), Some(alloc::vec![0xfb, 0xff, 0xbf]));
    }

    #[test]
    fn only_one_spelling() {
        for bad in [
            "Zg",       // unpadded
            "Zg=",      // short padding
            "Zh==",     // unused bits set
            "Zm9=",     // unused bits set
            "Z===",     // three pads
            "Zg==Zg==", // padding in the middle
            "Zm9v\n",   // whitespace
            "Zm-v",     // base64url alphabet
            "Zm_v",
        ] {
            assert_eq!(decode(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn fixed_lengths() {
        assert_eq!(decode_array::<3>(b"Zm9v"), Some(*b"foo"));
        assert_eq!(decode_array::<4>(b"Zm9v"), None);
    }
}
