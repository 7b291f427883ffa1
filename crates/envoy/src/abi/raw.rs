//! The proxy-wasm 0.2.1 imports, as the host provides them (only in the `.wasm`: natively every
//! call in [`super`] answers `NO_HOST`), and taking over the buffers the host hands back.
#![allow(unsafe_code)]

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
    pub fn proxy_define_metric(kind: u32, name: *const u8, name_size: usize, id: *mut u32) -> u32;
    pub fn proxy_increment_metric(id: u32, offset: i64) -> u32;
    pub fn proxy_register_shared_queue(name: *const u8, name_size: usize, id: *mut u32) -> u32;
    pub fn proxy_enqueue_shared_queue(id: u32, value: *const u8, value_size: usize) -> u32;
    pub fn proxy_dequeue_shared_queue(id: u32, data: *mut *mut u8, size: *mut usize) -> u32;
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
