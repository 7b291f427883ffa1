//! `proxy_get_buffer_bytes`, `proxy_set_buffer_bytes` with Envoy's rules: reads are clamped to the
//! buffer; a write at 0 drains `size` bytes then prepends, a write at or past the end appends, any
//! other position is `BadArgument`. Buffer types: 0 request body, 1 response body, 4 HTTP call
//! response body, 6 VM configuration, 7 plugin configuration.

use super::memory::{copy_out, read};
use super::{Status, ENV};
use crate::envoy::{BufferFault, VmState};
use wasmtime::{Caller, Linker};

fn buffer(state: &VmState, kind: i32) -> Option<&[u8]> {
    match kind {
        0 => state.stream().map(|s| s.request_body.as_slice()),
        1 => state.stream().map(|s| s.response_body.as_slice()),
        4 => state.http_call_response.as_ref().map(|r| r.body.as_slice()),
        6 => Some(&state.vm_config),
        7 => Some(&state.plugin_config),
        _ => None,
    }
}

fn buffer_mut(state: &mut VmState, kind: i32) -> Option<&mut Vec<u8>> {
    match kind {
        0 => state.stream_mut().map(|s| &mut s.request_body),
        1 => state.stream_mut().map(|s| &mut s.response_body),
        _ => None,
    }
}

pub fn add(linker: &mut Linker<VmState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        ENV,
        "proxy_get_buffer_bytes",
        |mut caller: Caller<'_, VmState>,
         kind: i32,
         start: i32,
         max: i32,
         ret_ptr: i32,
         ret_len: i32| {
            let (start, mut max) = (start as u32 as usize, max as u32 as usize);
            match caller.data().world.faults().take_buffer(kind) {
                Some(BufferFault::Absent) => return Ok(Status::NotFound.code()),
                Some(BufferFault::Truncate(at_most)) => max = max.min(at_most),
                None => {}
            }
            let Some(data) = buffer(caller.data(), kind) else {
                return Ok(Status::NotFound.code());
            };
            if start.checked_add(max).is_none() {
                return Ok(Status::BadArgument.code());
            }
            let from = start.min(data.len());
            let to = start.saturating_add(max).min(data.len());
            let slice = data[from..to].to_vec();
            copy_out(&mut caller, &slice, ret_ptr, ret_len).map(Status::code)
        },
    )?;
    linker.func_wrap(
        ENV,
        "proxy_set_buffer_bytes",
        |mut caller: Caller<'_, VmState>,
         kind: i32,
         start: i32,
         size: i32,
         data_ptr: i32,
         data_len: i32| {
            let Some(data) = read(&mut caller, data_ptr, data_len) else {
                return Status::InvalidMemoryAccess.code();
            };
            let (start, size) = (start as u32 as usize, size as u32 as usize);
            let Some(buffer) = buffer_mut(caller.data_mut(), kind) else {
                return Status::NotFound.code();
            };
            if start == 0 {
                buffer.drain(..size.min(buffer.len()));
                buffer.splice(0..0, data);
            } else if start >= buffer.len() {
                buffer.extend_from_slice(&data);
            } else {
                return Status::BadArgument.code();
            }
            Status::Ok.code()
        },
    )?;
    Ok(())
}
