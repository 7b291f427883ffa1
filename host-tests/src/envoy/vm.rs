//! The state of one filter VM (one Envoy worker), kept in wasmtime's `Store<VmState>`: its
//! contexts and streams, its configuration, its metric ids, and the hook through which the
//! interleaving explorer pauses it before every shared-data call.

use super::callouts::{CalloutRequest, PendingCallout};
use super::headers::HeaderMap;
use super::stream::StreamState;
use super::world::World;
use crate::abi::Status;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Called before every shared-data call with the worker and a description of the call; the
/// interleaving explorer blocks here until it is this worker's turn.
pub type Gate = Arc<dyn Fn(usize, &str) + Send + Sync>;

/// What sits between the filter and the upstream in the filter chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Chain {
    /// `envoy.filters.http.buffer` after the filter (as the shipped `envoy.yaml` has it): the
    /// upstream is contacted only once the whole request has passed the filter.
    #[default]
    BufferAfter,
    /// The router right after the filter: the upstream is contacted as soon as the headers pass.
    Streaming,
}

/// The answer of an HTTP callout, while `proxy_on_http_call_response` runs (Envoy keeps it on the
/// root context and drops it when the callback returns).
#[derive(Debug, Clone, Default)]
pub struct HttpCallResponse {
    pub headers: super::headers::HeaderMap,
    pub body: Vec<u8>,
    pub trailers: super::headers::HeaderMap,
}

pub struct VmState {
    pub worker: usize,
    pub world: World,
    pub plugin_config: Vec<u8>,
    pub vm_config: Vec<u8>,
    /// Environment variables the VM sees (Envoy's `environment_variables`).
    pub env: Vec<(String, String)>,
    pub root_context: u32,
    pub tick_period_ms: u32,
    pub streams: BTreeMap<u32, StreamState>,
    /// The context whose callback is running.
    pub current: u32,
    /// Set by `proxy_set_effective_context` during the current callback.
    pub effective: Option<u32>,
    /// Metric names by id (id = index + 1).
    pub metric_ids: Vec<String>,
    pub gate: Option<Gate>,
    /// Callouts dispatched and not answered yet, in dispatch order.
    pub callouts: Vec<PendingCallout>,
    /// The last callout token handed out (tokens go 4, 8, 12, … per VM).
    pub last_callout_token: u32,
    pub http_call_response: Option<HttpCallResponse>,
    /// What `proxy_get_status` answers (the root context's status code and message).
    pub root_status: (u32, String),
    /// Envoy node/listener properties every stream sees (e.g. `plugin_root_id`).
    pub node_properties: BTreeMap<String, Vec<u8>>,
    /// Log level reported by `proxy_get_log_level`.
    pub log_level: u32,
    pub chain: Chain,
    /// Host calls the guest made so far (counted by the import wrappers).
    pub host_calls: u64,
    /// The real host function behind each import (indexed like the module's imports).
    pub imports: Vec<Option<wasmtime::Func>>,
    /// Calls per import since the last callback was recorded, and the imports' names.
    pub import_calls: Vec<u64>,
    pub import_names: std::sync::Arc<Vec<String>>,
    /// The filter's memory and allocator, for host functions called through the counting
    /// wrappers (their `Caller` is the host, which has no exports).
    pub guest_memory: Option<wasmtime::Memory>,
    pub guest_allocate: Option<wasmtime::Func>,
    /// When set, every host call as (import index, fuel left): where a callback's operators go.
    pub trace: Option<Vec<(usize, u64)>>,
}

impl VmState {
    pub fn new(worker: usize, world: World) -> Self {
        VmState {
            worker,
            world,
            plugin_config: Vec::new(),
            vm_config: Vec::new(),
            env: Vec::new(),
            root_context: 1,
            tick_period_ms: 0,
            streams: BTreeMap::new(),
            current: 0,
            effective: None,
            metric_ids: Vec::new(),
            gate: None,
            callouts: Vec::new(),
            last_callout_token: 0,
            http_call_response: None,
            root_status: (0, String::new()),
            node_properties: BTreeMap::new(),
            log_level: 0,
            chain: Chain::default(),
            host_calls: 0,
            imports: Vec::new(),
            import_calls: Vec::new(),
            import_names: std::sync::Arc::default(),
            guest_memory: None,
            guest_allocate: None,
            trace: None,
        }
    }

    /// A state for link-time checks only.
    pub fn detached() -> Self {
        VmState::new(usize::MAX, World::new(0))
    }

    /// The context host calls act on.
    pub fn context(&self) -> u32 {
        self.effective.unwrap_or(self.current)
    }

    /// The stream of the context host calls act on, if that context is a stream.
    pub fn stream(&self) -> Option<&StreamState> {
        self.streams.get(&self.context())
    }

    pub fn stream_mut(&mut self) -> Option<&mut StreamState> {
        let context = self.context();
        self.streams.get_mut(&context)
    }

    /// `proxy_http_call`, as Envoy checks and starts it (see [`super::callouts`]): the token, or the
    /// status the call answers.
    pub fn dispatch_callout(
        &mut self,
        cluster: String,
        headers: HeaderMap,
        body: Vec<u8>,
        trailers: HeaderMap,
        timeout_ms: i32,
    ) -> Result<u32, Status> {
        let Ok(timeout_ms) = u32::try_from(timeout_ms) else {
            return Err(Status::BadArgument);
        };
        if self.world.cluster(&cluster).is_none() {
            return Err(Status::BadArgument);
        }
        if [":path", ":method", ":authority"]
            .iter()
            .any(|name| headers.get(name).is_none())
        {
            return Err(Status::BadArgument);
        }
        let fault = self.world.faults().take_callout(&cluster);
        self.last_callout_token = self.last_callout_token.wrapping_add(4);
        let token = self.last_callout_token;
        if fault == Some(super::callouts::CalloutFault::DispatchFails) {
            return Err(Status::InternalFailure);
        }
        let request = CalloutRequest {
            worker: self.worker,
            token,
            cluster,
            headers,
            body,
            trailers,
            timeout_ms,
            sent_at_ms: self.world.clock().now_ms(),
            writes_before: self.world.shared_data().log().len(),
        };
        self.callouts.push(PendingCallout {
            request,
            fault,
            from_context: self.context(),
        });
        Ok(token)
    }

    /// Passes the explorer's gate, if any.
    pub fn pass_gate(&self, what: &str) {
        if let Some(gate) = &self.gate {
            gate(self.worker, what);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envoy::callouts::{Answer, Outcome};

    fn state() -> VmState {
        let world = World::new(1);
        world.add_cluster(
            "upstream",
            Arc::new(|_: &CalloutRequest| Outcome::Answer(Answer::new(200))),
        );
        VmState::new(0, world)
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        HeaderMap::from_pairs(pairs.iter().map(|(n, v)| (*n, v.as_bytes())))
    }

    #[test]
    fn dispatch_checks_what_envoy_checks() {
        let full = headers(&[(":method", "POST"), (":path", "/"), (":authority", "a")]);
        let mut vm = state();
        let call = |vm: &mut VmState, cluster: &str, h: &HeaderMap, timeout: i32| {
            vm.dispatch_callout(
                cluster.into(),
                h.clone(),
                Vec::new(),
                HeaderMap::new(),
                timeout,
            )
        };
        assert_eq!(
            call(&mut vm, "upstream", &full, -1),
            Err(Status::BadArgument)
        );
        assert_eq!(
            call(&mut vm, "elsewhere", &full, 100),
            Err(Status::BadArgument)
        );
        for missing in [":method", ":path", ":authority"] {
            let mut partial = full.clone();
            partial.remove(missing);
            assert_eq!(
                call(&mut vm, "upstream", &partial, 100),
                Err(Status::BadArgument),
                "{missing}"
            );
        }
        assert!(vm.callouts.is_empty());
        assert_eq!(call(&mut vm, "upstream", &full, 0), Ok(4));
        assert_eq!(call(&mut vm, "upstream", &full, 100), Ok(8));
        assert_eq!(vm.callouts.len(), 2);
        assert_eq!(vm.callouts[0].request.timeout_ms, 0, "0: no timeout");
    }
}
