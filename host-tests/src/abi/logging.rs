//! `proxy_log`, `proxy_get_log_level`.

use super::memory::{read_text, write_u32};
use super::{Status, ENV};
use crate::envoy::{LogLine, VmState};
use wasmtime::{Caller, Linker};

pub fn add(linker: &mut Linker<VmState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        ENV,
        "proxy_log",
        |mut caller: Caller<'_, VmState>, level: i32, ptr: i32, len: i32| {
            let Some(message) = read_text(&mut caller, ptr, len) else {
                return Status::InvalidMemoryAccess.code();
            };
            if !(0..=5).contains(&level) {
                return Status::BadArgument.code();
            }
            let state = caller.data();
            state.world.log(LogLine {
                worker: state.worker,
                level: level as u32,
                message,
            });
            Status::Ok.code()
        },
    )?;
    linker.func_wrap(
        ENV,
        "proxy_get_log_level",
        |mut caller: Caller<'_, VmState>, ret: i32| {
            let level = caller.data().log_level;
            if write_u32(&mut caller, ret, level) {
                Status::Ok.code()
            } else {
                Status::InvalidMemoryAccess.code()
            }
        },
    )?;
    Ok(())
}
