//! The WASI preview 1 calls a `wasm32-wasip1` build of the filter imports, answered the way Envoy
//! answers them: no arguments, the VM's configured environment, the simulated clocks, the test's
//! entropy, stdout/stderr into the log, no files, and `proc_exit` ends the VM (a trap here).

use super::memory::{gather, write, write_u32, write_u64};
use super::WASI;
use crate::envoy::{LogLine, VmState};
use wasmtime::{Caller, Linker};

const SUCCESS: i32 = 0;
const BADF: i32 = 8;
const FAULT: i32 = 21;
const INVAL: i32 = 28;
const NOTSUP: i32 = 58;
const SPIPE: i32 = 70;

fn fault_unless(ok: bool) -> i32 {
    if ok {
        SUCCESS
    } else {
        FAULT
    }
}

fn environment(state: &VmState) -> Vec<Vec<u8>> {
    state
        .env
        .iter()
        .map(|(k, v)| {
            let mut entry = format!("{k}={v}").into_bytes();
            entry.push(0);
            entry
        })
        .collect()
}

fn fd_write(
    mut caller: Caller<'_, VmState>,
    fd: i32,
    iovs: i32,
    iovs_len: i32,
    ret_written: i32,
) -> i32 {
    if fd != 1 && fd != 2 {
        return BADF;
    }
    let Some(text) = gather(&mut caller, iovs, iovs_len) else {
        return FAULT;
    };
    let state = caller.data();
    state.world.log(LogLine {
        worker: state.worker,
        level: if fd == 1 { 2 } else { 4 },
        message: String::from_utf8_lossy(&text).trim_end().to_string(),
    });
    fault_unless(write_u32(&mut caller, ret_written, text.len() as u32))
}

pub fn add(linker: &mut Linker<VmState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        WASI,
        "args_sizes_get",
        |mut caller: Caller<'_, VmState>, argc: i32, size: i32| {
            fault_unless(write_u32(&mut caller, argc, 0) && write_u32(&mut caller, size, 0))
        },
    )?;
    linker.func_wrap(
        WASI,
        "args_get",
        |_caller: Caller<'_, VmState>, _argv: i32, _buf: i32| SUCCESS,
    )?;
    linker.func_wrap(
        WASI,
        "environ_sizes_get",
        |mut caller: Caller<'_, VmState>, count: i32, size: i32| {
            let env = environment(caller.data());
            let bytes: usize = env.iter().map(Vec::len).sum();
            fault_unless(
                write_u32(&mut caller, count, env.len() as u32)
                    && write_u32(&mut caller, size, bytes as u32),
            )
        },
    )?;
    linker.func_wrap(
        WASI,
        "environ_get",
        |mut caller: Caller<'_, VmState>, environ: i32, buf: i32| {
            let env = environment(caller.data());
            let mut at = buf;
            for (i, entry) in env.iter().enumerate() {
                if !write_u32(&mut caller, environ.wrapping_add(i as i32 * 4), at as u32)
                    || !write(&mut caller, at, entry)
                {
                    return FAULT;
                }
                at = at.wrapping_add(entry.len() as i32);
            }
            SUCCESS
        },
    )?;
    linker.func_wrap(
        WASI,
        "clock_time_get",
        |mut caller: Caller<'_, VmState>, id: i32, _precision: i64, ret: i32| {
            let clock = caller.data().world.clock().clone();
            let now = match id {
                0 => clock.now_nanos(),
                1..=3 => clock.monotonic_nanos(),
                _ => return INVAL,
            };
            fault_unless(write_u64(&mut caller, ret, now))
        },
    )?;
    linker.func_wrap(
        WASI,
        "clock_res_get",
        |mut caller: Caller<'_, VmState>, id: i32, ret: i32| {
            if !(0..=3).contains(&id) {
                return INVAL;
            }
            fault_unless(write_u64(&mut caller, ret, 1))
        },
    )?;
    linker.func_wrap(
        WASI,
        "random_get",
        |mut caller: Caller<'_, VmState>, buf: i32, len: i32| {
            let mut bytes = vec![0u8; len as u32 as usize];
            caller.data().world.entropy().fill(&mut bytes);
            fault_unless(write(&mut caller, buf, &bytes))
        },
    )?;
    linker.func_wrap(WASI, "fd_write", fd_write)?;
    linker.func_wrap(
        WASI,
        "fd_read",
        |_c: Caller<'_, VmState>, _fd: i32, _iovs: i32, _len: i32, _ret: i32| BADF,
    )?;
    linker.func_wrap(WASI, "fd_close", |_c: Caller<'_, VmState>, _fd: i32| BADF)?;
    linker.func_wrap(
        WASI,
        "fd_seek",
        |_c: Caller<'_, VmState>, fd: i32, _offset: i64, _whence: i32, _ret: i32| {
            if (0..=2).contains(&fd) {
                SPIPE
            } else {
                BADF
            }
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_fdstat_get",
        |mut caller: Caller<'_, VmState>, fd: i32, ret: i32| {
            if !(0..=2).contains(&fd) {
                return BADF;
            }
            // filetype character_device (2), no flags, no rights.
            let mut stat = [0u8; 24];
            stat[0] = 2;
            fault_unless(write(&mut caller, ret, &stat))
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_prestat_get",
        |_c: Caller<'_, VmState>, _fd: i32, _ret: i32| BADF,
    )?;
    linker.func_wrap(
        WASI,
        "fd_prestat_dir_name",
        |_c: Caller<'_, VmState>, _fd: i32, _p: i32, _l: i32| NOTSUP,
    )?;
    linker.func_wrap(
        WASI,
        "poll_oneoff",
        |_c: Caller<'_, VmState>, _i: i32, _o: i32, _n: i32, _r: i32| NOTSUP,
    )?;
    linker.func_wrap(WASI, "sched_yield", |_c: Caller<'_, VmState>| SUCCESS)?;
    linker.func_wrap(
        WASI,
        "proc_exit",
        |_caller: Caller<'_, VmState>, code: i32| -> wasmtime::Result<()> {
            Err(wasmtime::Error::msg(format!(
                "the filter called proc_exit({code})"
            )))
        },
    )?;
    Ok(())
}
