//! The story-level Envoy of one test: N workers running the filter, sharing one shared-data map
//! and one clock; requests are sent to a chosen worker and come back as [`Roundtrip`]s.
//!
//! ```no_run
//! # use idemgate_host_tests::scenario::{Envoy, Request, Response};
//! # fn main() -> idemgate_host_tests::Result<()> {
//! let envoy = Envoy::builder().workers(2).start()?;
//! let order = Request::post("/orders").key("k-1").json(r#"{"sku":"A1"}"#);
//! let first = envoy.worker(0).send(order.clone())?;      // reaches the upstream, which is slow
//! let second = envoy.worker(1).send(order.clone())?;     // same key meanwhile: 409
//! first.respond(Response::new(201).json(r#"{"id":7}"#))?;
//! let third = envoy.worker(1).send(order)?;              // a replay, not a second order
//! # Ok(()) }
//! ```

use super::forwarding::Forwarding;
use super::request::Request;
use super::roundtrip::Roundtrip;
use crate::artifacts;
use crate::envoy::{
    CalloutRecord, CalloutRequest, Chain, Clock, Cluster, ClusterPath, Faults, LogLine, Service,
    SharedData, UpstreamCall, VmSetup, Worker, World,
};
use crate::error::Result;
use crate::runtime::{filter_module, FilterModule};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

/// How to start a simulated Envoy.
#[derive(Clone)]
pub struct EnvoyBuilder {
    workers: usize,
    config: String,
    seed: u64,
    wasm: Option<PathBuf>,
    env: Vec<(String, String)>,
    node_properties: BTreeMap<String, Vec<u8>>,
    chain: Chain,
    log_level: Option<u32>,
    clusters: Vec<(String, Cluster, ClusterPath)>,
}

impl EnvoyBuilder {
    /// A cluster the filter's callouts can reach, served by `service` (an upstream model).
    pub fn cluster(self, name: &str, service: impl Service + 'static) -> Self {
        self.shared_cluster(name, Arc::new(service))
    }

    /// A cluster served by a model this test keeps a handle on (to read its state, or to share
    /// it with another simulated Envoy).
    pub fn shared_cluster(mut self, name: &str, service: Cluster) -> Self {
        self.clusters
            .push((name.to_string(), service, ClusterPath::Direct));
        self
    }

    /// A re-entry cluster: its callouts go through the internal listener's inner pass (Envoy's
    /// routes and the filters after idemgate), whose routes send them to `app`; every answer is
    /// marked (see [`crate::envoy::reentry`]).
    pub fn reentry_cluster(mut self, name: &str, app: Cluster) -> Self {
        self.clusters
            .push((name.to_string(), app, ClusterPath::Reentry));
        self
    }

    /// The cluster `forwarding` sends detached exchanges to, served by `app` that way.
    pub fn forwarding(mut self, forwarding: Forwarding, app: Cluster) -> Self {
        self.clusters
            .push((forwarding.cluster().to_string(), app, forwarding.path()));
        self
    }

    /// The log level the filter sees (proxy-wasm levels; default trace). Envoy's default is info (2).
    pub fn log_level(mut self, level: u32) -> Self {
        self.log_level = Some(level);
        self
    }

    /// What follows the filter in the chain (default: a buffer filter, as shipped).
    pub fn chain(mut self, chain: Chain) -> Self {
        self.chain = chain;
        self
    }

    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n.max(1);
        self
    }

    /// The plugin configuration (JSON, as in `envoy.yaml`).
    pub fn config(mut self, json: &str) -> Self {
        self.config = json.to_string();
        self
    }

    /// Seeds the entropy the filter draws (owner tokens, nonces).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Runs this `.wasm` instead of the shipped filter.
    pub fn wasm(mut self, path: PathBuf) -> Self {
        self.wasm = Some(path);
        self
    }

    /// An environment variable of the VM (Envoy's `vm_config.environment_variables`).
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_string(), value.to_string()));
        self
    }

    pub fn node_property(mut self, path: &str, value: impl AsRef<[u8]>) -> Self {
        self.node_properties
            .insert(path.to_string(), value.as_ref().to_vec());
        self
    }

    pub fn start(self) -> Result<Envoy> {
        let path = match self.wasm {
            Some(path) => path,
            None => artifacts::filter_wasm()?,
        };
        let module = filter_module(&path)?;
        let world = World::new(self.seed);
        for (name, service, path) in self.clusters {
            world.add_destination(&name, service, path);
        }
        let setup = VmSetup {
            plugin_config: self.config.into_bytes(),
            vm_config: Vec::new(),
            env: self.env,
            node_properties: self.node_properties,
            gate: None,
            chain: self.chain,
            log_level: self.log_level,
        };
        let mut workers = Vec::with_capacity(self.workers);
        for index in 0..self.workers {
            let worker = Worker::start(&module, world.clone(), index, setup.clone())?;
            workers.push(Rc::new(RefCell::new(worker)));
        }
        Ok(Envoy {
            world,
            workers,
            module,
            setup,
        })
    }
}

/// A simulated Envoy owned by one test.
pub struct Envoy {
    world: World,
    workers: Vec<Rc<RefCell<Worker>>>,
    module: Arc<FilterModule>,
    setup: VmSetup,
}

/// One worker of a simulated Envoy.
#[derive(Clone)]
pub struct WorkerHandle {
    worker: Rc<RefCell<Worker>>,
}

impl Envoy {
    pub fn builder() -> EnvoyBuilder {
        EnvoyBuilder {
            workers: 1,
            config: String::new(),
            seed: 0x1de3_9a7e,
            wasm: None,
            env: Vec::new(),
            node_properties: BTreeMap::new(),
            chain: Chain::default(),
            log_level: None,
            clusters: Vec::new(),
        }
    }

    /// Worker `i` (modulo the number of workers).
    pub fn worker(&self, i: usize) -> WorkerHandle {
        WorkerHandle {
            worker: self.workers[i % self.workers.len()].clone(),
        }
    }

    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    pub fn world(&self) -> &World {
        &self.world
    }

    pub fn clock(&self) -> &Clock {
        self.world.clock()
    }

    /// Moves the clock and fires the tick of every worker whose period elapsed.
    pub fn advance(&self, by: Duration) -> Result<()> {
        self.world.clock().advance(by);
        for worker in &self.workers {
            worker.borrow_mut().tick_if_due()?;
        }
        Ok(())
    }

    /// Restarts worker `i`'s VM (everything it kept in memory is lost; shared data stays).
    pub fn restart_worker(&self, i: usize) -> Result<()> {
        let index = i % self.workers.len();
        let fresh = Worker::start(&self.module, self.world.clone(), index, self.setup.clone())?;
        *self.workers[index].borrow_mut() = fresh;
        Ok(())
    }

    pub fn shared_data(&self) -> MutexGuard<'_, SharedData> {
        self.world.shared_data()
    }

    pub fn faults(&self) -> MutexGuard<'_, Faults> {
        self.world.faults()
    }

    /// Every request that reached the upstream.
    pub fn upstream_calls(&self) -> Vec<UpstreamCall> {
        self.world.upstream_calls()
    }

    /// Every callout answered (or failed) so far, on every worker, in order.
    pub fn callouts(&self) -> Vec<CalloutRecord> {
        self.world.callouts()
    }

    /// Answers every pending callout of every worker (and the ones their answers dispatch).
    pub fn answer_callouts(&self) -> Result<Vec<CalloutRecord>> {
        let mut records = Vec::new();
        for worker in &self.workers {
            records.extend(worker.borrow_mut().deliver_all_callouts()?);
        }
        Ok(records)
    }

    /// A counter's or gauge's value by name (summed over every worker, as Envoy's stats are).
    pub fn metric(&self, name: &str) -> Option<i64> {
        self.world.metrics().get(name).map(|m| m.value)
    }

    /// Metric names and values (for diagnostics).
    pub fn metrics(&self) -> Vec<(String, i64)> {
        self.world
            .metrics()
            .all()
            .map(|(n, m)| (n.to_string(), m.value))
            .collect()
    }

    pub fn logs(&self) -> Vec<LogLine> {
        self.world.logs()
    }

    pub fn anomalies(&self) -> Vec<String> {
        self.world.anomalies()
    }

    /// What every callback so far cost, by callback name: wasm operators executed and host calls
    /// made (deterministic, unlike time on a shared machine).
    pub fn work(&self) -> std::collections::BTreeMap<String, crate::envoy::world::Work> {
        self.world.work()
    }

    /// Host calls so far by (callback name, import name).
    pub fn import_work(&self) -> std::collections::BTreeMap<(String, String), u64> {
        self.world.import_work()
    }
}

impl WorkerHandle {
    /// Sends a whole request (headers, then every body chunk).
    pub fn send(&self, request: Request) -> Result<Roundtrip> {
        let mut exchange = self.begin(request)?;
        exchange.send_rest()?;
        Ok(exchange)
    }

    /// Sends only the request headers; the body follows with [`Roundtrip::send_next_chunk`].
    pub fn begin(&self, request: Request) -> Result<Roundtrip> {
        let context = self.worker.borrow_mut().open(request.stream_properties())?;
        let no_body = request.chunks().is_empty();
        self.worker
            .borrow_mut()
            .request_headers(context, request.header_map(), no_body)?;
        Ok(Roundtrip::new(self.worker.clone(), context, request))
    }

    /// The callouts this worker dispatched that were not answered yet.
    pub fn pending_callouts(&self) -> Vec<CalloutRequest> {
        self.worker.borrow().pending_callouts()
    }

    /// Callout `token` is answered (or fails) as its cluster and the fault plan say.
    pub fn answer_callout(&self, token: u32) -> Result<CalloutRecord> {
        self.worker.borrow_mut().deliver_callout(token)
    }

    /// Answers every pending callout of this worker, in dispatch order.
    pub fn answer_callouts(&self) -> Result<Vec<CalloutRecord>> {
        self.worker.borrow_mut().deliver_all_callouts()
    }

    /// Direct access to the worker (for host-level tests).
    pub fn with<R>(&self, f: impl FnOnce(&mut Worker) -> R) -> R {
        f(&mut self.worker.borrow_mut())
    }
}
