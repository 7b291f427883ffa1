//! Memo of value hashes of short tokens. Hashing, not parsing, dominates the cost of a body, and
//! real bodies repeat short tokens constantly (the keys of every element of an array of objects,
//! enum-like strings, small numbers), so remembering a few dozen of them saves about a third of
//! all SHA-256 compressions on typical API payloads. Size is fixed: O(1) memory per hasher.

use alloc::vec::Vec;

use super::lexer::Hash;

/// Longest token text (decoded string bytes, or number token) worth remembering.
pub(super) const SHORT: usize = 24;
const SLOTS: usize = 64;

#[derive(Clone, Copy)]
struct Slot {
    /// `b's'` for strings, `b'd'` for number tokens, 0 for an empty slot.
    tag: u8,
    len: u8,
    text: [u8; SHORT],
    hash: Hash,
}

const EMPTY: Slot = Slot {
    tag: 0,
    len: 0,
    text: [0; SHORT],
    hash: [0; 32],
};

/// Direct-mapped: a collision just evicts, so lookups stay O(`SHORT`).
pub(super) struct HashCache {
    slots: Vec<Slot>,
}

impl HashCache {
    pub(super) fn new() -> Self {
        HashCache { slots: Vec::new() }
    }

    /// The hash of `(tag, text)`, computing and remembering it on a miss. Errors are not cached.
    pub(super) fn get<E>(
        &mut self,
        tag: u8,
        text: &[u8],
        compute: impl FnOnce() -> Result<Hash, E>,
    ) -> Result<Hash, E> {
        let Ok(len) = u8::try_from(text.len()) else {
            return compute();
        };
        if text.len() > SHORT {
            return compute();
        }
        if self.slots.is_empty() {
            // Allocated on first use, so tiny bodies do not pay for it.
            self.slots = alloc::vec![EMPTY; SLOTS];
        }
        let mut padded = [0u8; SHORT];
        if let Some(dst) = padded.get_mut(..text.len()) {
            dst.copy_from_slice(text);
        }
        let index = slot_index(tag, text);
        if let Some(slot) = self.slots.get(index) {
            // Fixed-size compare: inlined, unlike a variable-length memcmp.
            if slot.tag == tag && slot.len == len && slot.text == padded {
                return Ok(slot.hash);
            }
        }
        let hash = compute()?;
        if let Some(slot) = self.slots.get_mut(index) {
            slot.tag = tag;
            slot.len = len;
            slot.text = padded;
            slot.hash = hash;
        }
        Ok(hash)
    }
}

/// FNV-1a: only spreads slots; a wrong guess costs a recomputation, never a wrong hash.
fn slot_index(tag: u8, text: &[u8]) -> usize {
    let mut h: u32 = 0x811c_9dc5;
    for &b in core::iter::once(&tag).chain(text) {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    (h as usize) & (SLOTS - 1)
}
