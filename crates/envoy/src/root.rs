//! The plugin's root context: compiles the configuration once per VM (`on_configure`), hands every
//! request context a reference to it, and reclaims expired records in the background (`on_tick`).

use crate::filter::Filter;
use crate::host;
use crate::metrics::Metrics;
use crate::shared_store::{HostSharedData, SharedStore};
use idemgate_core::policy::Policy;
use idemgate_core::record::Bucket;
use idemgate_core::store::{Expect, Layout, Store};
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{BufferType, ContextType, LogLevel};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// What every request context of a VM shares, by reference.
pub struct Shared {
    pub policy: &'static Policy,
    pub metrics: Metrics,
    /// Cached host log level (refreshed on every tick), so no debug line is formatted for nothing.
    pub debug: Cell<bool>,
}

/// Cells swept per tick per VM (every worker's VM and the main thread's tick).
const SWEEP_CELLS_PER_TICK: u32 = 32;
const TICK: Duration = Duration::from_secs(1);

#[derive(Default)]
pub struct Root {
    shared: Option<Rc<Shared>>,
    sweep_cursor: u32,
}

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, _size: usize) -> bool {
        let text = hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX)
            .ok()
            .flatten()
            .unwrap_or_default();
        let Ok(text) = String::from_utf8(text) else {
            host::log(
                LogLevel::Error,
                "configuration is not valid: not UTF-8 text",
            );
            return false;
        };
        // The VM's environment (`vm_config.environment_variables`) resolves `token.secret_env`.
        let policy = match Policy::from_json(&text, &|name| std::env::var(name).ok()) {
            Ok(policy) => policy,
            Err(e) => {
                host::log(LogLevel::Error, &format!("rejected: {e}"));
                return false;
            }
        };
        // Leaked once per configuration of this VM (a few KB): request contexts borrow it for as
        // long as they live, and the core's `FingerprintBuilder` keeps a `&'s FingerprintSpec`
        // across body callbacks, which a reference-counted policy inside the same context could not
        // lend without self-reference.
        let policy: &'static Policy = Box::leak(Box::new(policy));
        self.shared = Some(Rc::new(Shared {
            policy,
            metrics: Metrics::define(),
            debug: Cell::new(host::debug_enabled()),
        }));
        // Start the sweep at a different cell in every VM, so VMs do not sweep in lockstep.
        self.sweep_cursor = u32::from_le_bytes([
            crate::entropy::random16()[0],
            crate::entropy::random16()[1],
            0,
            0,
        ]);
        let _ = hostcalls::set_tick_period(TICK);
        host::log(
            LogLevel::Info,
            &format!(
                "configured: {} route(s), capacity {} records in {} cells",
                policy.routes.len(),
                policy.capacity.records(),
                policy.capacity.cells
            ),
        );
        true
    }

    fn on_tick(&mut self) {
        let Some(shared) = &self.shared else { return };
        shared.debug.set(host::debug_enabled());
        let layout = Layout {
            capacity: shared.policy.capacity,
        };
        let now = host::now();
        let mut store = SharedStore {
            data: HostSharedData,
        };
        for _ in 0..SWEEP_CELLS_PER_TICK.min(layout.capacity.cells) {
            self.sweep_cursor = self.sweep_cursor.wrapping_add(1) % layout.capacity.cells.max(1);
            sweep(&mut store, &cell_name(&layout, self.sweep_cursor), now);
        }
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        let shared = self.shared.clone()?;
        Some(Box::new(Filter::new(shared)))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

/// The core's name of cell `index` (a key whose first four bytes are the index lands there).
fn cell_name(layout: &Layout, index: u32) -> String {
    layout.cell_name_at(index)
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
    use idemgate_core::policy::Capacity;
    use idemgate_core::scope::StorageKey;

    #[test]
    fn cell_names_cover_the_layout() {
        let layout = Layout {
            capacity: Capacity {
                cells: 5,
                per_cell: 8,
            },
        };
        let names: Vec<String> = (0..5).map(|i| cell_name(&layout, i)).collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 5);
        let mut key = [3u8; 32];
        key[..4].copy_from_slice(&7u32.to_be_bytes());
        assert!(names.contains(&layout.cell_name(&StorageKey(key))));
    }
}
