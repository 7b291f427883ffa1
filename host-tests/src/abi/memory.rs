//! Guest memory access for host calls: reading the guest's arguments, and returning data the way
//! Envoy does — memory allocated through the guest's `proxy_on_memory_allocate` (or `malloc`),
//! pointer and size written to the locations the guest passed.

use super::Status;
use crate::envoy::VmState;
use wasmtime::{Caller, Extern, Memory};

/// The guest's memory: the caller's export when a guest instance calls directly, else (a host
/// call reached through [`super::counting_linker`]'s wrapper, whose caller is the host) the
/// memory the worker recorded after instantiating the filter.
fn memory<T: 'static>(caller: &mut Caller<'_, T>) -> Option<Memory> {
    caller
        .get_export("memory")
        .and_then(Extern::into_memory)
        .or_else(|| {
            (caller.data() as &dyn std::any::Any)
                .downcast_ref::<VmState>()
                .and_then(|state| state.guest_memory)
        })
}

fn range(ptr: i32, len: i32) -> (usize, usize) {
    (ptr as u32 as usize, len as u32 as usize)
}

/// The guest's bytes at `ptr..ptr+len`, or `None` if out of bounds.
pub fn read<T: 'static>(caller: &mut Caller<'_, T>, ptr: i32, len: i32) -> Option<Vec<u8>> {
    let (start, len) = range(ptr, len);
    let memory = memory(caller)?;
    let data = memory.data(&*caller);
    data.get(start..start.checked_add(len)?).map(<[u8]>::to_vec)
}

/// The guest's text at `ptr..ptr+len` (lossy UTF-8), or `None` if out of bounds.
pub fn read_text<T: 'static>(caller: &mut Caller<'_, T>, ptr: i32, len: i32) -> Option<String> {
    read(caller, ptr, len).map(|b| String::from_utf8_lossy(&b).into_owned())
}

pub fn write<T: 'static>(caller: &mut Caller<'_, T>, ptr: i32, bytes: &[u8]) -> bool {
    let Some(memory) = memory(caller) else {
        return false;
    };
    memory
        .write(&mut *caller, ptr as u32 as usize, bytes)
        .is_ok()
}

pub fn write_u32<T: 'static>(caller: &mut Caller<'_, T>, ptr: i32, value: u32) -> bool {
    write(caller, ptr, &value.to_le_bytes())
}

pub fn write_u64<T: 'static>(caller: &mut Caller<'_, T>, ptr: i32, value: u64) -> bool {
    write(caller, ptr, &value.to_le_bytes())
}

/// The bytes of a WASI `ciovec` list (`iovs_len` entries of pointer and length at `iovs`),
/// concatenated, or `None` if any part is out of bounds.
pub fn gather<T: 'static>(caller: &mut Caller<'_, T>, iovs: i32, iovs_len: i32) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    for i in 0..iovs_len.max(0) {
        let iov = read(caller, iovs.wrapping_add(i * 8), 8)?;
        let ptr = i32::from_le_bytes([iov[0], iov[1], iov[2], iov[3]]);
        let len = i32::from_le_bytes([iov[4], iov[5], iov[6], iov[7]]);
        bytes.extend_from_slice(&read(caller, ptr, len)?);
    }
    Some(bytes)
}

/// Allocates `len` bytes in the guest through its allocator export.
pub fn allocate(caller: &mut Caller<'_, VmState>, len: usize) -> wasmtime::Result<i32> {
    let func = caller
        .get_export("proxy_on_memory_allocate")
        .or_else(|| caller.get_export("malloc"))
        .and_then(Extern::into_func)
        .or(caller.data().guest_allocate)
        .ok_or_else(|| {
            wasmtime::Error::msg("the guest exports neither proxy_on_memory_allocate nor malloc")
        })?;
    let len =
        i32::try_from(len).map_err(|_| wasmtime::Error::msg("host data larger than 2 GiB"))?;
    let ptr = func.typed::<i32, i32>(&*caller)?.call(&mut *caller, len)?;
    if ptr == 0 && len > 0 {
        return Err(wasmtime::Error::msg("the guest allocator returned null"));
    }
    Ok(ptr)
}

/// Envoy's `copyToPointerSize`: allocates and copies `bytes`, writes its pointer (0 for empty)
/// and size to `ptr_ptr` and `size_ptr`.
pub fn copy_out(
    caller: &mut Caller<'_, VmState>,
    bytes: &[u8],
    ptr_ptr: i32,
    size_ptr: i32,
) -> wasmtime::Result<Status> {
    let ptr = if bytes.is_empty() {
        0
    } else {
        let ptr = allocate(caller, bytes.len())?;
        if !write(caller, ptr, bytes) {
            return Ok(Status::InvalidMemoryAccess);
        }
        ptr
    };
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    if !write_u32(caller, ptr_ptr, ptr as u32) || !write_u32(caller, size_ptr, len) {
        return Ok(Status::InvalidMemoryAccess);
    }
    Ok(Status::Ok)
}
