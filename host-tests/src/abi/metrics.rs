//! `proxy_define_metric`, `proxy_increment_metric`, `proxy_record_metric`, `proxy_get_metric`:
//! names shared by every worker (one stats store), ids per VM. Counters only go up, as in Envoy.

use super::memory::{read_text, write_u32, write_u64};
use super::{Status, ENV};
use crate::envoy::{MetricKind, VmState};
use wasmtime::{Caller, Linker};

fn name_of(state: &VmState, id: i32) -> Option<String> {
    let index = usize::try_from(id).ok()?.checked_sub(1)?;
    state.metric_ids.get(index).cloned()
}

pub fn add(linker: &mut Linker<VmState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        ENV,
        "proxy_define_metric",
        |mut caller: Caller<'_, VmState>, kind: i32, name_ptr: i32, name_len: i32, ret_id: i32| {
            let Some(name) = read_text(&mut caller, name_ptr, name_len) else {
                return Status::InvalidMemoryAccess.code();
            };
            let Some(kind) = MetricKind::from_abi(kind) else {
                return Status::BadArgument.code();
            };
            let state = caller.data_mut();
            if !state.world.metrics().define(&name, kind) {
                return Status::BadArgument.code();
            }
            let id = match state.metric_ids.iter().position(|n| *n == name) {
                Some(i) => i + 1,
                None => {
                    state.metric_ids.push(name);
                    state.metric_ids.len()
                }
            };
            if write_u32(&mut caller, ret_id, id as u32) {
                Status::Ok.code()
            } else {
                Status::InvalidMemoryAccess.code()
            }
        },
    )?;
    linker.func_wrap(
        ENV,
        "proxy_increment_metric",
        |caller: Caller<'_, VmState>, id: i32, offset: i64| {
            let state = caller.data();
            let Some(name) = name_of(state, id) else {
                return Status::NotFound.code();
            };
            let mut metrics = state.world.metrics();
            let Some(metric) = metrics.get_mut(&name) else {
                return Status::NotFound.code();
            };
            match metric.kind {
                MetricKind::Counter if offset < 0 => return Status::BadArgument.code(),
                MetricKind::Histogram => return Status::BadArgument.code(),
                _ => metric.value = metric.value.saturating_add(offset),
            }
            Status::Ok.code()
        },
    )?;
    linker.func_wrap(
        ENV,
        "proxy_record_metric",
        |caller: Caller<'_, VmState>, id: i32, value: i64| {
            let state = caller.data();
            let Some(name) = name_of(state, id) else {
                return Status::NotFound.code();
            };
            let mut metrics = state.world.metrics();
            let Some(metric) = metrics.get_mut(&name) else {
                return Status::NotFound.code();
            };
            match metric.kind {
                MetricKind::Counter => metric.value = metric.value.saturating_add(value),
                MetricKind::Gauge => metric.value = value,
                MetricKind::Histogram => {
                    metric.value += 1;
                    metric.samples.push(value as u64);
                }
            }
            Status::Ok.code()
        },
    )?;
    linker.func_wrap(
        ENV,
        "proxy_get_metric",
        |mut caller: Caller<'_, VmState>, id: i32, ret: i32| {
            let state = caller.data();
            let Some(name) = name_of(state, id) else {
                return Status::NotFound.code();
            };
            let value = match state.world.metrics().get(&name) {
                Some(m) if m.kind != MetricKind::Histogram => m.value,
                Some(_) => return Status::BadArgument.code(),
                None => return Status::NotFound.code(),
            };
            if write_u64(&mut caller, ret, value as u64) {
                Status::Ok.code()
            } else {
                Status::InvalidMemoryAccess.code()
            }
        },
    )?;
    Ok(())
}
