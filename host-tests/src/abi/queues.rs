//! `proxy_register_shared_queue`, `proxy_enqueue_shared_queue`, `proxy_dequeue_shared_queue` over
//! the world's [`crate::envoy::Queues`]: the filter registers a queue per worker where a route
//! waits for a request in flight, and enqueues a completed record's key to every worker's.

use super::memory::{copy_out, read, read_text, write_u32};
use super::{Status, ENV};
use crate::envoy::VmState;
use wasmtime::{Caller, Linker};

pub fn add(linker: &mut Linker<VmState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        ENV,
        "proxy_register_shared_queue",
        |mut caller: Caller<'_, VmState>, name_ptr: i32, name_len: i32, ret_id: i32| {
            let Some(name) = read_text(&mut caller, name_ptr, name_len) else {
                return Status::InvalidMemoryAccess.code();
            };
            let id = caller.data().world.queues().register(&name);
            if write_u32(&mut caller, ret_id, id) {
                Status::Ok.code()
            } else {
                Status::InvalidMemoryAccess.code()
            }
        },
    )?;
    linker.func_wrap(
        ENV,
        "proxy_enqueue_shared_queue",
        |mut caller: Caller<'_, VmState>, id: i32, value_ptr: i32, value_len: i32| {
            let Some(value) = read(&mut caller, value_ptr, value_len) else {
                return Status::InvalidMemoryAccess.code();
            };
            if caller.data().world.queues().enqueue(id as u32, value) {
                Status::Ok.code()
            } else {
                Status::NotFound.code()
            }
        },
    )?;
    linker.func_wrap(
        ENV,
        "proxy_dequeue_shared_queue",
        |mut caller: Caller<'_, VmState>, id: i32, ret_ptr: i32, ret_len: i32| {
            let item = caller.data().world.queues().dequeue(id as u32);
            match item {
                None => Ok(Status::NotFound.code()),
                Some(None) => Ok(Status::Empty.code()),
                Some(Some(item)) => {
                    copy_out(&mut caller, &item, ret_ptr, ret_len).map(Status::code)
                }
            }
        },
    )?;
    Ok(())
}
