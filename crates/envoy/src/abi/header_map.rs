//! The header-map host calls: read a whole map or one value, remove or add a value. Each
//! returns the host's status as an error instead of panicking, like the rest of [`super`].
#![allow(unsafe_code)]

#[cfg(target_arch = "wasm32")]
use super::{deserialize_map, raw, status};
use super::{Headers, MapType, Status};
#[allow(unused_imports)]
use crate::prelude::*;

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

/// Adds a header value (the sequencer's `idemgate-order: applied` on an upstream answer).
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
