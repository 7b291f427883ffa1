//! The plugin's root context: compiles the configuration once per VM (`on_configure`), hands every
//! request context a reference to it, and reclaims expired records in the background (`on_tick`).

use crate::abi::{self, LogLevel};
use crate::callout::CalloutTable;
use crate::host;
use crate::metrics::Metrics;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::shared::{OwnerTokens, Pending, Shared, TICK};
use crate::shared_store::{HostSharedData, SharedStore};
use alloc::rc::Rc;
use core::cell::{Cell, RefCell};
use idemgate_core::policy::Policy;
use idemgate_core::store::layout::{claim_layout, precreate_cells, Sweep};
use idemgate_core::store::Layout;
use idemgate_core::time::{Span, UnixMillis};

/// Cells swept per tick per VM (every worker's VM and the main thread's tick).
const SWEEP_CELLS_PER_TICK: u32 = 32;

#[derive(Default)]
pub struct Root {
    shared: Option<Rc<Shared>>,
    sweep: Sweep,
    /// Kept across reconfigurations: a callout made under the old configuration still finds its
    /// entry (which carries the configuration it was made under).
    pub callouts: Rc<RefCell<CalloutTable<Pending>>>,
    /// This VM's shared queue, where completed keys are announced ([`crate::waking`]): registered
    /// once, when a configuration first has a route that waits.
    pub queue: Option<u32>,
    /// When the store was last swept.
    swept: Option<UnixMillis>,
}

/// Quickens the VM's tick to the waiters' ([`idemgate_core::guard::Waiters::TICK`]), if it is not already: a parked
/// stream's questions and deadline are paced by it. Called on a stream: Envoy sets the tick of
/// the stream's root context.
pub fn quicken_tick(shared: &Shared) {
    if !shared.quick_tick.replace(true) {
        shared.set_tick();
        // Completions announce only to queues whose VM has a stream parked ([`crate::waking`]).
        if let Some(id) = shared.queue {
            crate::waking::parked(id, true);
        }
    }
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
        let waits = policy.routes.iter().any(|route| route.wait().is_some());
        if waits && self.queue.is_none() {
            self.queue = crate::waking::register();
        }
        let precreated = precreate_cells(&mut SharedStore::new(HostSharedData), &layout, counted);
        // Finishes queued under the configuration being replaced go now, under it.
        if let Some(old) = &self.shared {
            crate::remote_store::flush(old);
        }
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
            waits,
            queue: self.queue,
            waiters: RefCell::default(),
            quick_tick: Cell::new(false),
            finishes: RefCell::default(),
            finish_tick: Cell::new(false),
        }));
        // Start the sweep at a different cell in every VM, so VMs do not sweep in lockstep.
        let seed = crate::entropy::random16();
        self.sweep = Sweep::from(u32::from_le_bytes([seed[0], seed[1], 0, 0]));
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
        // No clock, no sweep: what is expired cannot be told; the next tick tries again.
        let Some(now) = host::now() else { return };
        // Finishes queued long enough go to the store service.
        crate::remote_store::tick(shared, now);
        // A tick quickened for waiters (or queued finishes) still sweeps (and reads the log level) once a second.
        if self
            .swept
            .is_some_and(|at| now < at.after(Span::from_secs(1)))
        {
            return;
        }
        self.swept = Some(now);
        shared.debug.set(host::debug_enabled());
        let layout = Layout {
            capacity: shared.policy.capacity,
        };
        self.sweep
            .next(&mut shared.store(), &layout, SWEEP_CELLS_PER_TICK, now);
    }

    /// Back to the one-second tick once no stream waits.
    pub fn pace_tick(&self) {
        let Some(shared) = &self.shared else { return };
        let idle = shared.waiters.try_borrow().is_ok_and(|w| w.is_empty());
        if idle && shared.quick_tick.replace(false) {
            shared.set_tick();
            if let Some(id) = shared.queue {
                crate::waking::parked(id, false);
            }
        }
    }

    /// What its request contexts share, once the root is configured (before that, requests
    /// pass untouched).
    pub fn shared(&self) -> Option<Rc<Shared>> {
        self.shared.clone()
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
