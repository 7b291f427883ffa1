//! The host side of one HTTP stream on one worker: what the filter can see and change through
//! header, body and property calls, what it asked for (local reply, resume), and what reached the
//! upstream and the client.

use super::headers::HeaderMap;
use std::collections::BTreeMap;

/// The property `upstream.request_attempt_count`: how many upstream attempts the router made for
/// the stream (its retry policy's tries). Envoy serves `attemptCount().value_or(0)` as a CEL
/// uint, which proxy-wasm hands over as 8 little-endian bytes; 0 until the router starts (a
/// reply made before it — no healthy upstream, a later filter's — has 0).
pub const ATTEMPT_COUNT: &str = "upstream.request_attempt_count";

/// A count as Envoy serializes a uint property.
pub fn uint_property(value: u64) -> Vec<u8> {
    value.to_le_bytes().to_vec()
}

/// A reply the filter asked Envoy to send (`proxy_send_local_response`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalReply {
    pub status: u16,
    pub details: String,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

/// What the upstream received for this stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Forwarded {
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    /// The whole request (end of stream) went upstream.
    pub complete: bool,
}

/// What the client received.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientAnswer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    /// The stream ended normally (end of stream reached); false when it was reset midway.
    pub complete: bool,
    /// Made by the proxy (the filter's local reply or Envoy's own error), not by the upstream.
    pub local: bool,
}

impl ClientAnswer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get_str(name)
    }

    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Where a stream is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The request is being received (headers and body callbacks).
    Request,
    /// The response is being sent (response callbacks).
    Response,
    /// Logged and deleted.
    Done,
}

#[derive(Debug, Clone)]
pub struct StreamState {
    pub phase: Phase,
    pub request_headers: Option<HeaderMap>,
    pub request_trailers: Option<HeaderMap>,
    pub response_headers: Option<HeaderMap>,
    pub response_trailers: Option<HeaderMap>,
    /// The request body buffer the filter sees: data received and not yet passed on.
    pub request_body: Vec<u8>,
    pub response_body: Vec<u8>,
    pub request_ended: bool,
    pub response_ended: bool,
    /// The filter stopped the request (headers or body) and has not let it go on yet.
    pub request_paused: bool,
    pub response_paused: bool,
    /// Envoy's stream-level properties (`request.*`, `source.address`, `response.code_details`…).
    pub properties: BTreeMap<String, Vec<u8>>,
    pub local_reply: Option<LocalReply>,
    /// A local reply already went out (a second one is ignored, as in Envoy).
    pub local_reply_sent: bool,
    pub continue_request: bool,
    pub continue_response: bool,
    /// Set by `proxy_close_stream`.
    pub reset_requested: bool,
    pub forwarded: Option<Forwarded>,
    /// The upstream was contacted (see [`crate::envoy::Chain`] for when that happens).
    pub upstream_started: bool,
    pub answer: Option<ClientAnswer>,
    /// Response headers the filter let through (the client has them).
    pub response_headers_sent: bool,
    /// `proxy_on_delete` ran: the context no longer exists for the filter (the harness keeps the
    /// state so the test can read what happened).
    pub deleted: bool,
}

impl StreamState {
    pub fn new(mut properties: BTreeMap<String, Vec<u8>>) -> Self {
        properties
            .entry(ATTEMPT_COUNT.to_string())
            .or_insert_with(|| uint_property(0));
        StreamState {
            phase: Phase::Request,
            request_headers: None,
            request_trailers: None,
            response_headers: None,
            response_trailers: None,
            request_body: Vec::new(),
            response_body: Vec::new(),
            request_ended: false,
            response_ended: false,
            request_paused: false,
            response_paused: false,
            properties,
            local_reply: None,
            local_reply_sent: false,
            continue_request: false,
            continue_response: false,
            reset_requested: false,
            forwarded: None,
            upstream_started: false,
            answer: None,
            response_headers_sent: false,
            deleted: false,
        }
    }
}
