//! Strict base64 (RFC 4648) in the two spellings the core reads and writes (base64url for the
//! tokens it issues; standard for the store service's operator output): standard (§4: `+` and `/`, `=`
//! padding) — what Standard Webhooks, Svix and Shopify use for secrets, public keys and
//! signatures — and base64url without padding (§5: `-` and `_`) — the one-time tokens' spelling.
//!
//! Strict so every value has one spelling: standard text is a multiple of 4 long with padding only
//! at the end (at most two `=`), url text has no padding at all, neither has whitespace, and the
//! unused low bits of the last character are zero. Each spelling refuses the other's alphabet.

use alloc::string::String;
use alloc::vec::Vec;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Alphabet {
    Standard,
    Url,
}

fn value(c: u8, alphabet: Alphabet) -> Option<u32> {
    let v = match (c, alphabet) {
        (b'A'..=b'Z', _) => c - b'A',
        (b'a'..=b'z', _) => c - b'a' + 26,
        (b'0'..=b'9', _) => c - b'0' + 52,
        (b'+', Alphabet::Standard) | (b'-', Alphabet::Url) => 62,
        (b'/', Alphabet::Standard) | (b'_', Alphabet::Url) => 63,
        _ => return None,
    };
    Some(u32::from(v))
}

/// Decodes canonical padded standard base64; `None` otherwise. The empty text decodes to no bytes
/// (callers refuse empty keys by length).
pub fn decode(text: &[u8]) -> Option<Vec<u8>> {
    if text.len() % 4 != 0 {
        return None;
    }
    let padding = match text {
        [.., b'=', b'='] => 2,
        [.., b'='] => 1,
        _ => 0,
    };
    decode_data(text.get(..text.len() - padding)?, Alphabet::Standard)
}

/// Decodes canonical unpadded base64url; `None` otherwise.
pub(crate) fn decode_url(text: &[u8]) -> Option<Vec<u8>> {
    // One character alone carries 6 bits: never a whole byte.
    if text.len() % 4 == 1 {
        return None;
    }
    decode_data(text, Alphabet::Url)
}

const STANDARD_ALPHABET: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Appends `bytes` as padded standard base64: the one spelling [`decode`] reads back.
pub fn encode(bytes: &[u8], out: &mut String) {
    encode_with(bytes, STANDARD_ALPHABET, true, out);
}

/// Appends `bytes` as base64url without padding: the one spelling [`decode_url`] reads back.
pub(crate) fn encode_url(bytes: &[u8], out: &mut String) {
    encode_with(bytes, URL_ALPHABET, false, out);
}

fn encode_with(bytes: &[u8], alphabet: &[u8; 64], pad: bool, out: &mut String) {
    for chunk in bytes.chunks(3) {
        // The chunk's 1 to 3 bytes, big-endian, in the top 24 bits of 32.
        let n = chunk
            .iter()
            .zip([16, 8, 0])
            .fold(0u32, |n, (&b, shift)| n | (u32::from(b) << shift));
        // n bytes carry n + 1 characters; the unused low bits of the last one are zero.
        for i in 0..=chunk.len() {
            let index = (n >> (18 - 6 * i)) & 0x3f;
            out.push(char::from(alphabet[index as usize]));
        }
        if pad {
            for _ in chunk.len()..3 {
                out.push('=');
            }
        }
    }
}

/// The characters before any padding.
fn decode_data(data: &[u8], alphabet: Alphabet) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(data.len() / 4 * 3 + 2);
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    for &c in data {
        // A `=` inside the data (not only at the end) has no value: refused here.
        acc = (acc << 6) | value(c, alphabet)?;
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

/// [`decode`] into exactly `N` bytes (a MAC, a key, a signature).
pub(crate) fn decode_array<const N: usize>(text: &[u8]) -> Option<[u8; N]> {
    decode(text)?.try_into().ok()
}

/// [`decode_url`] into exactly `N` bytes (a token's payload or tag).
pub(crate) fn decode_url_array<const N: usize>(text: &[u8]) -> Option<[u8; N]> {
    decode_url(text)?.try_into().ok()
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
            let mut written = String::new();
            encode(plain.as_bytes(), &mut written);
            assert_eq!(written, encoded);
        }
        assert_eq!(decode(b"+/+/"), Some(alloc::vec![0xfb, 0xff, 0xbf]));
        let mut written = String::new();
        encode(&[0xfb, 0xff, 0xbf], &mut written);
        assert_eq!(written, "+/+/");
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
    fn url_spelling() {
        assert_eq!(decode_url(b"-_-_"), Some(alloc::vec![0xfb, 0xff, 0xbf]));
        assert_eq!(decode_url(b"Zg"), Some(b"f".to_vec()));
        assert_eq!(decode_url(b"Zm8"), Some(b"fo".to_vec()));
        for bad in ["Zg==", "Z", "Zh", "+/+/", "Zm9v\n"] {
            assert_eq!(decode_url(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn url_encoding_is_what_decoding_reads() {
        for (plain, encoded) in [
            (&b""[..], ""),
            (b"f", "Zg"),
            (b"fo", "Zm8"),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg"),
            (b"fooba", "Zm9vYmE"),
            (b"foobar", "Zm9vYmFy"),
            (b"\xfb\xff\xbf", "-_-_"),
        ] {
            let mut out = String::new();
            encode_url(plain, &mut out);
            assert_eq!(out, encoded);
            assert_eq!(decode_url(out.as_bytes()).as_deref(), Some(plain));
        }
        for len in 0..70u8 {
            let bytes: Vec<u8> = (0..len).map(|i| i.wrapping_mul(37) ^ 0xa5).collect();
            let mut out = String::new();
            encode_url(&bytes, &mut out);
            assert_eq!(out.len(), (bytes.len() * 4).div_ceil(3));
            assert_eq!(decode_url(out.as_bytes()), Some(bytes));
        }
    }

    #[test]
    fn fixed_lengths() {
        assert_eq!(decode_array::<3>(b"Zm9v"), Some(*b"foo"));
        assert_eq!(decode_array::<4>(b"Zm9v"), None);
    }
}
