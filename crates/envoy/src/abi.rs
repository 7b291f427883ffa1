//! The proxy-wasm ABI (0.2.1), host side: the imports the filter calls, as functions that return
//! errors instead of panicking, and the (de)serialisation of header maps and property paths.
//!
//! Why the filter has its own ABI layer instead of the `proxy-wasm` crate (issue 12): in
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

/// A header map as the host gives it: names are lowercase text, values are bytes. It keeps the
/// host's buffer and, per pair, where its name and value are: reading a map costs two
/// allocations (the names, validated as text once, and the index) instead of two per header.
#[derive(Debug, Clone, Default)]
pub struct Headers {
    /// The serialised map as the host sent it; the values are slices of it.
    bytes: Vec<u8>,
    /// Every name, one after the other.
    names: String,
    /// Per pair: the end of its name in `names` (it starts where the previous one ended) and its
    /// value's range in `bytes`.
    pairs: Vec<(usize, usize, usize)>,
}

impl Headers {
    /// Each (name, value), in the host's order.
    pub fn iter(&self) -> HeaderIter<'_> {
        HeaderIter {
            headers: self,
            next: 0,
            name_start: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// A map of owned pairs (tests, and maps the filter builds itself): the values one after
    /// the other in `bytes`, indexed as a host's map is.
    pub fn from_pairs<'a>(pairs: impl Iterator<Item = (&'a str, &'a [u8])> + Clone) -> Headers {
        let mut headers = Headers::default();
        for (name, value) in pairs {
            headers.names.push_str(name);
            let start = headers.bytes.len();
            headers.bytes.extend_from_slice(value);
            let end = headers.bytes.len();
            headers.pairs.push((headers.names.len(), start, end));
        }
        headers
    }
}

/// The pairs of a [`Headers`], in order.
#[derive(Debug, Clone)]
pub struct HeaderIter<'a> {
    headers: &'a Headers,
    next: usize,
    name_start: usize,
}

impl<'a> Iterator for HeaderIter<'a> {
    type Item = (&'a str, &'a [u8]);

    // One copy of this, not one inlined into every loop over a map: the filter's size.
    #[inline(never)]
    fn next(&mut self) -> Option<Self::Item> {
        let &(name_end, start, end) = self.headers.pairs.get(self.next)?;
        self.next += 1;
        let name = self.headers.names.get(self.name_start..name_end)?;
        self.name_start = name_end;
        Some((name, self.headers.bytes.get(start..end)?))
    }
}

/// Serialises a header map: `u32` count, then (`u32` name length, `u32` value length) per pair,
/// then each name and value followed by a NUL byte.
pub fn serialize_map<'a>(pairs: impl Iterator<Item = (&'a str, &'a [u8])> + Clone) -> Vec<u8> {
    let count = pairs.clone().count();
    let size: usize = pairs
        .clone()
        .map(|(n, v)| n.len() + v.len() + 10)
        .sum::<usize>()
        + 4;
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&(count as u32).to_le_bytes());
    for (name, value) in pairs.clone() {
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    }
    for (name, value) in pairs {
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        out.extend_from_slice(value);
        out.push(0);
    }
    out
}

/// Reads a serialised header map (empty: a map with no headers, as Envoy hands over an absent
/// one); `None` for a malformed map, which a conforming host never sends — never a panic, and
/// never the pairs before the fault taken for the whole map (issue 22: a request read without its
/// key would go unguarded). Names that are not UTF-8 are skipped.
pub fn deserialize_map(bytes: Vec<u8>) -> Option<Headers> {
    if bytes.is_empty() {
        return Some(Headers::default());
    }
    let word = |at: usize| -> Option<usize> {
        let b = bytes.get(at..at.checked_add(4)?)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let count = word(0)?;
    let mut data = count.checked_mul(8).and_then(|n| n.checked_add(4))?;
    let mut names = String::with_capacity(bytes.len().saturating_sub(data));
    let mut pairs = Vec::with_capacity(count.min(bytes.len() / 10));
    for i in 0..count {
        let (Some(name_len), Some(value_len)) = (word(4 + i * 8), word(8 + i * 8)) else {
            return None;
        };
        let name_end = data.saturating_add(name_len);
        let value_start = name_end.saturating_add(1);
        let value_end = value_start.saturating_add(value_len);
        let (Some(name), Some(_)) = (bytes.get(data..name_end), bytes.get(value_start..value_end))
        else {
            return None;
        };
        if let Ok(name) = core::str::from_utf8(name) {
            names.push_str(name);
            pairs.push((names.len(), value_start, value_end));
        }
        data = value_end.saturating_add(1);
    }
    Some(Headers {
        bytes,
        names,
        pairs,
    })
}

/// A property path as the host wants it: the parts joined by NUL bytes.
pub fn serialize_path(path: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, part) in path.iter().enumerate() {
        if i > 0 {
            out.push(0);
        }
        out.extend_from_slice(part.as_bytes());
    }
    out
}

#[cfg(target_arch = "wasm32")]
mod raw {
    #[link(wasm_import_module = "env")]
    extern "C" {
        pub fn proxy_log(level: u32, message: *const u8, size: usize) -> u32;
        pub fn proxy_get_log_level(level: *mut u32) -> u32;
        pub fn proxy_get_current_time_nanoseconds(time: *mut u64) -> u32;
        pub fn proxy_set_tick_period_milliseconds(period: u32) -> u32;
        pub fn proxy_get_buffer_bytes(
            buffer: u32,
            start: usize,
            max: usize,
            data: *mut *mut u8,
            size: *mut usize,
        ) -> u32;
        pub fn proxy_get_header_map_pairs(map: u32, data: *mut *mut u8, size: *mut usize) -> u32;
        pub fn proxy_get_header_map_value(
            map: u32,
            key: *const u8,
            key_size: usize,
            data: *mut *mut u8,
            size: *mut usize,
        ) -> u32;
        pub fn proxy_remove_header_map_value(map: u32, key: *const u8, key_size: usize) -> u32;
        pub fn proxy_add_header_map_value(
            map: u32,
            key: *const u8,
            key_size: usize,
            value: *const u8,
            value_size: usize,
        ) -> u32;
        pub fn proxy_get_property(
            path: *const u8,
            path_size: usize,
            data: *mut *mut u8,
            size: *mut usize,
        ) -> u32;
        pub fn proxy_send_local_response(
            status: u32,
            details: *const u8,
            details_size: usize,
            body: *const u8,
            body_size: usize,
            headers: *const u8,
            headers_size: usize,
            grpc_status: i32,
        ) -> u32;
        pub fn proxy_http_call(
            upstream: *const u8,
            upstream_size: usize,
            headers: *const u8,
            headers_size: usize,
            body: *const u8,
            body_size: usize,
            trailers: *const u8,
            trailers_size: usize,
            timeout_ms: u32,
            token: *mut u32,
        ) -> u32;
        pub fn proxy_set_effective_context(context_id: u32) -> u32;
        pub fn proxy_continue_stream(stream_type: u32) -> u32;
        pub fn proxy_set_property(
            path: *const u8,
            path_size: usize,
            value: *const u8,
            value_size: usize,
        ) -> u32;
        pub fn proxy_define_metric(
            kind: u32,
            name: *const u8,
            name_size: usize,
            id: *mut u32,
        ) -> u32;
        pub fn proxy_increment_metric(id: u32, offset: i64) -> u32;
    }

    /// Takes ownership of a buffer the host allocated through `proxy_on_memory_allocate`.
    ///
    /// # Safety
    /// `data..data+size` must be such a buffer, returned by a host call that succeeded, and not
    /// taken before.
    pub unsafe fn take(data: *mut u8, size: usize) -> alloc::vec::Vec<u8> {
        if data.is_null() || size == 0 {
            return alloc::vec::Vec::new();
        }
        // SAFETY: `crate::dispatch::proxy_on_memory_allocate` made it a `Vec<u8>` of capacity
        // `size` (leaked); the host wrote `size` bytes into it.
        unsafe { alloc::vec::Vec::from_raw_parts(data, size, size) }
    }
}

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

/// Every pair of a header map (pseudo-headers included).
pub fn header_map(map: MapType) -> Result<Headers, Status> {
    #[cfg(target_arch = "wasm32")]
    {
        let mut data: *mut u8 = core::ptr::null_mut();
        let mut size = 0usize;
        // SAFETY: pointers to live locals; on success the host hands over a buffer it allocated.
        status(unsafe { raw::proxy_get_header_map_pairs(map as u32, &mut data, &mut size) })?;
        let bytes = unsafe { raw::take(data, size) };
        deserialize_map(bytes).ok_or(Status::PARSE_FAILURE)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = map;
        Err(Status::NO_HOST)
    }
}

/// One header's value; `Ok(None)` if absent.
pub fn header_value(map: MapType, name: &str) -> Result<Option<Vec<u8>>, Status> {
    #[cfg(target_arch = "wasm32")]
    {
        let mut data: *mut u8 = core::ptr::null_mut();
        let mut size = 0usize;
        // SAFETY: the name is a live borrow; pointers to live locals; on success the host hands
        // over a buffer it allocated.
        let code = unsafe {
            raw::proxy_get_header_map_value(
                map as u32,
                name.as_ptr(),
                name.len(),
                &mut data,
                &mut size,
            )
        };
        match Status(code) {
            Status::OK if data.is_null() => Ok(None),
            Status::OK => Ok(Some(unsafe { raw::take(data, size) })),
            Status::NOT_FOUND => Ok(None),
            other => Err(other),
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = (map, name);
        Err(Status::NO_HOST)
    }
}

/// Removes every value of one header (absent is no error).
pub fn remove_header(map: MapType, name: &str) -> Result<(), Status> {
    #[cfg(target_arch = "wasm32")]
    {
        // SAFETY: the name is a live borrow; the host only reads it.
        let code =
            unsafe { raw::proxy_remove_header_map_value(map as u32, name.as_ptr(), name.len()) };
        match Status(code) {
            Status::OK | Status::NOT_FOUND => Ok(()),
            other => Err(other),
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = (map, name);
        Err(Status::NO_HOST)
    }
}

/// Adds a header value (the ordering guard's `idemgate-order: applied` on an upstream answer).
pub fn add_header(map: MapType, name: &str, value: &str) -> Result<(), Status> {
    #[cfg(target_arch = "wasm32")]
    {
        // SAFETY: name and value are live borrows; the host only reads them.
        let code = unsafe {
            raw::proxy_add_header_map_value(
                map as u32,
                name.as_ptr(),
                name.len(),
                value.as_ptr(),
                value.len(),
            )
        };
        match Status(code) {
            Status::OK => Ok(()),
            other => Err(other),
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = (map, name, value);
        Err(Status::NO_HOST)
    }
}

/// A host property (`["response", "code_details"]`); `Ok(None)` if absent.
pub fn property(path: &[&str]) -> Result<Option<Vec<u8>>, Status> {
    let path = serialize_path(path);
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
    let path = serialize_path(path);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_round_trip() {
        let pairs: Vec<(&str, &[u8])> = vec![
            (":method", b"POST"),
            ("x-empty", b""),
            ("content-type", b"application/json"),
        ];
        let bytes = serialize_map(pairs.iter().copied());
        let back = deserialize_map(bytes).expect("well formed");
        assert_eq!(back.len(), 3);
        assert_eq!(back.iter().collect::<Vec<_>>(), pairs);
        let none = deserialize_map(serialize_map(core::iter::empty())).expect("well formed");
        assert!(none.is_empty());
    }

    #[test]
    fn malformed_maps_never_panic() {
        let good = serialize_map([("a", b"b".as_slice()), ("cc", b"dd".as_slice())].into_iter());
        // Cut anywhere before its last value ends, the map is malformed: never the pairs before
        // the cut (issue 22). (Only the last NUL missing loses nothing: still read whole.)
        for cut in 1..good.len() - 1 {
            assert!(
                deserialize_map(good[..cut].to_vec()).is_none(),
                "cut at {cut}"
            );
        }
        assert_eq!(deserialize_map(good.clone()).map(|h| h.len()), Some(2));
        // Nothing at all is how Envoy hands over an absent map: no headers.
        assert!(deserialize_map(Vec::new()).is_some_and(|h| h.is_empty()));
        assert!(deserialize_map(vec![0xff, 0xff, 0xff, 0xff]).is_none());
        let mut lying = good.clone();
        lying[4] = 200; // the first name claims 200 bytes
        assert!(deserialize_map(lying).is_none());
    }

    #[test]
    fn paths_are_nul_joined() {
        assert_eq!(
            serialize_path(&["response", "code_details"]),
            b"response\0code_details"
        );
        assert!(serialize_path(&[]).is_empty());
    }
}
