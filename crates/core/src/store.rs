//! The one stateful seam: a tiny compare-and-set store of byte cells. Envoy shared data, the
//! in-memory map below (tests, the browser) and a future fleet store implement it; the protocol
//! that claims, completes and releases keys over it is written once, in [`crate::store::protocol`].

pub mod layout;
pub mod ordering;
pub mod protocol;
pub mod remote;
pub(crate) mod rule;
pub mod share;

use crate::client::scope::StorageKey;
use crate::policy::Capacity;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// A cell's version, bumped by every write (Envoy's CAS value widened).
pub(crate) type Version = u64;

/// A cell's bytes and the version they were read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Empty bytes are an empty bucket (a store without delete writes them to "remove").
    pub bytes: Vec<u8>,
    pub version: Version,
}

/// The condition a write is made under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Create the cell; fail if it exists in any form.
    Absent,
    /// Replace the cell only if it is still at this version.
    Version(Version),
}

/// A conditional write's result when the store answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    Written,
    /// The condition did not hold: someone else wrote first. Re-read and decide again.
    Conflict,
}

/// The store failed to answer (not a conflict).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreError {
    /// The host could not read or write (host call failed, remote store unreachable).
    Unavailable(String),
    /// The value is larger than the host accepts.
    TooLarge,
}

impl StoreError {
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::Unavailable(_) => "store_unavailable",
            StoreError::TooLarge => "store_value_too_large",
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Unavailable(why) => write!(f, "store unavailable: {why}"),
            StoreError::TooLarge => f.write_str("value too large for the store"),
        }
    }
}

/// Compare-and-set over named cells. Implementations must make each call atomic: of two writes
/// with the same `Expect`, at most one returns `Written`.
pub trait Store {
    fn read(&mut self, cell: &str) -> Result<Option<Snapshot>, StoreError>;
    fn write(
        &mut self,
        cell: &str,
        bytes: &[u8],
        expect: Expect,
    ) -> Result<WriteOutcome, StoreError>;
}

/// Maps storage keys onto a fixed set of cell names, so the store's key space is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub capacity: Capacity,
}

impl Layout {
    /// The cell a storage key lives in: its first four bytes, modulo the number of cells. The
    /// storage key is a SHA-256, so cells fill evenly.
    pub(crate) fn cell_index(&self, key: &StorageKey) -> u32 {
        let head = u32::from_be_bytes([key.0[0], key.0[1], key.0[2], key.0[3]]);
        head % self.capacity.cells.max(1)
    }

    pub fn cell_name(&self, key: &StorageKey) -> String {
        self.cell_name_at(self.cell_index(key))
    }

    /// The name of cell `index` (`0..cells`): hosts that sweep expired records walk these.
    pub fn cell_name_at(&self, index: u32) -> String {
        numbered("idemgate/c/", index)
    }
}

/// `prefix` then `index` in decimal: a cell's name, made for every record a request reads or
/// writes, so without `core::fmt` (its `format!` cost a keyed request about 450 wasm operators
/// per name, `make bench-work`).
pub(crate) fn numbered(prefix: &str, index: u32) -> String {
    use crate::text::Text;
    let mut name = String::with_capacity(prefix.len() + 10);
    name.push_str(prefix);
    // Writing into a `String` cannot fail.
    let _ = name.put_u64(u64::from(index));
    name
}

/// An in-memory store: for tests, the wasmtime harness's reference and the browser.
#[derive(Debug, Default, Clone)]
pub struct MemoryStore {
    cells: BTreeMap<String, Snapshot>,
    last_version: Version,
}

impl MemoryStore {
    pub fn new() -> Self {
        MemoryStore::default()
    }

    /// Number of cells ever written (empty ones included): the memory-bound tests watch it.
    pub fn cell_count(&self) -> usize {
        self.cells.len()
    }
}

impl Store for MemoryStore {
    fn read(&mut self, cell: &str) -> Result<Option<Snapshot>, StoreError> {
        Ok(self.cells.get(cell).cloned())
    }

    fn write(
        &mut self,
        cell: &str,
        bytes: &[u8],
        expect: Expect,
    ) -> Result<WriteOutcome, StoreError> {
        let current = self.cells.get(cell).map(|s| s.version);
        let holds = match (expect, current) {
            (Expect::Absent, None) => true,
            (Expect::Version(v), Some(c)) => v == c,
            _ => false,
        };
        if !holds {
            return Ok(WriteOutcome::Conflict);
        }
        self.last_version += 1;
        self.cells.insert(
            String::from(cell),
            Snapshot {
                bytes: bytes.to_vec(),
                version: self.last_version,
            },
        );
        Ok(WriteOutcome::Written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_names_are_the_index_in_decimal() {
        for index in [0, 7, 10, 99, 1_000, 65_535, u32::MAX - 1, u32::MAX] {
            assert_eq!(
                numbered("idemgate/c/", index),
                alloc::format!("idemgate/c/{index}")
            );
        }
    }

    #[test]
    fn compare_and_set_rules() {
        let mut store = MemoryStore::new();
        assert_eq!(store.read("a"), Ok(None));
        assert_eq!(
            store.write("a", b"1", Expect::Version(1)),
            Ok(WriteOutcome::Conflict)
        );
        assert_eq!(
            store.write("a", b"1", Expect::Absent),
            Ok(WriteOutcome::Written)
        );
        assert_eq!(
            store.write("a", b"2", Expect::Absent),
            Ok(WriteOutcome::Conflict)
        );
        let snap = store.read("a").unwrap().unwrap();
        assert_eq!(snap.bytes, b"1");
        assert_eq!(
            store.write("a", b"2", Expect::Version(snap.version)),
            Ok(WriteOutcome::Written)
        );
        assert_eq!(
            store.write("a", b"3", Expect::Version(snap.version)),
            Ok(WriteOutcome::Conflict)
        );
        assert_eq!(store.read("a").unwrap().unwrap().bytes, b"2");
    }
}
