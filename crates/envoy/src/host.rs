//! The few host calls the filter makes, each turning a host failure into `None` (a failed host call
//! must never become a panic: that would kill the worker's VM).

use idemgate_core::answer::HttpAnswer;
use idemgate_core::time::UnixMillis;
use proxy_wasm::hostcalls;
use proxy_wasm::types::{BufferType, LogLevel, MapType};

pub fn request_header(name: &str) -> Option<String> {
    hostcalls::get_map_value(MapType::HttpRequestHeaders, name)
        .ok()
        .flatten()
}

pub fn response_header(name: &str) -> Option<String> {
    hostcalls::get_map_value(MapType::HttpResponseHeaders, name)
        .ok()
        .flatten()
}

pub fn headers(map: MapType) -> Vec<(String, Vec<u8>)> {
    hostcalls::get_map_bytes(map).unwrap_or_default()
}

pub fn property(path: &[&str]) -> Option<Vec<u8>> {
    hostcalls::get_property(path.to_vec()).ok().flatten()
}

pub fn property_text(path: &[&str]) -> Option<String> {
    property(path).and_then(|bytes| String::from_utf8(bytes).ok())
}

pub fn body(buffer: BufferType, size: usize) -> Vec<u8> {
    if size == 0 {
        return Vec::new();
    }
    hostcalls::get_buffer(buffer, 0, size)
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Sends an answer the core made, verbatim.
pub fn send(answer: &HttpAnswer) {
    let headers: Vec<(&str, &str)> = answer
        .headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    if let Err(status) =
        hostcalls::send_http_response(u32::from(answer.status), headers, Some(&answer.body))
    {
        log(
            LogLevel::Error,
            &format!("could not send the local reply: {status:?}"),
        );
    }
}

pub fn now() -> UnixMillis {
    let millis = hostcalls::get_current_time()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    UnixMillis(millis)
}

pub fn log(level: LogLevel, message: &str) {
    let _ = hostcalls::log(level, message);
}

/// Whether the host logs debug lines for this plugin now (checked so the filter formats no debug
/// line nobody reads).
pub fn debug_enabled() -> bool {
    matches!(
        hostcalls::get_log_level(),
        Ok(LogLevel::Trace | LogLevel::Debug)
    )
}
