//! The proxy-wasm ABI (0.2.1), host side: the imports the filter calls, as functions that return
//! errors instead of panicking, and the (de)serialisation of header maps and property paths.
//!
//! Why the filter has its own ABI layer instead of the `proxy-wasm` crate: in
//! proxy-wasm-cpp-host an HTTP call made from a stream belongs to the *root* context, so its late
//! answer arrives as `proxy_on_http_call_response(root_context_id, token, ..)` — also after the
//! client has gone and the stream was deleted. The SDK routes that answer by token to the stream
//! that made the call and silently drops it when the stream is gone (and `expect`s every token),
//! which is exactly the case detached execution exists for. Owning the dispatch
//! ([`crate::dispatch`]) lets the root context own each pending callout ([`crate::callout`]).
//! It also drops the SDK's panicking host-call wrappers (a panic kills the worker's VM) and its
//! formatting code from the `.wasm`.
//!
//! Every function here is safe to call natively (unit tests): without a host it returns an error.
#![allow(unsafe_code)]

#[allow(unused_imports)]
use crate::prelude::*;
use core::time::Duration;

/// A host call's status (`proxy_status_t`); only `OK` counts as success here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status(pub u32);

impl Status {
    pub const OK: Status = Status(0);
    pub const NOT_FOUND: Status = Status(1);
    pub const BAD_ARGUMENT: Status = Status(2);
    /// Also what the filter answers itself for host data it cannot parse (a malformed map).
    pub const PARSE_FAILURE: Status = Status(4);
    /// What the native build (no host) answers to every call.
    pub const NO_HOST: Status = Status(u32::MAX);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum LogLevel {
    Trace = 0,
    Debug = 1,
    Info = 2,
    Warn = 3,
    Error = 4,
    Critical = 5,
}

/// What a stream callback tells the host. On headers `Pause` is `StopIteration`; on a body it is
/// `StopIterationAndBuffer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Action {
    Continue = 0,
    Pause = 1,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum BufferType {
    HttpRequestBody = 0,
    HttpResponseBody = 1,
    HttpCallResponseBody = 4,
    PluginConfiguration = 7,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum MapType {
    HttpRequestHeaders = 0,
    HttpResponseHeaders = 2,
    HttpCallResponseHeaders = 6,
}

mod header_map;
mod map;
mod queue;
#[cfg(target_arch = "wasm32")]
mod raw;
pub use header_map::{add_header, header_map, header_value, remove_header};
pub use map::{deserialize_map, serialize_map, with_path, HeaderIter, Headers};
pub use queue::{dequeue, enqueue, register_queue};

#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
fn status(code: u32) -> Result<(), Status> {
    if code == 0 {
        Ok(())
    } else {
        Err(Status(code))
    }
}

/// Logs a line at `level` under the plugin's name.
pub fn log(level: LogLevel, message: &str) {
    #[cfg(target_arch = "wasm32")]
    // SAFETY: the message is a live borrow; the host copies it.
    unsafe {
        raw::proxy_log(level as u32, message.as_ptr(), message.len());
    }
    #[cfg(not(target_arch = "wasm32"))]
    let _ = (level, message);
}

pub fn log_level() -> Result<LogLevel, Status> {
    #[cfg(target_arch = "wasm32")]
    {
        let mut level = 0u32;
        // SAFETY: a pointer to a live local.
        status(unsafe { raw::proxy_get_log_level(&mut level) })?;
        Ok(match level {
            0 => LogLevel::Trace,
            1 => LogLevel::Debug,
            2 => LogLevel::Info,
            3 => LogLevel::Warn,
            4 => LogLevel::Error,
            _ => LogLevel::Critical,
        })
    }
    #[cfg(not(target_arch = "wasm32"))]
    Err(Status::NO_HOST)
}

/// Wall-clock nanoseconds since the Unix epoch.
pub fn current_time_nanos() -> Result<u64, Status> {
    #[cfg(target_arch = "wasm32")]
    {
        let mut time = 0u64;
        // SAFETY: a pointer to a live local.
        status(unsafe { raw::proxy_get_current_time_nanoseconds(&mut time) })?;
        Ok(time)
    }
    #[cfg(not(target_arch = "wasm32"))]
    Err(Status::NO_HOST)
}

pub fn set_tick_period(period: Duration) -> Result<(), Status> {
    let millis = u32::try_from(period.as_millis()).unwrap_or(u32::MAX);
    #[cfg(target_arch = "wasm32")]
    // SAFETY: plain values.
    return status(unsafe { raw::proxy_set_tick_period_milliseconds(millis) });
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = millis;
        Err(Status::NO_HOST)
    }
}

/// Bytes `start..start+max` of a host buffer (fewer if it is shorter); empty if there is none.
pub fn buffer(kind: BufferType, start: usize, max: usize) -> Result<Vec<u8>, Status> {
    #[cfg(target_arch = "wasm32")]
    {
        let mut data: *mut u8 = core::ptr::null_mut();
        let mut size = 0usize;
        // SAFETY: pointers to live locals; on success the host hands over a buffer it allocated.
        let code =
            unsafe { raw::proxy_get_buffer_bytes(kind as u32, start, max, &mut data, &mut size) };
        match Status(code) {
            Status::OK => Ok(unsafe { raw::take(data, size) }),
            Status::NOT_FOUND => Ok(Vec::new()),
            other => Err(other),
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = (kind, start, max);
        Err(Status::NO_HOST)
    }
}

/// A host property (`["response", "code_details"]`); `Ok(None)` if absent.
pub fn property(path: &[&str]) -> Result<Option<Vec<u8>>, Status> {
    with_path(path, property_at)
}

/// [`property`] of a path already joined.
fn property_at(path: &[u8]) -> Result<Option<Vec<u8>>, Status> {
    #[cfg(target_arch = "wasm32")]
    {
        let mut data: *mut u8 = core::ptr::null_mut();
        let mut size = 0usize;
        // SAFETY: the path is a live borrow; pointers to live locals; on success the host hands
        // over a buffer it allocated.
        let code =
            unsafe { raw::proxy_get_property(path.as_ptr(), path.len(), &mut data, &mut size) };
        match Status(code) {
            Status::OK if data.is_null() => Ok(None),
            Status::OK => Ok(Some(unsafe { raw::take(data, size) })),
            Status::NOT_FOUND => Ok(None),
            other => Err(other),
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = path;
        Err(Status::NO_HOST)
    }
}

/// Answers the current (or effective) stream with a reply the filter made. Envoy sends it after
/// the current callback returns; it then runs through the stream's encoder filters, this one
/// included, with `response.code_details` = `details`.
pub fn send_local_response(
    status_code: u16,
    details: &str,
    headers: &[(&str, &[u8])],
    body: &[u8],
) -> Result<(), Status> {
    let headers = serialize_map(headers.iter().copied());
    #[cfg(target_arch = "wasm32")]
    // SAFETY: every buffer is a live borrow for the call; the host copies them.
    return status(unsafe {
        raw::proxy_send_local_response(
            u32::from(status_code),
            details.as_ptr(),
            details.len(),
            body.as_ptr(),
            body.len(),
            headers.as_ptr(),
            headers.len(),
            -1,
        )
    });
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = (status_code, details, headers, body);
        Err(Status::NO_HOST)
    }
}

/// Sends a request to an Envoy cluster on the root context's async client; the answer comes to
/// `proxy_on_http_call_response(root_context_id, token, ..)` whether or not the stream that asked
/// still exists. `headers` must hold `:method`, `:path` and `:authority`.
pub fn http_call(
    cluster: &str,
    headers: &[(&str, &[u8])],
    body: &[u8],
    timeout: Duration,
) -> Result<u32, Status> {
    let headers = serialize_map(headers.iter().copied());
    let trailers = serialize_map(core::iter::empty());
    let millis = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX);
    #[cfg(target_arch = "wasm32")]
    {
        let mut token = 0u32;
        // SAFETY: every buffer is a live borrow for the call (the host copies them); the token
        // pointer is a live local.
        status(unsafe {
            raw::proxy_http_call(
                cluster.as_ptr(),
                cluster.len(),
                headers.as_ptr(),
                headers.len(),
                body.as_ptr(),
                body.len(),
                trailers.as_ptr(),
                trailers.len(),
                millis,
                &mut token,
            )
        })?;
        Ok(token)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = (cluster, headers, body, trailers, millis);
        Err(Status::NO_HOST)
    }
}

/// Makes the following host calls act on `context_id` (a stream), e.g. to answer it from the root
/// context's callout callback. Fails if that context no longer exists.
pub fn set_effective_context(context_id: u32) -> Result<(), Status> {
    #[cfg(target_arch = "wasm32")]
    // SAFETY: a plain value.
    return status(unsafe { raw::proxy_set_effective_context(context_id) });
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = context_id;
        Err(Status::NO_HOST)
    }
}

/// Resumes the current stream's request (paused by a callback that returned [`Action::Pause`]),
/// e.g. once a remote store's claim answered. Call after [`set_effective_context`].
pub fn continue_request() -> Result<(), Status> {
    #[cfg(target_arch = "wasm32")]
    // SAFETY: a plain value (0: the request stream).
    return status(unsafe { raw::proxy_continue_stream(0) });
    #[cfg(not(target_arch = "wasm32"))]
    Err(Status::NO_HOST)
}

/// Sets a property of the current stream (Envoy keeps it as filter state `wasm.<path>`, which
/// access logs can print).
pub fn set_property(path: &[&str], value: &[u8]) -> Result<(), Status> {
    with_path(path, |path| set_property_at(path, value))
}

/// [`set_property`] of a path already joined.
fn set_property_at(path: &[u8], value: &[u8]) -> Result<(), Status> {
    #[cfg(target_arch = "wasm32")]
    // SAFETY: both are live borrows for the duration of the call; the host copies them.
    return status(unsafe {
        raw::proxy_set_property(path.as_ptr(), path.len(), value.as_ptr(), value.len())
    });
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = (path, value);
        Err(Status::NO_HOST)
    }
}

/// Defines a counter (the host returns the existing one for a name defined before).
pub fn define_counter(name: &str) -> Result<u32, Status> {
    #[cfg(target_arch = "wasm32")]
    {
        let mut id = 0u32;
        // SAFETY: the name is a live borrow; the id pointer a live local.
        status(unsafe { raw::proxy_define_metric(0, name.as_ptr(), name.len(), &mut id) })?;
        Ok(id)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = name;
        Err(Status::NO_HOST)
    }
}

pub fn increment_metric(id: u32, offset: i64) -> Result<(), Status> {
    #[cfg(target_arch = "wasm32")]
    // SAFETY: plain values.
    return status(unsafe { raw::proxy_increment_metric(id, offset) });
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = (id, offset);
        Err(Status::NO_HOST)
    }
}
