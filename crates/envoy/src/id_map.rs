//! Maps keyed by the host's `u32` ids (context ids, callout tokens). `hashbrown` with a
//! multiplicative hash instead of std's `HashMap`: the filter's `.wasm` has no std (see the crate
//! root), and these keys are small numbers the host hands out, not attacker input, so they need no
//! keyed (DoS-resistant) hash or the entropy to seed one.

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
}
