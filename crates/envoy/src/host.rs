//! The few host calls the filter makes, each turning a host failure into `None` (a failed host
//! call must never become a panic: that would kill the worker's VM), and never into an empty value
//! the caller would take for what the host holds.

use crate::abi::{self, BufferType, Headers, LogLevel, MapType};
#[allow(unused_imports)]
use crate::prelude::*;
use idemgate_core::answer::HttpAnswer;
use idemgate_core::time::UnixMillis;

pub fn request_header(name: &str) -> Option<String> {
    abi::header_value(MapType::HttpRequestHeaders, name)
        .ok()
        .flatten()
        .and_then(|v| String::from_utf8(v).ok())
}

pub fn response_header(name: &str) -> Option<String> {
    abi::header_value(MapType::HttpResponseHeaders, name)
        .ok()
        .flatten()
        .and_then(|v| String::from_utf8(v).ok())
}

/// Removes a request header; `false` if the host refused.
pub fn remove_request_header(name: &str) -> bool {
    abi::remove_header(MapType::HttpRequestHeaders, name).is_ok()
}

/// The number of upstream attempts the router made for this stream (a route's retry policy
/// makes several). Envoy has no value until the router made an attempt, so absence is 0; a value
/// that is not a little-endian u64 is unknown (`None`).
pub fn upstream_attempts() -> Option<u64> {
    match property(&["upstream", "request_attempt_count"]) {
        None => Some(0),
        Some(bytes) => <[u8; 8]>::try_from(bytes.as_slice())
            .ok()
            .map(u64::from_le_bytes),
    }
}

/// A whole header map; `None` when the host could not hand it over (never read as a
/// map without headers — a request would lose its key and be forwarded unguarded).
pub fn headers(map: MapType) -> Option<Headers> {
    logged(
        abi::header_map(map).ok(),
        "the host could not hand over a header map",
    )
}

pub fn property(path: &[&str]) -> Option<Vec<u8>> {
    abi::property(path).ok().flatten()
}

/// A property's value, `Some(None)` when the host has none; `None` when the read itself failed
/// (a failing call is not an absent property: no silent fallback).
pub fn property_read(path: &[&str]) -> Option<Option<Vec<u8>>> {
    logged(
        abi::property(path).ok(),
        "the host could not hand over a property",
    )
}

pub fn property_text(path: &[&str]) -> Option<String> {
    property(path).and_then(|bytes| String::from_utf8(bytes).ok())
}

/// The first `size` bytes of a body buffer; `None` when the host could not hand over all of them
/// (a short read fingerprinted, stored or relayed would be a body nobody sent).
pub fn body(buffer: BufferType, size: usize) -> Option<Vec<u8>> {
    if size == 0 {
        return Some(Vec::new());
    }
    let bytes = abi::buffer(buffer, 0, size)
        .ok()
        .filter(|bytes| bytes.len() == size);
    logged(bytes, "the host could not hand over a body whole")
}

/// `value`, with `failure` logged as an error when it is `None`: the caller refuses or keeps
/// what it holds, and the log says why.
fn logged<T>(value: Option<T>, failure: &str) -> Option<T> {
    if value.is_none() {
        log(LogLevel::Error, failure);
    }
    value
}

/// The plugin's configuration text (empty if the host gave none; `None` if it is not UTF-8).
pub fn plugin_configuration() -> Option<String> {
    let bytes = abi::buffer(BufferType::PluginConfiguration, 0, usize::MAX).unwrap_or_default();
    String::from_utf8(bytes).ok()
}

/// Sends an answer the core made, verbatim.
pub fn send(answer: &HttpAnswer) {
    send_with_details(answer, "");
}

/// Sends an answer with `details` as its `response.code_details` (e.g. for a relayed answer).
pub fn send_with_details(answer: &HttpAnswer, details: &str) {
    let headers: Vec<(&str, &[u8])> = answer
        .headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_bytes()))
        .collect();
    if let Err(status) = abi::send_local_response(answer.status, details, &headers, &answer.body) {
        log(
            LogLevel::Error,
            &format!("could not send the local reply: status {}", status.0),
        );
    }
}

/// The time now, read from the host once per callback (see [`crate::clock`]).
/// `None` when the host cannot say: the epoch instead would make every record look
/// decades old or brand new, so callers refuse or keep what they hold rather than guess.
pub fn now() -> Option<UnixMillis> {
    crate::clock::callback_now(|| {
        let now = abi::current_time_nanos()
            .ok()
            .map(|n| UnixMillis(n / 1_000_000));
        if now.is_none() {
            log(LogLevel::Error, "the host's clock could not be read");
        }
        now
    })
}

pub fn log(level: LogLevel, message: &str) {
    abi::log(level, message);
}

/// Whether the host logs debug lines for this plugin now (checked so the filter formats no debug
/// line nobody reads).
pub fn debug_enabled() -> bool {
    matches!(abi::log_level(), Ok(LogLevel::Trace | LogLevel::Debug))
}
