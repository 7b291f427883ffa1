//! The local store's cells as a whole ([`Layout`]): the layout claimed in the store, so a host
//! never runs two layouts over the same cells ([`claim_layout`]); every cell made before requests
//! need it ([`precreate_cells`]); and the background sweep that rewrites cells without their
//! expired records ([`Sweep`]). All of it over the [`Store`] seam: a host only reads and writes
//! its cells and logs what it is told.

use super::{Expect, Layout, Store, WriteOutcome};
use crate::policy::Capacity;
use crate::record::Bucket;
use crate::time::UnixMillis;
use alloc::string::String;
use core::fmt;

/// The cell that names the layout every user of the store's cells (every VM of an Envoy
/// `vm_id`) must share.
pub(crate) const LAYOUT_CELL: &str = "idemgate/layout";

/// Another layout is already in use.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayoutError {
    /// The store's cells are laid out as `from` (as recorded); this configuration wants `to`.
    Changed { from: String, to: Capacity },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::Changed { from, to } => write!(
                f,
                "the store layout would change from {from} to {} (`capacity` / \
                 `records_per_cell`): every stored record would become unreachable. Keep the \
                 layout, or restart Envoy to start an empty store with the new one",
                Recorded(to)
            ),
        }
    }
}

/// A layout as the layout cell records it.
struct Recorded<'a>(&'a Capacity);

impl fmt::Display for Recorded<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} cells x {} records", self.0.cells, self.0.per_cell)
    }
}

/// Records `layout` in the store, or refuses it if the store is in use under another one. Records
/// live in the cell their key hashes to *under the layout*: another cell count or records per
/// cell would remap every key, so stored answers, claims in flight and token uses would vanish,
/// and the old cells would stay allocated but unaddressed. A store that cannot be read or
/// written has nothing to compare with: accepted (cells are checked as they are used).
pub fn claim_layout<S: Store + ?Sized>(store: &mut S, layout: &Layout) -> Result<(), LayoutError> {
    let wanted = alloc::format!("{}", Recorded(&layout.capacity));
    // Bounded: each lost race means another user wrote the cell, which the next read compares.
    for _ in 0..4 {
        let Ok(current) = store.read(LAYOUT_CELL) else {
            return Ok(());
        };
        match current {
            Some(snapshot) if snapshot.bytes == wanted.as_bytes() => return Ok(()),
            Some(snapshot) => {
                return Err(LayoutError::Changed {
                    from: String::from_utf8_lossy(&snapshot.bytes).into_owned(),
                    to: layout.capacity,
                })
            }
            None => match store.write(LAYOUT_CELL, wanted.as_bytes(), Expect::Absent) {
                Ok(WriteOutcome::Written) | Err(_) => return Ok(()),
                // Another user wrote it first: compare with what it wrote.
                Ok(WriteOutcome::Conflict) => continue,
            },
        }
    }
    Ok(())
}

/// What [`precreate_cells`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Precreated {
    /// Cells this call created.
    pub created: u32,
    /// Every cell of the layout exists now: requests will never create one, so a host whose
    /// creation is not exactly atomic needs no read-back of its updates.
    pub all_exist: bool,
}

/// Creates every cell of `layout` that does not exist yet (empty), so requests never find a cell
/// absent and never have to *create* one (the one write a host's store may not make exactly
/// atomic: Envoy's shared data). An existing cell is left untouched. The ledger cells of the
/// shares ([`crate::store::share`]) are cells like the others and are made the same way when
/// some share is counted (`shares_counted`): with every share `"off"` no request writes one.
pub fn precreate_cells<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    shares_counted: bool,
) -> Precreated {
    let mut done = Precreated {
        created: 0,
        all_exist: true,
    };
    let records = (0..layout.capacity.cells).map(|index| layout.cell_name_at(index));
    let ledgers = (0..layout.ledger_cells())
        .filter(|_| shares_counted)
        .map(|index| layout.ledger_cell_name_at(index));
    for cell in records.chain(ledgers) {
        let exists = match store.read(&cell) {
            Ok(Some(_)) => true,
            Ok(None) => match store.write(&cell, &[], Expect::Absent) {
                Ok(WriteOutcome::Written) => {
                    done.created += 1;
                    true
                }
                // Another user created it between the read and the write.
                Ok(WriteOutcome::Conflict) => true,
                Err(_) => false,
            },
            Err(_) => false,
        };
        done.all_exist &= exists;
    }
    done
}

/// The background sweep: walks the layout's record cells a few at a time, from a cursor each
/// sweeper starts where it likes (several sweepers need not sweep in lockstep).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sweep {
    cursor: u32,
}

impl Sweep {
    /// A sweep that starts after cell `cursor` (any number: taken modulo the cell count).
    pub fn from(cursor: u32) -> Sweep {
        Sweep { cursor }
    }

    /// Sweeps the next `cells` cells of `layout` (at most all of them once) at `now`.
    pub fn next<S: Store + ?Sized>(
        &mut self,
        store: &mut S,
        layout: &Layout,
        cells: u32,
        now: UnixMillis,
    ) {
        let total = layout.capacity.cells.max(1);
        for _ in 0..cells.min(layout.capacity.cells) {
            self.cursor = self.cursor.wrapping_add(1) % total;
            sweep_cell(store, &layout.cell_name_at(self.cursor), now);
        }
    }
}

/// Rewrites a cell without its expired records, if it has any (conditional: a concurrent request
/// wins and the sweep simply moves on; the next write to the cell reclaims them anyway).
pub(crate) fn sweep_cell<S: Store + ?Sized>(store: &mut S, cell: &str, now: UnixMillis) {
    let Ok(Some(snapshot)) = store.read(cell) else {
        return;
    };
    let Ok(mut bucket) = Bucket::decode(&snapshot.bytes) else {
        return;
    };
    let before = bucket.entries.len();
    bucket.reclaim(now);
    if bucket.entries.len() != before {
        let _ = store.write(cell, &bucket.encode(), Expect::Version(snapshot.version));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;
    use alloc::string::ToString;

    fn layout(cells: u32, per_cell: u16) -> Layout {
        Layout {
            capacity: Capacity { cells, per_cell },
        }
    }

    #[test]
    fn a_changed_layout_is_refused() {
        let mut store = MemoryStore::new();
        assert_eq!(claim_layout(&mut store, &layout(8, 8)), Ok(()));
        assert_eq!(claim_layout(&mut store, &layout(8, 8)), Ok(()));
        let refusal = claim_layout(&mut store, &layout(16, 8)).unwrap_err();
        assert_eq!(
            refusal,
            LayoutError::Changed {
                from: "8 cells x 8 records".to_string(),
                to: Capacity {
                    cells: 16,
                    per_cell: 8
                }
            }
        );
        let text = refusal.to_string();
        assert!(text.contains(
            "store layout would change from 8 cells x 8 records to 16 cells x 8 records"
        ));
        assert!(text.contains("restart"));
        assert!(claim_layout(&mut store, &layout(8, 4)).is_err());
    }

    #[test]
    fn every_cell_is_made_once() {
        let mut store = MemoryStore::new();
        let first = precreate_cells(&mut store, &layout(5, 8), false);
        assert_eq!(
            first,
            Precreated {
                created: 5,
                all_exist: true
            }
        );
        assert_eq!(precreate_cells(&mut store, &layout(5, 8), false).created, 0);
        assert_eq!(store.cell_count(), 5);
    }

    #[test]
    fn the_sweep_walks_every_cell_in_turn() {
        let mut store = MemoryStore::new();
        let layout = layout(3, 8);
        let _ = precreate_cells(&mut store, &layout, false);
        let mut sweep = Sweep::from(u32::MAX);
        // More cells asked than there are: each is swept once.
        sweep.next(&mut store, &layout, 10, UnixMillis(0));
        assert_eq!(sweep, Sweep::from(u32::MAX.wrapping_add(3) % 3));
    }
}
