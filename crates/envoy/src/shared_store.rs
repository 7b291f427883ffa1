//! The core's compare-and-set [`Store`] over Envoy's shared data, atomic across every worker's VM.
//!
//! What Envoy gives (proxy-wasm `get_shared_data` / `set_shared_data`): a process-wide map of
//! key → (bytes, cas). Every successful `set` gives the entry the next value of **one global CAS
//! counter** (starting at 1, wrapping past `u32::MAX` to 1, never 0). A `set` with CAS 0 writes
//! unconditionally; a `set` with a non-zero CAS on an *existing* key fails with `CasMismatch` unless
//! it equals the entry's CAS; a `set` on a *missing* key inserts whatever CAS is given. There is no
//! delete (an empty value is an empty bucket) and no listing.
//!
//! * `Expect::Version(v)` is a plain CAS-conditioned `set`: exact.
//! * `Expect::Absent` has no host primitive. We `set` with CAS `u32::MAX`: if the key is missing it
//!   is inserted, and if a concurrent creator got there first, its entry's CAS is some other value,
//!   so ours fails with `CasMismatch` — atomic insert-if-absent, **except** when the first creator's
//!   entry happens to have been handed exactly `u32::MAX` by the global counter (once every 2³²−1
//!   writes process-wide): then a second creator's `set` matches and silently replaces it, and both
//!   would believe they created the cell. So after an `Absent` create we read the cell back:
//!   - if its CAS is `u32::MAX`, we re-stamp it (`set` of the same bytes conditioned on `u32::MAX`),
//!     so it leaves the dangerous value; a `CasMismatch` there means someone replaced it first: we
//!     lost the race;
//!   - either way, our write stands only if the cell still holds every record we wrote. A creator
//!     whose entry was replaced through the `u32::MAX` corner finds its record gone and reports
//!     `Conflict` (the core then re-reads and decides again), while a legitimate later writer keeps
//!     our record (it read our bucket before modifying it), so an ordinary concurrent update is not
//!     mistaken for a lost race.
//!
//! Updates need the same read-back only while a stale creator can exist, i.e. while some cell may
//! be absent: every VM creates its layout's cells when configured (`idemgate_core::store::layout::precreate_cells`), and a
//! VM that saw them all exist skips it (`SharedStore::settle_updates`), saving a host call per
//! write. The one creator left is a VM configuring concurrently, between its read and its `set`
//! of a cell that another VM created and updated onto `u32::MAX` in those microseconds.
//!
//! What remains is a corner inside the corner, documented rather than hidden: two creators writing
//! byte-identical records (only a one-time token consumed twice at the same instant can) where the
//! first got CAS `u32::MAX`; or an update landing on exactly `u32::MAX` within the microseconds in
//! which a stale creator of a brand-new cell is between its read and its write.
//!
//! The store's size is bounded by the core's [`idemgate_core::store::Layout`]: cells are a fixed set of
//! names, each holding at most `records_per_cell` records.

#[allow(unused_imports)]
use crate::prelude::*;
use idemgate_core::record::Bucket;
use idemgate_core::store::{Expect, Snapshot, Store, StoreError, WriteOutcome};

/// A CAS that no entry keeps for long (see the module docs): used to create cells.
pub const CREATE_CAS: u32 = u32::MAX;

/// Envoy's shared-data calls, as a seam: the host in the filter, a faithful model in unit tests.
pub trait SharedData {
    /// `Ok(None)` when the key is missing; `Ok(Some((bytes, cas)))` otherwise.
    fn get(&mut self, key: &str) -> Result<Option<(Vec<u8>, u32)>, String>;
    /// `Ok(true)` written, `Ok(false)` CAS mismatch.
    fn set(&mut self, key: &str, value: &[u8], cas: u32) -> Result<bool, String>;
}

/// The host's shared data.
pub struct HostSharedData;

impl SharedData for HostSharedData {
    fn get(&mut self, key: &str) -> Result<Option<(Vec<u8>, u32)>, String> {
        crate::shared_data_abi::get(key)
            .map_err(|status| format!("get_shared_data: status {status}"))
    }

    fn set(&mut self, key: &str, value: &[u8], cas: u32) -> Result<bool, String> {
        crate::shared_data_abi::set(key, value, cas)
            .map_err(|status| format!("set_shared_data: status {status}"))
    }
}

/// The core's store over shared data.
pub struct SharedStore<D: SharedData> {
    pub data: D,
    /// Read back after updates too, not only after creates. An update needs it only while some
    /// request may still *create* a cell (a stale creator could match an update that landed on
    /// `u32::MAX`); once this VM has seen every cell of its layout exist at configure time
    /// (`idemgate_core::store::layout::precreate_cells`), no request of any VM can find one of those cells absent, and the
    /// read-back (one host call per write) is skipped.
    pub settle_updates: bool,
}

impl<D: SharedData> SharedStore<D> {
    /// A store that reads back after every write: for cells that may not all exist yet.
    pub fn new(data: D) -> Self {
        SharedStore {
            data,
            settle_updates: true,
        }
    }
}

fn unavailable(why: String) -> StoreError {
    StoreError::Unavailable(why)
}

/// How often a write re-reads to move its cell off CAS `u32::MAX` before giving up the race.
const SETTLE_ATTEMPTS: usize = 3;

impl<D: SharedData> SharedStore<D> {
    /// The `Absent` create (see the module docs).
    fn create(&mut self, cell: &str, bytes: &[u8]) -> Result<WriteOutcome, StoreError> {
        if !self
            .data
            .set(cell, bytes, CREATE_CAS)
            .map_err(unavailable)?
        {
            return Ok(WriteOutcome::Conflict);
        }
        self.settle(cell, bytes)
    }

    /// After a successful create (and after updates while `settle_updates`): read the cell back
    /// and, if the global counter handed it exactly `u32::MAX`, re-stamp it, so a stale creator's
    /// `set(…, u32::MAX)` cannot match it.
    /// The write stands only while the cell still holds every record it wrote: a creator whose
    /// entry was replaced through that corner finds its records gone and reports `Conflict` (the
    /// core re-reads and decides again), while a legitimate later writer keeps our records (it
    /// built on our bucket), so an ordinary concurrent update is not mistaken for a lost race.
    /// This costs one read per write and closes the window to the moment between a write and
    /// its read-back.
    fn settle(&mut self, cell: &str, written: &[u8]) -> Result<WriteOutcome, StoreError> {
        for _ in 0..SETTLE_ATTEMPTS {
            let Some((current, cas)) = self.data.get(cell).map_err(unavailable)? else {
                // Written, then gone: shared data never loses keys, so this is a host fault.
                return Err(unavailable(String::from(
                    "shared data lost a key just written",
                )));
            };
            if !holds_records(&current, written) {
                return Ok(WriteOutcome::Conflict);
            }
            if cas != CREATE_CAS
                || self
                    .data
                    .set(cell, &current, CREATE_CAS)
                    .map_err(unavailable)?
            {
                return Ok(WriteOutcome::Written);
            }
            // Someone wrote between our read-back and the re-stamp: look again.
        }
        Ok(WriteOutcome::Written)
    }
}

/// Whether the bucket `current` holds every record of the bucket `written`, unchanged.
fn holds_records(current: &[u8], written: &[u8]) -> bool {
    if current == written {
        return true;
    }
    match (Bucket::decode(current), Bucket::decode(written)) {
        (Ok(current), Ok(written)) => written
            .entries
            .iter()
            .all(|(key, record)| current.get(key) == Some(record)),
        _ => false,
    }
}

impl<D: SharedData> Store for SharedStore<D> {
    fn read(&mut self, cell: &str) -> Result<Option<Snapshot>, StoreError> {
        Ok(self
            .data
            .get(cell)
            .map_err(unavailable)?
            .map(|(bytes, cas)| Snapshot {
                bytes,
                version: u64::from(cas),
            }))
    }

    fn write(
        &mut self,
        cell: &str,
        bytes: &[u8],
        expect: Expect,
    ) -> Result<WriteOutcome, StoreError> {
        match expect {
            Expect::Absent => self.create(cell, bytes),
            Expect::Version(version) => {
                // Version 0 would be an unconditional write: never issue one.
                let cas = u32::try_from(version)
                    .ok()
                    .filter(|cas| *cas != 0)
                    .ok_or_else(|| {
                        unavailable(format!("version {version} is not a shared-data CAS"))
                    })?;
                if !self.data.set(cell, bytes, cas).map_err(unavailable)? {
                    Ok(WriteOutcome::Conflict)
                } else if self.settle_updates {
                    self.settle(cell, bytes)
                } else {
                    Ok(WriteOutcome::Written)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
