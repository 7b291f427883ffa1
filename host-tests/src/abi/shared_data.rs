//! `proxy_get_shared_data`, `proxy_set_shared_data` over the Envoy-exact map of
//! [`crate::envoy::SharedData`], after the explorer's gate and the fault plan.

use super::memory::{copy_out, read, read_text, write_u32};
use super::{Status, ENV};
use crate::envoy::{Effect, SharedOp, VmState};
use wasmtime::{Caller, Linker};

/// Another writer (worker `usize::MAX` in the write log) rewrites `key` with its current value, or
/// creates it empty: whatever CAS the guest holds for it is stale now.
fn rewrite(world: &crate::envoy::World, key: &str) {
    let now = world.clock().now_ms();
    let mut map = world.shared_data();
    let value = map.get(key).map(|e| e.value.clone()).unwrap_or_default();
    let _ = map.set(usize::MAX, key, &value, 0, now);
}

fn get(
    mut caller: Caller<'_, VmState>,
    key_ptr: i32,
    key_len: i32,
    ret_ptr: i32,
    ret_len: i32,
    ret_cas: i32,
) -> wasmtime::Result<i32> {
    let Some(key) = read_text(&mut caller, key_ptr, key_len) else {
        return Ok(Status::InvalidMemoryAccess.code());
    };
    let state = caller.data();
    state.pass_gate(&format!("get {key}"));
    let world = state.world.clone();
    let fault = world.faults().take(SharedOp::Get, &key);
    if let Some(Effect::Fail(status)) = fault {
        return Ok(status.code());
    }
    let entry = world.shared_data().get(&key).cloned();
    if fault == Some(Effect::ConcurrentRewrite) {
        rewrite(&world, &key);
    }
    let Some(entry) = entry else {
        return Ok(Status::NotFound.code());
    };
    let status = copy_out(&mut caller, &entry.value, ret_ptr, ret_len)?;
    if status != Status::Ok {
        return Ok(status.code());
    }
    if !write_u32(&mut caller, ret_cas, entry.cas) {
        return Ok(Status::InvalidMemoryAccess.code());
    }
    Ok(Status::Ok.code())
}

fn set(
    mut caller: Caller<'_, VmState>,
    key_ptr: i32,
    key_len: i32,
    value_ptr: i32,
    value_len: i32,
    cas: i32,
) -> i32 {
    let (Some(key), Some(value)) = (
        read_text(&mut caller, key_ptr, key_len),
        read(&mut caller, value_ptr, value_len),
    ) else {
        return Status::InvalidMemoryAccess.code();
    };
    let state = caller.data();
    state.pass_gate(&format!("set {key} cas={}", cas as u32));
    let world = state.world.clone();
    let worker = state.worker;
    let now = world.clock().now_ms();
    match world.faults().take(SharedOp::Set, &key) {
        Some(Effect::Fail(status)) => return status.code(),
        Some(Effect::ConcurrentRewrite) => rewrite(&world, &key),
        None => {}
    }
    let result = world
        .shared_data()
        .set(worker, &key, &value, cas as u32, now);
    match result {
        Ok(_) => Status::Ok.code(),
        Err(_) => Status::CasMismatch.code(),
    }
}

pub fn add(linker: &mut Linker<VmState>) -> wasmtime::Result<()> {
    linker.func_wrap(ENV, "proxy_get_shared_data", get)?;
    linker.func_wrap(ENV, "proxy_set_shared_data", set)?;
    Ok(())
}
