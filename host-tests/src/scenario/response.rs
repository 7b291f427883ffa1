//! What the upstream does with a forwarded request, as the test scripts it: answer (status,
//! headers, body in chunks, possibly cut off), or fail the way Envoy reports upstream failures.

use crate::envoy::{Answer, HeaderMap, Outcome};
use std::time::Duration;

/// An upstream answer.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
    pub splits: Vec<usize>,
    /// The answer starts after this much simulated time.
    pub delay: Duration,
    /// The upstream resets the stream after this many body bytes (a truncated body).
    pub cut_after: Option<usize>,
}

impl Response {
    pub fn new(status: u16) -> Self {
        Response {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            splits: Vec::new(),
            delay: Duration::ZERO,
            cut_after: None,
        }
    }

    pub fn header(mut self, name: &str, value: impl AsRef<[u8]>) -> Self {
        self.headers
            .push((name.to_ascii_lowercase(), value.as_ref().to_vec()));
        self
    }

    pub fn json(self, body: &str) -> Self {
        self.header("content-type", "application/json").body(body)
    }

    pub fn body(mut self, body: impl AsRef<[u8]>) -> Self {
        self.body = body.as_ref().to_vec();
        self
    }

    pub fn chunked_at(mut self, offsets: &[usize]) -> Self {
        let mut offsets: Vec<usize> = offsets
            .iter()
            .copied()
            .filter(|o| *o > 0 && *o < self.body.len())
            .collect();
        offsets.sort_unstable();
        offsets.dedup();
        self.splits = offsets;
        self
    }

    /// The upstream takes this long to answer (the clock moves before the answer arrives).
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// The connection is reset after `bytes` of the body went out: the client never gets the end.
    pub fn cut_off_after(mut self, bytes: usize) -> Self {
        self.cut_after = Some(bytes);
        self
    }

    pub fn header_map(&self) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in &self.headers {
            map.add(name, value);
        }
        if self.cut_after.is_none() && !self.headers.iter().any(|(n, _)| n == "content-length") {
            map.add("content-length", self.body.len().to_string().as_bytes());
        }
        map
    }

    /// This answer as a callout's upstream gives it (a cut-off body is a reset after the response
    /// started: a failure for the filter).
    pub fn outcome(&self) -> Outcome {
        if self.cut_after.is_some() {
            return Outcome::ResetAfterHeaders;
        }
        Outcome::Answer(Answer {
            status: self.status,
            headers: self.headers.clone(),
            body: self.body.clone(),
            trailers: Vec::new(),
            delay: self.delay,
        })
    }

    /// The body chunks to deliver (up to the cut, if any).
    pub fn chunks(&self) -> Vec<&[u8]> {
        let end = self
            .cut_after
            .unwrap_or(self.body.len())
            .min(self.body.len());
        let mut parts = Vec::new();
        let mut start = 0;
        for &split in self.splits.iter().filter(|s| **s < end) {
            parts.push(&self.body[start..split]);
            start = split;
        }
        if start < end {
            parts.push(&self.body[start..end]);
        }
        parts
    }
}

/// Upstream failures, as Envoy reports them to the filter chain (status, `response.code_details`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The connection could not be made: the request never reached the upstream.
    ConnectionFailure,
    /// No healthy host in the cluster: never reached.
    NoHealthyUpstream,
    /// The upstream reset the stream before answering: the outcome is in doubt.
    ResetBeforeResponse,
    /// The route timeout fired: in doubt.
    Timeout,
    /// The route's retry policy retried: the first attempt reached the upstream (it acted) and was
    /// reset, every later one could not connect; `attempts` in all (2 or more). Envoy's details
    /// are the last attempt's — a connection failure — and `upstream.request_attempt_count` says
    /// how many there were: in doubt.
    RetriedThenRefused { attempts: u32 },
}

impl Failure {
    /// Status, `response.code_details` and body of the reply Envoy makes itself.
    pub fn envoy_reply(self) -> (u16, &'static str, &'static str) {
        match self {
            Failure::ConnectionFailure => (
                503,
                "upstream_reset_before_response_started{connection_failure}",
                "upstream connect error or disconnect/reset before headers. reset reason: connection failure",
            ),
            Failure::NoHealthyUpstream => (503, "no_healthy_upstream", "no healthy upstream"),
            Failure::ResetBeforeResponse => (
                503,
                "upstream_reset_before_response_started{remote_reset}",
                "upstream connect error or disconnect/reset before headers. reset reason: remote reset",
            ),
            Failure::Timeout => (504, "response_timeout", "upstream request timeout"),
            Failure::RetriedThenRefused { .. } => (
                503,
                crate::envoy::reentry::REFUSED_DETAILS,
                crate::envoy::reentry::RETRIED_REFUSED_BODY,
            ),
        }
    }

    /// What `upstream.request_attempt_count` reads at the end: the router's attempts (0 when it
    /// found no host to try: it sends that reply before counting one).
    pub fn attempts(self) -> u64 {
        match self {
            Failure::NoHealthyUpstream => 0,
            Failure::ConnectionFailure | Failure::ResetBeforeResponse | Failure::Timeout => 1,
            Failure::RetriedThenRefused { attempts } => u64::from(attempts.max(2)),
        }
    }

    /// The upstream received the request and may have acted on it (on some attempt).
    pub fn may_have_reached(self) -> bool {
        !matches!(
            self,
            Failure::ConnectionFailure | Failure::NoHealthyUpstream
        )
    }
}
