//! Length-prefixed, domain-separated SHA-256. Every derived value (storage key, fingerprint, token
//! signature input) is a hash over a *list of parts*, each preceded by its length as a u64
//! big-endian, after a version tag that is itself a part. So `["ab","c"]` and `["a","bc"]` never
//! share a preimage, and a future format change bumps the tag instead of colliding with old values.

use sha2::{Digest, Sha256};

/// Incremental hash over length-prefixed parts (its `Debug` shows no state).
#[derive(Clone, Debug)]
pub(crate) struct PartsHasher {
    inner: Sha256,
}

impl PartsHasher {
    /// Starts a hash whose first part is the domain tag.
    pub fn new(tag: &str) -> Self {
        let mut hasher = PartsHasher {
            inner: Sha256::new(),
        };
        hasher.part(tag.as_bytes());
        hasher
    }

    /// Adds one part.
    pub(crate) fn part(&mut self, bytes: &[u8]) -> &mut Self {
        self.inner.update((bytes.len() as u64).to_be_bytes());
        self.inner.update(bytes);
        self
    }

    pub fn finish(self) -> [u8; 32] {
        self.inner.finalize().into()
    }
}

/// Plain SHA-256 of one byte string.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Lowercase hex, for logs, vectors and store cell names.
pub fn to_hex(bytes: &[u8]) -> alloc::string::String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = alloc::string::String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

/// The value of one hex digit, either case (paths, form escapes, signatures and [`from_hex`]).
pub(crate) fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Parses lowercase or uppercase hex; `None` on odd length or a non-hex digit.
pub fn from_hex(text: &str) -> Option<alloc::vec::Vec<u8>> {
    let bytes = text.as_bytes();
    if bytes.len() % 2 != 0 {
        return None;
    }
    bytes
        .chunks_exact(2)
        .map(|pair| Some(hex_digit(pair[0])? << 4 | hex_digit(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_length_prefixed() {
        let mut a = PartsHasher::new("t");
        a.part(b"ab").part(b"c");
        let mut b = PartsHasher::new("t");
        b.part(b"a").part(b"bc");
        assert_ne!(a.finish(), b.finish());
    }

    #[test]
    fn known_preimage() {
        // printf '\0\0\0\0\0\0\0\x01t\0\0\0\0\0\0\0\x02ab' | sha256sum
        let mut h = PartsHasher::new("t");
        h.part(b"ab");
        assert_eq!(
            to_hex(&h.finish()),
            "fb410cf4a51feb80885d8f15ee8e98b816249de5c84f2ee6d0a1a66dd47cfa39"
        );
    }

    #[test]
    fn hex_round_trip() {
        assert_eq!(to_hex(&[0x00, 0xab, 0xff]), "00abff");
        assert_eq!(from_hex("00ABff"), Some(alloc::vec![0x00, 0xab, 0xff]));
        assert_eq!(from_hex("0"), None);
        assert_eq!(from_hex("zz"), None);
    }
}
