//! Envoy's shared-data host calls, without panics (written when the filter still used the SDK,
//! whose `hostcalls` panic on any status but Ok, NotFound and CasMismatch; a panic kills the
//! worker's VM). Every other status is an error value, which the store turns into the configured
//! failure mode. Raw imports, and taking ownership of the buffer the host allocated through the
//! filter's `proxy_on_memory_allocate` (`crate::dispatch`: a `Vec<u8>` of capacity `size`), like
//! the rest of the filter's own ABI layer (`crate::abi`).
#![allow(unsafe_code)]

#[allow(unused_imports)]
use crate::prelude::*;

#[cfg(target_arch = "wasm32")]
const OK: u32 = 0;
#[cfg(target_arch = "wasm32")]
const NOT_FOUND: u32 = 1;
#[cfg(target_arch = "wasm32")]
const CAS_MISMATCH: u32 = 8;

#[cfg(target_arch = "wasm32")]
#[link(wasm_import_module = "env")]
extern "C" {
    #[link_name = "proxy_get_shared_data"]
    fn raw_get_shared_data(
        key_data: *const u8,
        key_size: usize,
        return_value_data: *mut *mut u8,
        return_value_size: *mut usize,
        return_cas: *mut u32,
    ) -> u32;
    #[link_name = "proxy_set_shared_data"]
    fn raw_set_shared_data(
        key_data: *const u8,
        key_size: usize,
        value_data: *const u8,
        value_size: usize,
        cas: u32,
    ) -> u32;
}

/// `Ok(None)`: no such key; `Ok(Some((bytes, cas)))`; `Err(status)` for anything else.
#[cfg(target_arch = "wasm32")]
pub fn get(key: &str) -> Result<Option<(Vec<u8>, u32)>, u32> {
    let mut data: *mut u8 = core::ptr::null_mut();
    let mut size: usize = 0;
    let mut cas: u32 = 0;
    // SAFETY: the pointers are to live locals; the host writes a buffer it allocated through this
    // module's `proxy_on_memory_allocate` (a `Vec<u8>` of capacity `size`, leaked), which
    // `from_raw_parts` takes back exactly once.
    let status =
        unsafe { raw_get_shared_data(key.as_ptr(), key.len(), &mut data, &mut size, &mut cas) };
    match status {
        OK if data.is_null() || size == 0 => Ok(Some((Vec::new(), cas))),
        OK => Ok(Some((
            unsafe { Vec::from_raw_parts(data, size, size) },
            cas,
        ))),
        NOT_FOUND => Ok(None),
        other => Err(other),
    }
}

/// `Ok(true)` written, `Ok(false)` CAS mismatch, `Err(status)` for anything else.
#[cfg(target_arch = "wasm32")]
pub fn set(key: &str, value: &[u8], cas: u32) -> Result<bool, u32> {
    // SAFETY: both buffers are live borrows for the duration of the call; the host copies them.
    let status =
        unsafe { raw_set_shared_data(key.as_ptr(), key.len(), value.as_ptr(), value.len(), cas) };
    match status {
        OK => Ok(true),
        CAS_MISMATCH => Ok(false),
        other => Err(other),
    }
}

// Natively (unit tests) there is no host: the store is tested over a model of Envoy instead.
#[cfg(not(target_arch = "wasm32"))]
pub fn get(_key: &str) -> Result<Option<(Vec<u8>, u32)>, u32> {
    Err(u32::MAX)
}

#[cfg(not(target_arch = "wasm32"))]
pub fn set(_key: &str, _value: &[u8], _cas: u32) -> Result<bool, u32> {
    Err(u32::MAX)
}
