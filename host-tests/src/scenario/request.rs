//! A client request as a test writes it: method, path, headers, a body that may arrive in chunks,
//! and the connection facts Envoy knows (peer address).

use crate::envoy::HeaderMap;
use std::collections::BTreeMap;

/// When the client goes away (Envoy resets the stream: the filter's context is logged, done and
/// deleted; its later callbacks never come).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abort {
    /// Once the headers went out.
    AfterHeaders,
    /// Once body chunk `n` (1-based) went out.
    AfterChunk(usize),
    /// Once the whole request went out, before any answer (the answer comes too late).
    AfterRequest,
}

#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
    /// Offsets at which the body is split into chunks (sorted; empty = one chunk).
    pub splits: Vec<usize>,
    pub peer: String,
    /// Extra stream properties (dotted path → bytes), e.g. a JWT claim in metadata.
    pub properties: BTreeMap<String, Vec<u8>>,
    /// The client goes away at this point (`None`: it waits for its answer).
    pub abort: Option<Abort>,
}

impl Request {
    pub fn new(method: &str, path: &str) -> Self {
        Request {
            method: method.to_string(),
            path: path.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
            splits: Vec::new(),
            peer: "10.0.0.7:51234".to_string(),
            properties: BTreeMap::new(),
            abort: None,
        }
    }

    pub fn post(path: &str) -> Self {
        Request::new("POST", path)
    }

    pub fn get(path: &str) -> Self {
        Request::new("GET", path)
    }

    pub fn header(mut self, name: &str, value: impl AsRef<[u8]>) -> Self {
        self.headers
            .push((name.to_ascii_lowercase(), value.as_ref().to_vec()));
        self
    }

    /// The `Idempotency-Key` header.
    pub fn key(self, key: &str) -> Self {
        self.header("idempotency-key", key)
    }

    /// A JSON body with its content type.
    pub fn json(self, body: &str) -> Self {
        self.header("content-type", "application/json").body(body)
    }

    pub fn body(mut self, body: impl AsRef<[u8]>) -> Self {
        self.body = body.as_ref().to_vec();
        self
    }

    /// Sends the body in chunks split at these offsets.
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

    /// Sends the body in chunks of `size` bytes.
    pub fn chunks_of(self, size: usize) -> Self {
        let offsets: Vec<usize> = (1..)
            .map(|i| i * size.max(1))
            .take_while(|o| *o < self.body.len())
            .collect();
        self.chunked_at(&offsets)
    }

    /// The client goes away at `when` (see [`Abort`]).
    pub fn abort_after(mut self, when: Abort) -> Self {
        self.abort = Some(when);
        self
    }

    pub fn peer(mut self, address: &str) -> Self {
        self.peer = address.to_string();
        self
    }

    pub fn property(mut self, path: &str, value: impl AsRef<[u8]>) -> Self {
        self.properties
            .insert(path.to_string(), value.as_ref().to_vec());
        self
    }

    /// The body's chunks, in order (one empty chunk for no body is not sent).
    pub fn chunks(&self) -> Vec<&[u8]> {
        let mut parts = Vec::new();
        let mut start = 0;
        for &split in &self.splits {
            parts.push(&self.body[start..split]);
            start = split;
        }
        if start < self.body.len() {
            parts.push(&self.body[start..]);
        }
        parts
    }

    /// The header map as Envoy's codec hands it to the filter chain.
    pub fn header_map(&self) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.add(":method", self.method.as_bytes());
        map.add(":path", self.path.as_bytes());
        map.add(":authority", b"shop.example");
        map.add(":scheme", b"https");
        for (name, value) in &self.headers {
            map.add(name, value);
        }
        if !self.body.is_empty() && !self.headers.iter().any(|(n, _)| n == "content-length") {
            map.add("content-length", self.body.len().to_string().as_bytes());
        }
        map
    }

    /// The stream properties Envoy exposes for this request.
    pub fn stream_properties(&self) -> BTreeMap<String, Vec<u8>> {
        let mut props = BTreeMap::new();
        let url_path = self.path.split('?').next().unwrap_or_default();
        props.insert("request.method".into(), self.method.as_bytes().to_vec());
        props.insert("request.path".into(), self.path.as_bytes().to_vec());
        props.insert("request.url_path".into(), url_path.as_bytes().to_vec());
        props.insert("request.host".into(), b"shop.example".to_vec());
        props.insert("request.scheme".into(), b"https".to_vec());
        props.insert("request.protocol".into(), b"HTTP/1.1".to_vec());
        props.insert("source.address".into(), self.peer.as_bytes().to_vec());
        props.insert("destination.address".into(), b"10.0.0.1:10000".to_vec());
        for (k, v) in &self.properties {
            props.insert(k.clone(), v.clone());
        }
        props
    }
}
