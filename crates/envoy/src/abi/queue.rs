//! Envoy's shared queues: a VM registers a queue under a name and is called
//! (`proxy_on_queue_ready`) on its own thread when another VM — another worker — enqueues to it.
//! A queue's id is good in every VM of the process, so a VM can enqueue by id without resolving
//! the name.
#![allow(unsafe_code)]

#[cfg(target_arch = "wasm32")]
use super::raw;
use super::Status;
#[allow(unused_imports)]
use crate::prelude::*;

/// What `proxy_dequeue_shared_queue` answers for a queue with nothing in it.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
const EMPTY: Status = Status(7);

/// Registers this VM's queue `name` (its root context is called when something is enqueued);
/// its id.
pub fn register_queue(name: &str) -> Result<u32, Status> {
    #[cfg(target_arch = "wasm32")]
    {
        let mut id = 0u32;
        // SAFETY: the name is a live borrow and the id a live local.
        super::status(unsafe {
            raw::proxy_register_shared_queue(name.as_ptr(), name.len(), &mut id)
        })?;
        Ok(id)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = name;
        Err(Status::NO_HOST)
    }
}

/// Enqueues `value` to queue `id` (any VM's).
pub fn enqueue(id: u32, value: &[u8]) -> Result<(), Status> {
    #[cfg(target_arch = "wasm32")]
    // SAFETY: the value is a live borrow; the host copies it.
    return super::status(unsafe {
        raw::proxy_enqueue_shared_queue(id, value.as_ptr(), value.len())
    });
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = (id, value);
        Err(Status::NO_HOST)
    }
}

/// The next item of this VM's queue `id`; `Ok(None)` once it is empty.
pub fn dequeue(id: u32) -> Result<Option<Vec<u8>>, Status> {
    #[cfg(target_arch = "wasm32")]
    {
        let mut data: *mut u8 = core::ptr::null_mut();
        let mut size = 0usize;
        // SAFETY: pointers to live locals; on success the host hands over a buffer it allocated.
        let code = unsafe { raw::proxy_dequeue_shared_queue(id, &mut data, &mut size) };
        match Status(code) {
            Status::OK => Ok(Some(unsafe { raw::take(data, size) })),
            EMPTY | Status::NOT_FOUND => Ok(None),
            other => Err(other),
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = (id, EMPTY);
        Err(Status::NO_HOST)
    }
}
