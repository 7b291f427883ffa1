//! Maps keyed by the host's `u32` ids (context ids, callout tokens). `hashbrown` with a
//! multiplicative hash instead of std's `HashMap`: the filter's `.wasm` has no std (see the crate
//! root), and these keys are small numbers the host hands out, not attacker input, so they need no
//! keyed (DoS-resistant) hash or the entropy to seed one.

use alloc::vec::Vec;
use core::hash::{BuildHasher, Hasher};

/// A map from a host id to `V`.
pub type IdMap<V> = hashbrown::HashMap<u32, V, IdHash>;

/// An empty [`IdMap`] (`const`, so it can start a `static`).
pub const fn id_map<V>() -> IdMap<V> {
    hashbrown::HashMap::with_hasher(IdHash)
}

/// Builds [`IdHasher`]s.
#[derive(Debug, Clone, Copy, Default)]
pub struct IdHash;

impl BuildHasher for IdHash {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher(0)
    }
}

/// Fibonacci hashing of the id: consecutive ids spread over both the low bits (the bucket) and
/// the high bits (hashbrown's tag byte).
#[derive(Debug, Clone, Copy, Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u32(&mut self, id: u32) {
        self.write_u64(u64::from(id));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A map for the few ids there are a handful of (root contexts: one per plugin configuration in
/// the VM): a list searched in order, which is as fast as hashing at that size and saves the `.wasm`
/// another instance of the hash table's code.
pub struct FewIds<V>(Vec<(u32, V)>);

impl<V> Default for FewIds<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V> FewIds<V> {
    pub const fn new() -> Self {
        FewIds(Vec::new())
    }

    pub fn get(&self, id: &u32) -> Option<&V> {
        self.0.iter().find(|(k, _)| k == id).map(|(_, v)| v)
    }

    pub fn get_mut(&mut self, id: &u32) -> Option<&mut V> {
        self.0.iter_mut().find(|(k, _)| k == id).map(|(_, v)| v)
    }

    /// Sets `id`'s value; the one it replaces, if any, is returned.
    pub fn insert(&mut self, id: u32, value: V) -> Option<V> {
        match self.get_mut(&id) {
            Some(old) => Some(core::mem::replace(old, value)),
            None => {
                self.0.push((id, value));
                None
            }
        }
    }

    pub fn remove(&mut self, id: &u32) -> Option<V> {
        let index = self.0.iter().position(|(k, _)| k == id)?;
        Some(self.0.swap_remove(index).1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_ids_get_distinct_buckets_and_tags() {
        let hash = |id: u32| IdHash.hash_one(id);
        let mut low = alloc::vec::Vec::new();
        let mut high = alloc::vec::Vec::new();
        for id in 1..=64 {
            low.push(hash(id) & 63);
            high.push(hash(id) >> 57);
        }
        low.sort_unstable();
        low.dedup();
        high.sort_unstable();
        high.dedup();
        // Every one of 64 consecutive ids in its own of 64 buckets; tags far from all equal.
        assert_eq!(low.len(), 64);
        assert!(high.len() > 32, "{}", high.len());
    }

    #[test]
    fn inserts_finds_and_removes() {
        let mut map = id_map();
        for id in 0..1000u32 {
            assert_eq!(map.insert(id, id * 2), None);
        }
        assert_eq!(map.get(&999), Some(&1998));
        assert_eq!(map.remove(&7), Some(14));
        assert_eq!(map.get(&7), None);
        assert_eq!(map.len(), 999);
    }

    #[test]
    fn few_ids_insert_replace_find_and_remove() {
        let mut few = FewIds::new();
        assert_eq!(few.insert(1, "a"), None);
        assert_eq!(few.insert(2, "b"), None);
        assert_eq!(few.insert(1, "c"), Some("a"));
        assert_eq!(few.get(&1), Some(&"c"));
        *few.get_mut(&2).unwrap() = "d";
        assert_eq!(few.remove(&2), Some("d"));
        assert_eq!(few.get(&2), None);
        assert_eq!(few.remove(&2), None);
        assert_eq!(few.get(&1), Some(&"c"));
    }
}
