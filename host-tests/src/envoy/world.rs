//! What the workers of one simulated Envoy share: the shared-data map of their `vm_id`, the clock,
//! the stats store, the log, the entropy source, the fault plan, the record of upstream calls, and
//! the clusters HTTP callouts reach (with the record of every callout answered).
//! One `World` per test: nothing here is global, so tests run in parallel.

use super::callouts::{CalloutRecord, Cluster, ClusterPath, Clusters, Destination};
use super::clock::Clock;
use super::entropy::Entropy;
use super::faults::Faults;
use super::metrics::Metrics;
use super::shared_data::SharedData;
use std::sync::{Arc, Mutex, MutexGuard};

/// Locks a mutex, ignoring poisoning (a panicking test thread must not hide the original failure).
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One `proxy_log` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub worker: usize,
    /// proxy-wasm log level: 0 trace … 5 critical.
    pub level: u32,
    pub message: String,
}

/// A request that reached the upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamCall {
    pub worker: usize,
    pub context: u32,
    pub method: String,
    pub path: String,
    /// The `idempotency-key` header as forwarded (if any).
    pub key: Option<String>,
    pub at_ms: u64,
    /// How many shared-data writes had happened when it started (orders it among the writes).
    pub writes_before: usize,
}

#[derive(Debug)]
struct Shared {
    shared_data: Mutex<SharedData>,
    clock: Clock,
    metrics: Mutex<Metrics>,
    logs: Mutex<Vec<LogLine>>,
    entropy: Mutex<Entropy>,
    faults: Mutex<Faults>,
    upstream: Mutex<Vec<UpstreamCall>>,
    clusters: Mutex<Clusters>,
    callouts: Mutex<Vec<CalloutRecord>>,
    anomalies: Mutex<Vec<String>>,
    /// The shared queues the workers registered: by name, its id; by id, what was enqueued.
    queues: Mutex<Queues>,
    /// Per callback name: what it cost, summed (deterministic work counts).
    work: Mutex<std::collections::BTreeMap<String, Work>>,
    /// Per (callback, import): calls made, summed.
    import_work: Mutex<std::collections::BTreeMap<(String, String), u64>>,
    /// A profiling copy's operators by (callback, defined function index).
    profile: Mutex<std::collections::BTreeMap<(String, usize), u64>>,
    /// A profiling copy's allocations by guest call stack (`crate::profile`).
    allocs: Mutex<std::collections::BTreeMap<Vec<String>, u64>>,
    echo_logs: bool,
}

/// Envoy's shared queues, as `proxy_register_shared_queue`, `proxy_enqueue_shared_queue` and
/// `proxy_dequeue_shared_queue` see them: a name registered again keeps its id (Envoy rebinds it to
/// the last registrant); ids start at 1. `proxy_on_queue_ready` is not delivered: a guest that
/// relies on it alone would be seen to (its items stay queued).
#[derive(Debug, Default)]
pub struct Queues {
    ids: std::collections::BTreeMap<String, u32>,
    items: std::collections::BTreeMap<u32, std::collections::VecDeque<Vec<u8>>>,
}

impl Queues {
    pub fn register(&mut self, name: &str) -> u32 {
        let next = u32::try_from(self.ids.len()).unwrap_or(u32::MAX - 1) + 1;
        let id = *self.ids.entry(name.to_string()).or_insert(next);
        self.items.entry(id).or_default();
        id
    }

    /// `false`: no such queue.
    pub fn enqueue(&mut self, id: u32, item: Vec<u8>) -> bool {
        match self.items.get_mut(&id) {
            Some(queue) => {
                queue.push_back(item);
                true
            }
            None => false,
        }
    }

    /// `None`: no such queue; `Some(None)`: empty.
    pub fn dequeue(&mut self, id: u32) -> Option<Option<Vec<u8>>> {
        self.items
            .get_mut(&id)
            .map(std::collections::VecDeque::pop_front)
    }
}

/// Cheap to clone: every worker holds one.
#[derive(Debug, Clone)]
pub struct World(Arc<Shared>);

impl World {
    pub fn new(seed: u64) -> Self {
        Self::with_clock(seed, Clock::default())
    }

    /// A world reading `clock` (one wall clock for the simulated Envoys of a fleet).
    pub fn with_clock(seed: u64, clock: Clock) -> Self {
        World(Arc::new(Shared {
            shared_data: Mutex::new(SharedData::default()),
            clock,
            metrics: Mutex::new(Metrics::default()),
            logs: Mutex::new(Vec::new()),
            entropy: Mutex::new(Entropy::seeded(seed)),
            faults: Mutex::new(Faults::default()),
            upstream: Mutex::new(Vec::new()),
            clusters: Mutex::new(Clusters::default()),
            callouts: Mutex::new(Vec::new()),
            anomalies: Mutex::new(Vec::new()),
            queues: Mutex::new(Queues::default()),
            work: Mutex::new(std::collections::BTreeMap::new()),
            import_work: Mutex::new(std::collections::BTreeMap::new()),
            profile: Mutex::new(std::collections::BTreeMap::new()),
            allocs: Mutex::new(std::collections::BTreeMap::new()),
            echo_logs: std::env::var_os("IDEMGATE_HOST_LOGS").is_some(),
        }))
    }

    pub fn clock(&self) -> &Clock {
        &self.0.clock
    }

    pub fn queues(&self) -> MutexGuard<'_, Queues> {
        lock(&self.0.queues)
    }

    pub fn shared_data(&self) -> MutexGuard<'_, SharedData> {
        lock(&self.0.shared_data)
    }

    pub fn metrics(&self) -> MutexGuard<'_, Metrics> {
        lock(&self.0.metrics)
    }

    pub fn entropy(&self) -> MutexGuard<'_, Entropy> {
        lock(&self.0.entropy)
    }

    pub fn faults(&self) -> MutexGuard<'_, Faults> {
        lock(&self.0.faults)
    }

    pub fn log(&self, line: LogLine) {
        if self.0.echo_logs {
            eprintln!(
                "[worker {} level {}] {}",
                line.worker, line.level, line.message
            );
        }
        lock(&self.0.logs).push(line);
    }

    pub fn logs(&self) -> Vec<LogLine> {
        lock(&self.0.logs).clone()
    }

    pub fn record_upstream(&self, call: UpstreamCall) {
        lock(&self.0.upstream).push(call);
    }

    pub fn upstream_calls(&self) -> Vec<UpstreamCall> {
        lock(&self.0.upstream).clone()
    }

    /// Makes `name` a cluster Envoy knows, served by `service` and reached directly (callouts to
    /// any other name answer `BadArgument`, as Envoy's do for a cluster it does not know).
    pub fn add_cluster(&self, name: &str, service: Cluster) {
        self.add_destination(name, service, ClusterPath::Direct);
    }

    /// Makes `name` a re-entry cluster: its callouts go through the internal listener's inner
    /// pass, whose routes send them to `app` (see [`super::reentry`]).
    pub fn add_reentry_cluster(&self, name: &str, app: Cluster) {
        self.add_destination(name, app, ClusterPath::Reentry);
    }

    pub fn add_destination(&self, name: &str, service: Cluster, path: ClusterPath) {
        lock(&self.0.clusters)
            .0
            .insert(name.to_string(), Destination { service, path });
    }

    /// The app behind cluster `name`, whichever way it is reached.
    pub fn cluster(&self, name: &str) -> Option<Cluster> {
        self.destination(name).map(|d| d.service)
    }

    pub fn destination(&self, name: &str) -> Option<Destination> {
        lock(&self.0.clusters).0.get(name).cloned()
    }

    pub fn record_callout(&self, record: CalloutRecord) {
        lock(&self.0.callouts).push(record);
    }

    /// Every callout answered (or failed) so far, in order.
    pub fn callouts(&self) -> Vec<CalloutRecord> {
        lock(&self.0.callouts).clone()
    }

    /// Something the filter did that Envoy would tolerate but that is suspicious (a bad pointer, a
    /// second local reply, an unknown buffer type): tests assert there are none.
    pub fn anomaly(&self, what: String) {
        if self.0.echo_logs {
            eprintln!("[anomaly] {what}");
        }
        lock(&self.0.anomalies).push(what);
    }

    pub fn anomalies(&self) -> Vec<String> {
        lock(&self.0.anomalies).clone()
    }

    /// Adds one callback's cost to the ledger.
    pub fn record_work(&self, callback: &str, fuel: u64, host_calls: u64) {
        let mut work = lock(&self.0.work);
        let entry = work.entry(callback.to_string()).or_default();
        entry.calls += 1;
        entry.fuel += fuel;
        entry.host_calls += host_calls;
    }

    /// Adds `calls` calls of `import` made by `callback` to the ledger.
    pub fn record_import(&self, callback: &str, import: &str, calls: u64) {
        *lock(&self.0.import_work)
            .entry((callback.to_string(), import.to_string()))
            .or_default() += calls;
    }

    /// Adds one callback's per-function operator counts (a profiling copy's, `crate::profile`).
    pub fn record_profile(&self, callback: &str, counts: &[(usize, u64)]) {
        let mut profile = lock(&self.0.profile);
        for (function, ops) in counts {
            *profile
                .entry((callback.to_string(), *function))
                .or_default() += ops;
        }
    }

    /// Operators so far by (callback, defined function index), when running a profiling copy.
    pub fn profile(&self) -> std::collections::BTreeMap<(String, usize), u64> {
        lock(&self.0.profile).clone()
    }

    /// Counts one allocation of a profiling copy made with the guest stack `frames` (demangled
    /// names, innermost first).
    pub fn record_alloc(&self, frames: Vec<String>) {
        *lock(&self.0.allocs).entry(frames).or_default() += 1;
    }

    /// Allocations so far by guest call stack, when running a profiling copy.
    pub fn alloc_sites(&self) -> std::collections::BTreeMap<Vec<String>, u64> {
        lock(&self.0.allocs).clone()
    }

    /// Host calls so far, by callback and import name.
    pub fn import_work(&self) -> std::collections::BTreeMap<(String, String), u64> {
        lock(&self.0.import_work).clone()
    }

    /// Every callback run so far, by name.
    pub fn work(&self) -> std::collections::BTreeMap<String, Work> {
        lock(&self.0.work).clone()
    }
}

/// What the filter's callbacks of one name cost, summed over their calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    pub calls: u64,
    /// wasmtime fuel: wasm operators executed.
    pub fuel: u64,
    /// Host calls (proxy-wasm and WASI imports) the guest made.
    pub host_calls: u64,
}
