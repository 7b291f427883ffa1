//! Length-prefixed, domain-separated SHA-256. Every derived value (storage key, fingerprint, token
//! signature input) is a hash over a *list of parts*, each preceded by its length as a u64
//! big-endian, after a version tag that is itself a part. So `["ab","c"]` and `["a","bc"]` never
//! share a preimage, and a future format change bumps the tag instead of colliding with old values.

use alloc::vec::Vec;
use core::cell::RefCell;
use sha2::{Digest, Sha256};

/// Incremental hash over length-prefixed parts (its `Debug` shows no state).
#[derive(Clone, Debug)]
pub(crate) struct PartsHasher {
    inner: Sha256,
}

/// Appends one part as [`PartsHasher::part`] hashes it: its length, then its bytes.
pub(crate) fn put_part(preimage: &mut Vec<u8>, bytes: &[u8]) {
    preimage.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
    preimage.extend_from_slice(bytes);
}

impl PartsHasher {
    /// A hash that has taken in `preimage`, parts written by [`put_part`] (its first the tag),
    /// from the state `kept` holds for its whole blocks when it has seen them before.
    pub(crate) fn resume(preimage: &[u8], kept: Option<&KeptStates>) -> PartsHasher {
        PartsHasher {
            inner: match kept {
                Some(kept) => kept.hasher(preimage),
                None => Sha256::new_with_prefix(preimage),
            },
        }
    }

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

/// How many preimage beginnings [`KeptStates`] keeps.
const KEPT_STATES: usize = 4;
/// The longest beginning kept, in bytes: four blocks, so a long path keeps no more than this.
const KEPT_MAX: usize = 256;
/// SHA-256's block.
const BLOCK: usize = 64;

/// SHA-256 states after the whole blocks of preimages that begin alike request after request (a
/// route's fingerprint head: tag, mode, method, path and the hashed headers): each is hashed once
/// per run of such requests, not per request. Compared byte for byte, so a state is only ever
/// reused for the very bytes it took in; the least recently used is forgotten.
#[derive(Debug, Default)]
pub(crate) struct KeptStates(RefCell<[Option<Kept>; KEPT_STATES]>);

#[derive(Debug)]
struct Kept {
    /// The whole blocks taken in.
    blocks: Vec<u8>,
    state: Sha256,
}

impl KeptStates {
    /// A hash that has taken in `preimage`.
    fn hasher(&self, preimage: &[u8]) -> Sha256 {
        let whole = (preimage.len() - preimage.len() % BLOCK).min(KEPT_MAX);
        let (blocks, rest) = preimage.split_at(whole);
        let mut state = match self.0.try_borrow_mut() {
            Ok(mut kept) if whole > 0 => {
                let found = kept
                    .iter()
                    .position(|k| k.as_ref().is_some_and(|k| same(&k.blocks, blocks)));
                match found {
                    Some(at) => kept[..=at].rotate_right(1),
                    None => {
                        kept.rotate_right(1);
                        kept[0] = None;
                    }
                }
                let front = kept[0].get_or_insert_with(|| Kept {
                    blocks: blocks.to_vec(),
                    state: Sha256::new_with_prefix(blocks),
                });
                front.state.clone()
            }
            _ => Sha256::new_with_prefix(blocks),
        };
        state.update(rest);
        state
    }
}

/// `a == b`, eight bytes at a time rather than one: it runs on every request that finds its
/// beginning kept, over up to four blocks.
fn same(a: &[u8], b: &[u8]) -> bool {
    let (x, y) = (a.chunks_exact(8), b.chunks_exact(8));
    a.len() == b.len()
        && x.remainder() == y.remainder()
        && x.zip(y).all(|(x, y)| word(x) == word(y))
}

/// Eight bytes as one number (`chunks_exact(8)` gives no other length).
fn word(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes.try_into().unwrap_or([0; 8]))
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
    fn a_kept_state_hashes_as_the_whole_preimage_does() {
        let kept = KeptStates::default();
        // Lengths about the block edges and past the longest kept beginning, six beginnings (so
        // the four kept are forgotten and found again), each asked for twice in a row.
        let lengths = [
            0, 1, 63, 64, 65, 127, 128, 129, 200, 255, 256, 257, 320, 700,
        ];
        for round in 0..3u8 {
            for (i, len) in lengths.iter().enumerate() {
                let first = (i as u8 + round) % 6;
                let preimage: Vec<u8> = (0..*len)
                    .map(|at| if at < 64 { first } else { at as u8 })
                    .collect();
                for _ in 0..2 {
                    let mut resumed = PartsHasher::resume(&preimage, Some(&kept));
                    resumed.part(b"tail");
                    let mut whole = preimage.clone();
                    put_part(&mut whole, b"tail");
                    assert_eq!(resumed.finish(), sha256(&whole), "{len} {first}");
                }
            }
        }
    }

    #[test]
    fn put_part_writes_what_part_hashes() {
        let mut preimage = Vec::new();
        put_part(&mut preimage, b"t");
        put_part(&mut preimage, b"ab");
        let mut h = PartsHasher::new("t");
        h.part(b"ab");
        assert_eq!(PartsHasher::resume(&preimage, None).finish(), h.finish());
    }

    #[test]
    fn same_compares_every_byte() {
        let a: Vec<u8> = (0..70).collect();
        for at in 0..a.len() {
            let mut b = a.clone();
            b[at] ^= 1;
            assert!(!same(&a, &b), "{at}");
        }
        assert!(same(&a, &a.clone()));
        assert!(!same(&a, &a[..69]));
    }

    #[test]
    fn hex_round_trip() {
        assert_eq!(to_hex(&[0x00, 0xab, 0xff]), "00abff");
        assert_eq!(from_hex("00ABff"), Some(alloc::vec![0x00, 0xab, 0xff]));
        assert_eq!(from_hex("0"), None);
        assert_eq!(from_hex("zz"), None);
    }
}
