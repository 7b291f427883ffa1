//! Envoy's shared data, exactly as Envoy keeps it: one map per `vm_id`, shared by the VMs of every
//! worker, with its compare-and-swap rules (proxy-wasm-cpp-host `SharedData::set`):
//! - `set` with CAS 0 writes unconditionally;
//! - a key that does not exist is inserted whatever CAS is given;
//! - an existing key with a non-zero CAS that differs from its current CAS → `CasMismatch`;
//! - every write takes the next value of one global CAS counter (starting at 1, skipping 0);
//! - there is no delete: removing means writing an empty value;
//! - `get` of a missing key → `NotFound`.
//!
//! Every successful write is also kept in a log (who wrote what, at which CAS, on which clock), so
//! interleaving tests can judge the sequence of records a cell went through.

use std::collections::BTreeMap;

/// One cell's value and the CAS it was written with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub value: Vec<u8>,
    pub cas: u32,
}

/// Why `set` did not write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetError {
    CasMismatch,
}

/// A successful write, as the interleaving checks see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub worker: usize,
    pub key: String,
    /// The value the key held just before this write (`None`: the key did not exist).
    pub before: Option<Vec<u8>>,
    pub value: Vec<u8>,
    /// The CAS the guest passed (0 = unconditional).
    pub cas_given: u32,
    /// The CAS the write was stored with.
    pub cas: u32,
    /// The simulated wall clock when it happened (Unix milliseconds).
    pub at_ms: u64,
}

/// The map of one `vm_id`.
#[derive(Debug, Clone)]
pub struct SharedData {
    entries: BTreeMap<String, Entry>,
    next_cas: u32,
    log: Vec<Write>,
}

impl Default for SharedData {
    fn default() -> Self {
        SharedData {
            entries: BTreeMap::new(),
            next_cas: 1,
            log: Vec::new(),
        }
    }
}

impl SharedData {
    pub fn get(&self, key: &str) -> Option<&Entry> {
        self.entries.get(key)
    }

    /// Envoy's `SharedData::set`.
    pub fn set(
        &mut self,
        worker: usize,
        key: &str,
        value: &[u8],
        cas: u32,
        at_ms: u64,
    ) -> Result<u32, SetError> {
        let before = match self.entries.get(key) {
            Some(entry) if cas != 0 && cas != entry.cas => return Err(SetError::CasMismatch),
            Some(entry) => Some(entry.value.clone()),
            None => None,
        };
        let stored = self.take_cas();
        self.entries.insert(
            key.to_string(),
            Entry {
                value: value.to_vec(),
                cas: stored,
            },
        );
        self.log.push(Write {
            worker,
            key: key.to_string(),
            before,
            value: value.to_vec(),
            cas_given: cas,
            cas: stored,
            at_ms,
        });
        Ok(stored)
    }

    /// Moves the global CAS counter, as if other keys had been written `writes` times (to reach
    /// wrap-around and collisions in tests).
    pub fn advance_cas(&mut self, writes: u32) {
        for _ in 0..writes {
            self.take_cas();
        }
    }

    /// Sets the next CAS value the counter hands out (0 is skipped as Envoy does).
    pub fn set_next_cas(&mut self, next: u32) {
        self.next_cas = next;
    }

    fn take_cas(&mut self) -> u32 {
        if self.next_cas == 0 {
            self.next_cas = 1;
        }
        let cas = self.next_cas;
        self.next_cas = self.next_cas.wrapping_add(1);
        cas
    }

    /// Every key and its entry, in key order.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &Entry)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Every successful write so far, in order.
    pub fn log(&self) -> &[Write] {
        &self.log
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envoy_cas_rules() {
        let mut map = SharedData::default();
        assert!(map.get("k").is_none());
        // A missing key is inserted whatever CAS is given.
        assert_eq!(map.set(0, "k", b"a", 77, 0), Ok(1));
        // CAS 0 writes unconditionally.
        assert_eq!(map.set(0, "k", b"b", 0, 0), Ok(2));
        // A stale non-zero CAS is refused, the current one accepted.
        assert_eq!(map.set(1, "k", b"c", 1, 0), Err(SetError::CasMismatch));
        assert_eq!(map.set(1, "k", b"c", 2, 0), Ok(3));
        // The counter is global: another key takes the next value.
        assert_eq!(map.set(1, "other", b"x", 0, 0), Ok(4));
        // "Removing" writes an empty value; the key still exists.
        assert_eq!(map.set(1, "k", b"", 3, 0), Ok(5));
        assert_eq!(map.get("k").map(|e| e.value.len()), Some(0));
        assert_eq!(map.log().len(), 5);
        assert_eq!(map.log()[1].before.as_deref(), Some(&b"a"[..]));
    }

    #[test]
    fn counter_skips_zero_on_wrap() {
        let mut map = SharedData::default();
        map.set_next_cas(u32::MAX);
        assert_eq!(map.set(0, "a", b"1", 0, 0), Ok(u32::MAX));
        assert_eq!(map.set(0, "a", b"2", 0, 0), Ok(1));
    }
}
