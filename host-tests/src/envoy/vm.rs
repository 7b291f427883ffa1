//! The state of one filter VM (one Envoy worker), kept in wasmtime's `Store<VmState>`: its
//! contexts and streams, its configuration, its metric ids, and the hook through which the
//! interleaving explorer pauses it before every shared-data call.

use super::stream::StreamState;
use super::world::World;
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

/// The response of an outgoing `proxy_http_call`, while `proxy_on_http_call_response` runs.
#[derive(Debug, Clone, Default)]
pub struct HttpCallResponse {
    pub headers: super::headers::HeaderMap,
    pub body: Vec<u8>,
    pub trailers: super::headers::HeaderMap,
}

/// An outgoing `proxy_http_call` the filter made.
#[derive(Debug, Clone)]
pub struct HttpCall {
    pub token: u32,
    pub context: u32,
    pub upstream: String,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
    pub timeout_ms: u32,
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
    pub http_calls: Vec<HttpCall>,
    pub http_call_response: Option<HttpCallResponse>,
    /// Envoy node/listener properties every stream sees (e.g. `plugin_root_id`).
    pub node_properties: BTreeMap<String, Vec<u8>>,
    /// Log level reported by `proxy_get_log_level`.
    pub log_level: u32,
    pub chain: Chain,
    /// Host calls the guest made so far (counted by a wasmtime call hook).
    pub host_calls: u64,
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
            http_calls: Vec::new(),
            http_call_response: None,
            node_properties: BTreeMap::new(),
            log_level: 0,
            chain: Chain::default(),
            host_calls: 0,
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

    /// Passes the explorer's gate, if any.
    pub fn pass_gate(&self, what: &str) {
        if let Some(gate) = &self.gate {
            gate(self.worker, what);
        }
    }
}
