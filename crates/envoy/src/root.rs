//! The plugin's root context: compiles the configuration once per VM (`on_configure`), hands every
//! request context a reference to it, and reclaims expired records in the background (`on_tick`).

use crate::abi::{self, LogLevel};
use crate::callout::CalloutTable;
use crate::host;
use crate::metrics::Metrics;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::shared::{OwnerTokens, Pending, Shared};
use crate::shared_store::{HostSharedData, SharedStore};
use alloc::rc::Rc;
use core::cell::{Cell, RefCell};
use core::time::Duration;
use idemgate_core::policy::Policy;
use idemgate_core::record::Bucket;
use idemgate_core::store::{Expect, Layout, Store, WriteOutcome};

/// Cells swept per tick per VM (every worker's VM and the main thread's tick).
const SWEEP_CELLS_PER_TICK: u32 = 32;
const TICK: Duration = Duration::from_secs(1);

#[derive(Default)]
pub struct Root {
    shared: Option<Rc<Shared>>,
    sweep_cursor: u32,
    /// Kept across reconfigurations: a callout made under the old configuration still finds its
    /// entry (which carries the configuration it was made under).
    pub callouts: Rc<RefCell<CalloutTable<Pending>>>,
}

impl Root {
    pub fn on_configure(&mut self, _size: usize) -> bool {
        let Some(text) = host::plugin_configuration() else {
            host::log(
                LogLevel::Error,
                "configuration is not valid: not UTF-8 text",
            );
            return false;
        };
        // The VM's environment (`vm_config.environment_variables`) resolves `token.secret_env`.
        let policy = match Policy::from_json(&text, &crate::environment::var) {
            Ok(policy) => policy,
            Err(e) => {
                host::log(LogLevel::Error, &format!("rejected: {e}"));
                return false;
            }
        };
        // Compiled once per configuration; every request context shares it by reference count.
        let policy = Rc::new(policy);
        let layout = Layout {
            capacity: policy.capacity,
        };
        if let Err(refusal) = claim_layout(&mut SharedStore::new(HostSharedData), &layout) {
            host::log(LogLevel::Error, &format!("rejected: {refusal}"));
            return false;
        }
        let counted = policy.shares.identity.is_some() || policy.shares.peer.is_some();
        let precreated = precreate_cells(&mut SharedStore::new(HostSharedData), &layout, counted);
        self.shared = Some(Rc::new(Shared {
            policy: Rc::clone(&policy),
            metrics: Metrics::define(),
            debug: Cell::new(host::debug_enabled()),
            settle_updates: !precreated.all_exist,
            owners: OwnerTokens::new(crate::entropy::random16()),
            callouts: Rc::clone(&self.callouts),
            scopes: Default::default(),
            hashing: Rc::default(),
            relay: Rc::default(),
        }));
        // Start the sweep at a different cell in every VM, so VMs do not sweep in lockstep.
        let seed = crate::entropy::random16();
        self.sweep_cursor = u32::from_le_bytes([seed[0], seed[1], 0, 0]);
        let _ = abi::set_tick_period(TICK);
        host::log(
            LogLevel::Info,
            &format!(
                "configured: {} route(s), capacity {} records in {} cells ({} created now{})",
                policy.routes.len(),
                policy.capacity.records(),
                policy.capacity.cells,
                precreated.created,
                if precreated.all_exist {
                    ""
                } else {
                    "; some could not be created: every write is read back"
                }
            ),
        );
        true
    }

    pub fn on_tick(&mut self) {
        let Some(shared) = &self.shared else { return };
        shared.debug.set(host::debug_enabled());
        let layout = Layout {
            capacity: shared.policy.capacity,
        };
        // No clock, no sweep: what is expired cannot be told; the next tick tries again.
        let Some(now) = host::now() else { return };
        let mut store = shared.store();
        for _ in 0..SWEEP_CELLS_PER_TICK.min(layout.capacity.cells) {
            self.sweep_cursor = self.sweep_cursor.wrapping_add(1) % layout.capacity.cells.max(1);
            sweep(&mut store, &layout.cell_name_at(self.sweep_cursor), now);
        }
    }

    /// What its request contexts share, once the root is configured (before that, requests
    /// pass untouched).
    pub fn shared(&self) -> Option<Rc<Shared>> {
        self.shared.clone()
    }
}

/// Creates every cell that does not exist yet (empty), so requests never find a cell absent and
/// never have to *create* one. Creation is the one write Envoy's shared data cannot make exactly
/// atomic (a `set` with CAS `u32::MAX`; see `shared_store`): a request that read "absent" could, in
/// a microsecond window, replace a cell whose CAS the global counter had just made `u32::MAX`. Done
/// here, at first start the counter is far from `u32::MAX`, so the corner cannot occur; on a reload
/// that adds cells, only those new cells are created while traffic flows. Returns how many cells
/// this call created; an existing cell is left untouched. The ledger cells of the shares
/// ([`idemgate_core::store::share`]) are cells like the others and are created the same way, when
/// some share is counted (`shares_counted`): with every share `"off"` no request writes one.
pub fn precreate_cells<S: Store>(
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
                // Another VM created it between our read and our write.
                Ok(WriteOutcome::Conflict) => true,
                Err(_) => false,
            },
            Err(_) => false,
        };
        done.all_exist &= exists;
    }
    done
}

/// The shared-data name of the layout every VM of this `vm_id` uses.
const LAYOUT_CELL: &str = "idemgate/layout";

/// Records the store's layout in shared data, or refuses a configuration whose layout differs from
/// the one already in use. Records live in the cell their key hashes to
/// *under the layout*: another cell count or records per cell would remap every key, so stored
/// answers, claims in flight and token uses would vanish, and the old cells would stay allocated
/// but unaddressed. Envoy keeps serving the previous configuration; a restart (new process, empty
/// shared data) takes the new layout.
pub fn claim_layout<S: Store>(store: &mut S, layout: &Layout) -> Result<(), String> {
    let wanted = format!(
        "{} cells x {} records",
        layout.capacity.cells, layout.capacity.per_cell
    );
    for _ in 0..4 {
        let current = match store.read(LAYOUT_CELL) {
            Ok(current) => current,
            // Unreadable: nothing to compare with; cells are checked as they are used.
            Err(_) => return Ok(()),
        };
        match current {
            Some(snapshot) if snapshot.bytes == wanted.as_bytes() => return Ok(()),
            Some(snapshot) => {
                return Err(format!(
                    "the store layout would change from {} to {wanted} (`capacity` / \
                     `records_per_cell`): every stored record would become unreachable. Keep the \
                     layout, or restart Envoy to start an empty store with the new one",
                    String::from_utf8_lossy(&snapshot.bytes)
                ))
            }
            None => match store.write(LAYOUT_CELL, wanted.as_bytes(), Expect::Absent) {
                Ok(WriteOutcome::Written) | Err(_) => return Ok(()),
                // Another VM wrote it first: compare with what it wrote.
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
    /// Every cell of the layout exists now: requests will never create one, so their updates need
    /// no read-back (`SharedStore::settle_updates`).
    pub all_exist: bool,
}

/// Rewrites a cell without its expired records, if it has any (conditional: a concurrent request
/// wins and the sweep simply moves on; the next write to the cell reclaims them anyway).
fn sweep<S: Store>(store: &mut S, cell: &str, now: idemgate_core::time::UnixMillis) {
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
    use idemgate_core::client::scope::StorageKey;
    use idemgate_core::policy::Capacity;

    #[test]
    fn owner_tokens_are_unique_per_vm_and_differ_across_vms() {
        let a = OwnerTokens::new([1; 16]);
        let b = OwnerTokens::new([2; 16]);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            assert!(seen.insert(a.next()));
            assert!(seen.insert(b.next()));
        }
        // The counter wraps instead of overflowing.
        let edge = OwnerTokens::new([0xFF; 16]);
        assert_ne!(edge.next(), edge.next());
    }

    #[test]
    fn a_changed_layout_is_refused() {
        use idemgate_core::store::MemoryStore;
        let layout = |cells, per_cell| Layout {
            capacity: Capacity { cells, per_cell },
        };
        let mut store = MemoryStore::new();
        assert_eq!(claim_layout(&mut store, &layout(8, 8)), Ok(()));
        assert_eq!(claim_layout(&mut store, &layout(8, 8)), Ok(()));
        let refusal = claim_layout(&mut store, &layout(16, 8)).unwrap_err();
        assert!(refusal.contains("from 8 cells x 8 records to 16 cells x 8 records"));
        assert!(claim_layout(&mut store, &layout(8, 4)).is_err());
    }

    #[test]
    fn cell_names_cover_the_layout() {
        let layout = Layout {
            capacity: Capacity {
                cells: 5,
                per_cell: 8,
            },
        };
        let names: Vec<String> = (0..5).map(|i| layout.cell_name_at(i)).collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 5);
        let mut key = [3u8; 32];
        key[..4].copy_from_slice(&7u32.to_be_bytes());
        assert!(names.contains(&layout.cell_name(&StorageKey::from_stored(key))));
    }
}
