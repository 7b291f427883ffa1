//! The members of an object the hasher is closing: where each one's encoding lies in the canonical
//! buffer, and their rewrite in key order (bytewise on the decoded keys), refusing a repeated key.

use alloc::vec::Vec;
use core::cmp::Ordering;

use crate::sort::sort;
use crate::JsonError;

/// One member of an open object: its encoding is `out[start..end]` (`end` is known when the next
/// member starts or the object closes); the key's encoding is `out[start..key_end]`.
#[derive(Clone, Copy)]
pub(super) struct Member {
    pub(super) start: usize,
    pub(super) key_end: usize,
    pub(super) end: usize,
    /// The key's encoding after the `s`, first 8 bytes as a little-endian word, zero-padded:
    /// orders most keys without looking at `out` (by the lowest byte in which two differ, the
    /// first in the text; a big-endian word would compare as a number, but wasm has no byte swap
    /// and spelled out it cost more than the comparisons). Equal prefixes fall back to the whole
    /// encodings (a shorter encoding ends in `00 00`, so padding can never make two different
    /// keys look equal).
    pub(super) prefix: u64,
}

impl Member {
    /// The key's encoding, `None` if the range is not inside `out` (a broken invariant).
    fn key<'o>(&self, out: &'o [u8]) -> Option<&'o [u8]> {
        out.get(self.start..self.key_end)
    }

    /// Bytewise order of the decoded keys: by prefix, and on a tie by the whole encodings.
    /// Missing keys order as `None` (first): `reorder` has refused them before it sorts.
    #[inline]
    fn order(&self, other: &Member, out: &[u8]) -> Ordering {
        let differ = self.prefix ^ other.prefix;
        if differ == 0 {
            return self.key(out).cmp(&other.key(out));
        }
        let shift = differ.trailing_zeros() & !7;
        ((self.prefix >> shift) & 0xFF).cmp(&((other.prefix >> shift) & 0xFF))
    }
}

/// Rewrites `out` from the first member's start to its end with `members` (contiguous, in
/// document order, ending at `out`'s end) in key order. Any range outside `out` is a broken
/// invariant and an internal error, never a fingerprint of bytes it did not mean.
pub(super) fn reorder(out: &mut Vec<u8>, members: &mut [Member], at: u64) -> Result<(), JsonError> {
    let Some(region) = members.first().map(|m| m.start) else {
        return Ok(());
    };
    // Every range inside `out`, back to back up to its end: then sorting compares real keys and
    // the rewrite below covers exactly the members.
    let mut next = region;
    for m in members.iter() {
        if m.start != next || m.key_end < m.start || m.end < m.key_end {
            return Err(JsonError::Internal);
        }
        next = m.end;
    }
    let end = out.len();
    if next != end {
        return Err(JsonError::Internal);
    }
    let moved = if members.len() <= SMALL_OBJECT {
        insert_in_order(members, out, at)?
    } else {
        sort_in_order(members, out, at)?
    };
    if !moved {
        return Ok(());
    }
    // A copy of the object behind it (one `memory.copy`), from which the members are written
    // back over the object in key order, in 16-byte pieces: a `memory.copy` each (in V8 a call
    // out of the wasm code) cost more than their few bytes; a member of at most 32 bytes (most)
    // is one 32-byte piece. 32 bytes of slack after the object take a last piece's write past its
    // end, and 32 after the copy a last piece's read; what a piece writes past its member is
    // overwritten by the next one.
    let len = end - region;
    out.reserve(len + 64);
    out.extend_from_slice(&[0; 32]);
    let copy = out.len();
    out.extend_from_within(region..end);
    out.extend_from_slice(&[0; 32]);
    let (object, copied) = out.split_at_mut(copy);
    let mut to = region;
    for m in members.iter() {
        let size = m.end - m.start;
        let from = m.start - region;
        let dst = object.get_mut(to..).ok_or(JsonError::Internal)?;
        let src = copied.get(from..).ok_or(JsonError::Internal)?;
        if size <= 32 {
            let piece = src.first_chunk::<32>().ok_or(JsonError::Internal)?;
            *dst.first_chunk_mut::<32>().ok_or(JsonError::Internal)? = *piece;
            to += size;
            continue;
        }
        for (d, s) in dst
            .chunks_exact_mut(16)
            .zip(src.chunks_exact(16))
            .take(size.div_ceil(16))
        {
            d.copy_from_slice(s);
        }
        to += size;
    }
    out.truncate(end);
    Ok(())
}

/// Objects with at most this many members are put in order by insertion, others by heapsort.
const SMALL_OBJECT: usize = 16;

/// Insertion sort of a small object's members: one that arrives sorted (most do) costs one
/// comparison per member, by prefix and only on a tie by key, and moves nothing. A repeated key
/// always meets its equal in a comparison (a key is inserted next to its equal), so it is found
/// on the way. Returns whether any member moved.
fn insert_in_order(members: &mut [Member], out: &[u8], at: u64) -> Result<bool, JsonError> {
    let mut moved = false;
    for i in 1..members.len() {
        let mut j = i;
        // At `j == 0` the index before wraps to `usize::MAX`: no member, the insertion ends.
        while let (Some(a), Some(b)) = (members.get(j.wrapping_sub(1)), members.get(j)) {
            match a.order(b, out) {
                Ordering::Less => break,
                Ordering::Equal => return Err(duplicate(at)),
                Ordering::Greater => {
                    members.swap(j - 1, j);
                    moved = true;
                    j -= 1;
                }
            }
        }
    }
    Ok(moved)
}

/// A large object's members in order (heapsort), checked pairwise first, as most arrive sorted,
/// and for a repeated key after. Returns whether any member moved.
fn sort_in_order(members: &mut [Member], out: &[u8], at: u64) -> Result<bool, JsonError> {
    let mut sorted = true;
    for pair in members.windows(2) {
        if let [a, b] = pair {
            match a.order(b, out) {
                Ordering::Less => {}
                Ordering::Equal => return Err(duplicate(at)),
                Ordering::Greater => sorted = false,
            }
        }
    }
    if sorted {
        return Ok(false);
    }
    sort(members, |a, b| a.order(b, out) == Ordering::Less);
    if members
        .windows(2)
        .any(|pair| matches!(pair, [a, b] if a.order(b, out) == Ordering::Equal))
    {
        return Err(duplicate(at));
    }
    Ok(true)
}

fn duplicate(offset: u64) -> JsonError {
    JsonError::DuplicateKey { offset, key: None }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn member(start: usize, key_end: usize, end: usize, prefix: u64) -> Member {
        Member {
            start,
            key_end,
            end,
            prefix,
        }
    }

    #[test]
    fn reorder_sorts_members_in_place() {
        // o s b 00 00 t s a 00 00 f — members "b":true, "a":false.
        let mut out = b"o\x73b\0\0t\x73a\0\0f".to_vec();
        let mut members = [
            member(1, 5, 6, u64::from(b'b')),
            member(6, 10, 11, u64::from(b'a')),
        ];
        reorder(&mut out, &mut members, 11).unwrap();
        assert_eq!(out, b"o\x73a\0\0f\x73b\0\0t");
    }

    #[test]
    fn broken_ranges_are_internal_errors_not_wrong_digests() {
        let out = b"o\x73b\0\0t\x73a\0\0f".to_vec();
        let cases = [
            // A member beyond the encoding (formerly: sorted an empty slice).
            [member(1, 5, 6, 2), member(6, 10, 99, 1)],
            // A key range that runs backwards.
            [member(1, 5, 6, 2), member(6, 4, 11, 1)],
            // Members that do not end at the end of `out` (formerly: the copy-back was skipped).
            [member(1, 5, 6, 2), member(6, 10, 10, 1)],
        ];
        for mut members in cases {
            let mut copy = out.clone();
            assert_eq!(
                reorder(&mut copy, &mut members, 11),
                Err(JsonError::Internal)
            );
        }
        // The object-level entry point's own check: the hasher's tests.
    }
}
