//! One Envoy worker: a filter VM in its own `Store<VmState>` — loading it as Envoy does
//! (`_initialize`, root context, `on_vm_start`, `on_configure`), running its callbacks with traps
//! turned into errors, its timer, its outgoing calls and its conformance export. The stream flow
//! around the HTTP callbacks is in `flow.rs`.

use super::callouts::{
    resolve, CalloutFault, CalloutRecord, CalloutRequest, ClusterPath, Delivery,
};
use super::stream::{Phase, StreamState};
use super::vm::{Chain, Gate, HttpCallResponse, VmState};
use super::world::World;
use crate::abi::Status;
use crate::error::{HarnessError, Result};
use crate::runtime::{FilterModule, FUEL_PER_CALL};
use std::collections::BTreeMap;
use wasmtime::{Instance, Memory, Store, TypedFunc, WasmParams, WasmResults};

pub(super) const CONTINUE: i32 = 0;

/// How a worker's VM is set up.
#[derive(Clone, Default)]
pub struct VmSetup {
    pub plugin_config: Vec<u8>,
    pub vm_config: Vec<u8>,
    pub env: Vec<(String, String)>,
    pub node_properties: BTreeMap<String, Vec<u8>>,
    pub gate: Option<Gate>,
    pub chain: Chain,
    /// What `proxy_get_log_level` answers (proxy-wasm levels, 0 trace … 5 critical); `None`: trace,
    /// so tests see every debug line. Envoy's default is info (2).
    pub log_level: Option<u32>,
}

type Cb1 = TypedFunc<i32, ()>;
type Cb2 = TypedFunc<(i32, i32), i32>;
type Cb3 = TypedFunc<(i32, i32, i32), i32>;
type Cb5 = TypedFunc<(i32, i32, i32, i32, i32), ()>;

pub(super) struct Exports {
    pub(super) memory: Memory,
    pub(super) allocate: TypedFunc<i32, i32>,
    pub(super) on_context_create: TypedFunc<(i32, i32), ()>,
    pub(super) on_vm_start: Option<Cb2>,
    pub(super) on_configure: Option<Cb2>,
    pub(super) on_request_headers: Option<Cb3>,
    pub(super) on_request_body: Option<Cb3>,
    pub(super) on_request_trailers: Option<Cb2>,
    pub(super) on_response_headers: Option<Cb3>,
    pub(super) on_response_body: Option<Cb3>,
    pub(super) on_log: Option<Cb1>,
    pub(super) on_done: Option<TypedFunc<i32, i32>>,
    pub(super) on_delete: Option<Cb1>,
    pub(super) on_tick: Option<Cb1>,
    pub(super) on_http_call_response: Option<Cb5>,
    pub(super) conformance: Option<TypedFunc<(i32, i32), i64>>,
}

fn interface(what: impl Into<String>) -> HarnessError {
    HarnessError::Interface(what.into())
}

impl Exports {
    fn find(instance: &Instance, store: &mut Store<VmState>) -> Result<Exports> {
        fn opt<P: WasmParams, R: WasmResults>(
            instance: &Instance,
            store: &mut Store<VmState>,
            name: &str,
        ) -> Result<Option<TypedFunc<P, R>>> {
            match instance.get_func(&mut *store, name) {
                None => Ok(None),
                Some(func) => func.typed::<P, R>(&*store).map(Some).map_err(|e| {
                    interface(format!("export {name} has an unexpected signature: {e}"))
                }),
            }
        }
        fn req<P: WasmParams, R: WasmResults>(
            instance: &Instance,
            store: &mut Store<VmState>,
            name: &str,
        ) -> Result<TypedFunc<P, R>> {
            opt(instance, store, name)?
                .ok_or_else(|| interface(format!("the module does not export {name}")))
        }
        if instance
            .get_func(&mut *store, "proxy_abi_version_0_2_1")
            .is_none()
        {
            return Err(interface("the module does not export proxy_abi_version_0_2_1 (not a proxy-wasm ABI 0.2.1 module)"));
        }
        let memory = instance
            .get_memory(&mut *store, "memory")
            .ok_or_else(|| interface("the module exports no memory"))?;
        Ok(Exports {
            memory,
            allocate: req(instance, store, "proxy_on_memory_allocate")?,
            on_context_create: req(instance, store, "proxy_on_context_create")?,
            on_vm_start: opt(instance, store, "proxy_on_vm_start")?,
            on_configure: opt(instance, store, "proxy_on_configure")?,
            on_request_headers: opt(instance, store, "proxy_on_request_headers")?,
            on_request_body: opt(instance, store, "proxy_on_request_body")?,
            on_request_trailers: opt(instance, store, "proxy_on_request_trailers")?,
            on_response_headers: opt(instance, store, "proxy_on_response_headers")?,
            on_response_body: opt(instance, store, "proxy_on_response_body")?,
            on_log: opt(instance, store, "proxy_on_log")?,
            on_done: opt(instance, store, "proxy_on_done")?,
            on_delete: opt(instance, store, "proxy_on_delete")?,
            on_tick: opt(instance, store, "proxy_on_tick")?,
            on_http_call_response: opt(instance, store, "proxy_on_http_call_response")?,
            conformance: opt(instance, store, "idemgate_conformance")?,
        })
    }
}

/// A filter VM on one worker.
pub struct Worker {
    pub(super) index: usize,
    pub(super) store: Store<VmState>,
    pub(super) exports: Exports,
    pub(super) next_context: u32,
    pub(super) last_tick_ms: u64,
    /// A profiling copy's per-function operator counters (`crate::profile`); empty otherwise.
    pub(super) profile: Vec<(usize, wasmtime::Global)>,
}

impl Worker {
    /// Instantiates the filter, runs `_initialize`, creates the root context, starts the VM and
    /// configures the plugin — as Envoy does when a worker loads the filter.
    pub fn start(
        module: &FilterModule,
        world: World,
        index: usize,
        setup: VmSetup,
    ) -> Result<Worker> {
        let mut state = VmState::new(index, world);
        state.plugin_config = setup.plugin_config;
        state.vm_config = setup.vm_config;
        state.env = setup.env;
        state.node_properties = setup.node_properties;
        // The explorer's gate applies from the first request on: Envoy configures every worker's VM
        // before the listener takes traffic, so configuration (the filter creates its store cells
        // there) is never interleaved with requests.
        let gate = setup.gate;
        state.chain = setup.chain;
        if let Some(level) = setup.log_level {
            state.log_level = level;
        }
        // IDEMGATE_HOST_TRACE: print each callback's host calls with the operators before each.
        state.trace = std::env::var_os("IDEMGATE_HOST_TRACE").map(|_| Vec::new());
        let mut store = Store::new(module.module.engine(), state);
        let trap = |callback: &str, e: wasmtime::Error| HarnessError::Trap {
            worker: index,
            callback: callback.to_string(),
            message: format!("{e:?}"),
        };
        store
            .set_fuel(FUEL_PER_CALL)
            .map_err(|e| trap("instantiate", e))?;
        let imports = module
            .module
            .imports()
            .map(
                |import| match module.host.get_by_import(&mut store, &import) {
                    Some(wasmtime::Extern::Func(func)) => Some(func),
                    _ => None,
                },
            )
            .collect::<Vec<_>>();
        let state = store.data_mut();
        state.import_calls = vec![0; imports.len()];
        state.imports = imports;
        state.import_names = module.import_names.clone();
        let instance = module
            .pre
            .instantiate(&mut store)
            .map_err(|e| trap("instantiate", e))?;
        let guest_memory = instance.get_memory(&mut store, "memory");
        let guest_allocate = instance
            .get_func(&mut store, "proxy_on_memory_allocate")
            .or_else(|| instance.get_func(&mut store, "malloc"));
        let state = store.data_mut();
        state.guest_memory = guest_memory;
        state.guest_allocate = guest_allocate;
        for init in ["_initialize", "_start"] {
            if let Some(func) = instance.get_func(&mut store, init) {
                let func = func.typed::<(), ()>(&store).map_err(|e| trap(init, e))?;
                func.call(&mut store, ()).map_err(|e| trap(init, e))?;
                break;
            }
        }
        let exports = Exports::find(&instance, &mut store)?;
        let last_tick_ms = store.data().world.clock().now_ms();
        let profile = profile_counters(&instance, &mut store);
        install_alloc_hook(&instance, &mut store).map_err(|e| trap("instantiate", e))?;
        let mut worker = Worker {
            index,
            store,
            exports,
            next_context: 2,
            last_tick_ms,
            profile,
        };
        let root = worker.root_context() as i32;
        let create = worker.exports.on_context_create.clone();
        worker.call("proxy_on_context_create", root as u32, &create, (root, 0))?;
        let vm_size = worker.store.data().vm_config.len() as i32;
        if let Some(f) = worker.exports.on_vm_start.clone() {
            if worker.call("proxy_on_vm_start", root as u32, &f, (root, vm_size))? == 0 {
                return Err(worker.rejected());
            }
        }
        let plugin_size = worker.store.data().plugin_config.len() as i32;
        if let Some(f) = worker.exports.on_configure.clone() {
            if worker.call("proxy_on_configure", root as u32, &f, (root, plugin_size))? == 0 {
                return Err(worker.rejected());
            }
        }
        worker.store.data_mut().gate = gate;
        Ok(worker)
    }

    fn rejected(&self) -> HarnessError {
        HarnessError::ConfigRejected {
            worker: self.index,
            logs: self
                .world()
                .logs()
                .into_iter()
                .filter(|l| l.worker == self.index)
                .map(|l| l.message)
                .collect(),
        }
    }

    pub fn index(&self) -> usize {
        self.index
    }

    pub fn world(&self) -> &World {
        &self.store.data().world
    }

    pub fn root_context(&self) -> u32 {
        self.store.data().root_context
    }

    pub fn state(&self) -> &VmState {
        self.store.data()
    }

    pub fn state_mut(&mut self) -> &mut VmState {
        self.store.data_mut()
    }

    pub fn stream(&self, context: u32) -> Option<&StreamState> {
        self.store.data().streams.get(&context)
    }

    pub(super) fn stream_mut(&mut self, context: u32) -> Result<&mut StreamState> {
        self.store
            .data_mut()
            .streams
            .get_mut(&context)
            .ok_or_else(|| HarnessError::Usage(format!("no stream {context} on this worker")))
    }

    /// Runs one callback with `context` current, refilled fuel, and traps turned into errors.
    pub(super) fn call<P: WasmParams, R: WasmResults>(
        &mut self,
        name: &str,
        context: u32,
        func: &TypedFunc<P, R>,
        params: P,
    ) -> Result<R> {
        let state = self.store.data_mut();
        state.current = context;
        state.effective = None;
        let index = self.index;
        let world = self.store.data().world.clone();
        let trap = |e: wasmtime::Error| {
            // The SDK logs a panic's message (critical) before aborting: it says more than the trap.
            let last_words: Vec<String> = world
                .logs()
                .into_iter()
                .filter(|l| l.worker == index && l.level >= 4)
                .map(|l| l.message)
                .collect();
            HarnessError::Trap {
                worker: index,
                callback: name.to_string(),
                message: format!("{e} (the filter's error log: {last_words:?})\n{e:?}"),
            }
        };
        self.store.set_fuel(FUEL_PER_CALL).map_err(trap)?;
        let calls_before = self.store.data().host_calls;
        let result = func.call(&mut self.store, params).map_err(trap);
        let left = self.store.get_fuel().unwrap_or(FUEL_PER_CALL);
        let host_calls = self.store.data().host_calls - calls_before;
        world.record_work(name, FUEL_PER_CALL.saturating_sub(left), host_calls);
        self.take_profile(name, &world);
        if let Some(trace) = self.store.data_mut().trace.as_mut() {
            let steps = core::mem::take(trace);
            let mut last = FUEL_PER_CALL;
            let names = self.store.data().import_names.clone();
            let mut line = format!("TRACE {name}:");
            for (index, fuel) in steps {
                let import = names.get(index).map_or("?", String::as_str);
                line.push_str(&format!(" +{} {import}", last.saturating_sub(fuel)));
                last = fuel;
            }
            line.push_str(&format!(" +{} end", last.saturating_sub(left)));
            eprintln!("{line}");
        }
        let state = self.store.data_mut();
        for (index, count) in state.import_calls.iter_mut().enumerate() {
            if *count > 0 {
                let import = state.import_names.get(index).map_or("?", String::as_str);
                world.record_import(name, import, *count);
                *count = 0;
            }
        }
        result
    }

    /// Moves the profiling counters' values into the world's ledger (a no-op unless profiling).
    fn take_profile(&mut self, callback: &str, world: &World) {
        if self.profile.is_empty() {
            return;
        }
        let mut counts = Vec::new();
        for (function, global) in &self.profile {
            let value = global.get(&mut self.store).i64().unwrap_or(0);
            if value != 0 {
                counts.push((*function, value as u64));
                let _ = global.set(&mut self.store, wasmtime::Val::I64(0));
            }
        }
        world.record_profile(callback, &counts);
    }

    // ---------------------------------------------------------------------------------------
    // Root context: timers, outgoing calls, conformance

    /// Fires `proxy_on_tick` if a tick period is set and at least one period passed since the
    /// last tick (Envoy's timer does not catch up on missed ticks).
    pub fn tick_if_due(&mut self) -> Result<bool> {
        let period = u64::from(self.store.data().tick_period_ms);
        let now = self.world().clock().now_ms();
        if period == 0 || now < self.last_tick_ms.saturating_add(period) {
            return Ok(false);
        }
        self.last_tick_ms = now;
        let root = self.root_context();
        if let Some(f) = self.exports.on_tick.clone() {
            self.call("proxy_on_tick", root, &f, root as i32)?;
        }
        self.after_root_callback()?;
        Ok(true)
    }

    /// The callouts this worker's VM dispatched that were not answered yet, in dispatch order.
    pub fn pending_callouts(&self) -> Vec<CalloutRequest> {
        self.store
            .data()
            .callouts
            .iter()
            .map(|c| c.request.clone())
            .collect()
    }

    /// Callout `token` reaches its cluster's upstream and the answer (or failure) comes back, as
    /// Envoy delivers it: the clock moves to when it arrives, `proxy_on_http_call_response` runs
    /// on the root context (whether or not the stream that made the call still exists), then what
    /// it asked of streams (a local reply, a resume) is carried out.
    pub fn deliver_callout(&mut self, token: u32) -> Result<CalloutRecord> {
        let state = self.store.data_mut();
        let at = state
            .callouts
            .iter()
            .position(|c| c.request.token == token)
            .ok_or_else(|| HarnessError::Usage(format!("no pending callout with token {token}")))?;
        let pending = state.callouts.remove(at);
        let destination = self.world().destination(&pending.request.cluster);
        if destination
            .as_ref()
            .is_some_and(|d| d.service.shared_state())
        {
            let what = format!("callout {token} reaches {}", pending.request.cluster);
            self.store.data().pass_gate(&what);
        }
        let clock = self.world().clock().clone();
        let mut pending = pending;
        if pending.deadline_passed(clock.now_ms()) {
            // Envoy's timer fired at the deadline, before this (late) delivery.
            pending.fault = Some(CalloutFault::Timeout);
        }
        let resolved = resolve(destination.as_ref(), &pending);
        let (reached, delay, delivery) = (resolved.reached, resolved.delay, resolved.delivery);
        let due = pending
            .request
            .sent_at_ms
            .saturating_add(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX));
        if due > clock.now_ms() {
            clock.advance(std::time::Duration::from_millis(due - clock.now_ms()));
        }
        let root = self.root_context();
        let stream_gone = pending.from_context != root
            && self
                .stream(pending.from_context)
                .is_none_or(|s| s.phase == Phase::Done);
        let record = CalloutRecord {
            request: pending.request,
            reached,
            delivery: delivery.clone(),
            delivered_at_ms: clock.now_ms(),
            stream_gone,
            from_app: resolved.from_app,
            path: destination.map_or(ClusterPath::Direct, |d| d.path),
        };
        self.world().record_callout(record.clone());
        let args = match delivery {
            Delivery::Response {
                headers,
                body,
                trailers,
            } => {
                let args = (
                    root as i32,
                    token as i32,
                    headers.pairs().len() as i32,
                    body.len() as i32,
                    trailers.pairs().len() as i32,
                );
                self.store.data_mut().http_call_response = Some(HttpCallResponse {
                    headers,
                    body,
                    trailers,
                });
                args
            }
            Delivery::Failure => {
                self.store.data_mut().root_status =
                    (Status::BrokenConnection.code() as u32, "reset".into());
                (root as i32, token as i32, 0, 0, 0)
            }
        };
        let result = match self.exports.on_http_call_response.clone() {
            Some(f) => self.call("proxy_on_http_call_response", root, &f, args),
            None => Ok(()),
        };
        let state = self.store.data_mut();
        state.http_call_response = None;
        state.root_status.1.clear();
        result?;
        self.after_root_callback()?;
        Ok(record)
    }

    /// Answers every pending callout (and those their callbacks dispatch), in dispatch order.
    pub fn deliver_all_callouts(&mut self) -> Result<Vec<CalloutRecord>> {
        let mut records = Vec::new();
        while let Some(token) = self.store.data().callouts.first().map(|c| c.request.token) {
            records.push(self.deliver_callout(token)?);
        }
        Ok(records)
    }

    /// After a root-context callback: what it asked of streams through
    /// `proxy_set_effective_context` (a local reply, a resume, a reset) is carried out, as Envoy
    /// runs its deferred after-VM-call actions.
    pub(super) fn after_root_callback(&mut self) -> Result<()> {
        let live: Vec<u32> = self
            .store
            .data()
            .streams
            .iter()
            .filter(|(_, s)| s.phase != Phase::Done)
            .map(|(c, _)| *c)
            .collect();
        for context in live {
            self.after_any_callback(context)?;
        }
        Ok(())
    }

    /// Calls the filter's `idemgate_conformance` export with one vector case (JSON text) and
    /// returns its answer (JSON text).
    pub fn conformance(&mut self, case: &str) -> Result<String> {
        let func = self
            .exports
            .conformance
            .clone()
            .ok_or_else(|| interface("the filter does not export idemgate_conformance"))?;
        let allocate = self.exports.allocate.clone();
        let len = case.len() as i32;
        let ptr = self.call("proxy_on_memory_allocate", 0, &allocate, len)?;
        let memory = self.exports.memory;
        memory
            .write(&mut self.store, ptr as u32 as usize, case.as_bytes())
            .map_err(|e| interface(format!("cannot write the case into guest memory: {e}")))?;
        let packed = self.call("idemgate_conformance", 0, &func, (ptr, len))? as u64;
        let (out_ptr, out_len) = ((packed >> 32) as usize, (packed & 0xffff_ffff) as usize);
        let data = memory.data(&self.store);
        let bytes = out_ptr
            .checked_add(out_len)
            .and_then(|end| data.get(out_ptr..end))
            .ok_or_else(|| interface("idemgate_conformance returned a range outside memory"))?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| interface("idemgate_conformance returned non-UTF-8"))
    }
}

/// A profiling copy's allocation hook (`crate::profile`): records the guest stack of each
/// allocation. Modules without the hook's table are left alone.
fn install_alloc_hook(
    instance: &wasmtime::Instance,
    store: &mut Store<VmState>,
) -> wasmtime::Result<()> {
    let Some(table) = instance.get_table(&mut *store, crate::profile::ALLOC_HOOK) else {
        return Ok(());
    };
    let hook = wasmtime::Func::wrap(&mut *store, |caller: wasmtime::Caller<'_, VmState>| {
        let trace = wasmtime::WasmBacktrace::force_capture(&caller);
        let frames = trace
            .frames()
            .iter()
            .map(|frame| match frame.func_name() {
                Some(name) => format!("{:#}", rustc_demangle::demangle(name)),
                None => format!("function[{}]", frame.func_index()),
            })
            .collect();
        caller.data().world.record_alloc(frames);
    });
    table.set(&mut *store, 0, wasmtime::Ref::Func(Some(hook)))
}

/// The counters of a module instrumented by [`crate::profile::instrument`], by function index.
fn profile_counters(
    instance: &wasmtime::Instance,
    store: &mut Store<VmState>,
) -> Vec<(usize, wasmtime::Global)> {
    let names: Vec<(usize, String)> = instance
        .exports(&mut *store)
        .filter_map(|export| {
            let name = export.name();
            let index = name.strip_prefix(crate::profile::COUNTER_PREFIX)?;
            Some((index.parse().ok()?, name.to_string()))
        })
        .collect();
    names
        .into_iter()
        .filter_map(|(index, name)| Some((index, instance.get_global(&mut *store, &name)?)))
        .collect()
}
