//! Runs a wasm32-wasip1 program (the core's bench, `crates/envoy/bench/core_bench.rs`) in wasmtime
//! with Cranelift's optimising settings and a real clock: the "inside wasmtime" column of
//! BENCHMARKS.md, next to V8 (`wasi-run.mjs`). The harness's own host is not used: its clock is
//! simulated and it meters fuel, both wrong for timing.
//!
//! Only the five WASI calls the bench imports are provided (environment, clock, stdout, exit);
//! `IDEMGATE_BENCH_SMOKE` is passed through.
//! Usage: `cargo run -p idemgate-host-tests --example wasi_run -- prog.wasm`

use idemgate_host_tests::abi::memory::{gather, write, write_u32, write_u64};
use std::io::Write;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use wasmtime::{Caller, Config, Engine, Linker, Module, OptLevel, Store};

const WASI: &str = "wasi_snapshot_preview1";
const SUCCESS: i32 = 0;
const BADF: i32 = 8;
const FAULT: i32 = 21;
const INVAL: i32 = 28;

struct Host {
    env: Vec<Vec<u8>>,
    started: Instant,
    exit: Option<i32>,
}

fn errno(ok: bool) -> i32 {
    if ok {
        SUCCESS
    } else {
        FAULT
    }
}

fn linker(engine: &Engine) -> wasmtime::Result<Linker<Host>> {
    let mut linker = Linker::new(engine);
    linker.func_wrap(
        WASI,
        "environ_sizes_get",
        |mut caller: Caller<'_, Host>, count: i32, size: i32| {
            let env = &caller.data().env;
            let n = env.len() as u32;
            let bytes: u32 = env.iter().map(|e| e.len() as u32 + 1).sum();
            errno(write_u32(&mut caller, count, n) && write_u32(&mut caller, size, bytes))
        },
    )?;
    linker.func_wrap(
        WASI,
        "environ_get",
        |mut caller: Caller<'_, Host>, pointers: i32, buffer: i32| {
            let env = caller.data().env.clone();
            let mut at = buffer;
            for (i, entry) in env.iter().enumerate() {
                let mut text = entry.clone();
                text.push(0);
                if !write_u32(&mut caller, pointers + 4 * i as i32, at as u32)
                    || !write(&mut caller, at, &text)
                {
                    return FAULT;
                }
                at += text.len() as i32;
            }
            SUCCESS
        },
    )?;
    linker.func_wrap(
        WASI,
        "clock_time_get",
        |mut caller: Caller<'_, Host>, id: i32, _precision: i64, ret: i32| {
            let nanos = match id {
                0 => SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64),
                1..=3 => caller.data().started.elapsed().as_nanos() as u64,
                _ => return INVAL,
            };
            errno(write_u64(&mut caller, ret, nanos))
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_write",
        |mut caller: Caller<'_, Host>, fd: i32, iovs: i32, iovs_len: i32, written: i32| {
            if fd != 1 && fd != 2 {
                return BADF;
            }
            let Some(text) = gather(&mut caller, iovs, iovs_len) else {
                return FAULT;
            };
            let result = if fd == 1 {
                std::io::stdout().write_all(&text)
            } else {
                std::io::stderr().write_all(&text)
            };
            if result.is_err() {
                return FAULT;
            }
            errno(write_u32(&mut caller, written, text.len() as u32))
        },
    )?;
    linker.func_wrap(
        WASI,
        "proc_exit",
        |mut caller: Caller<'_, Host>, code: i32| -> wasmtime::Result<()> {
            caller.data_mut().exit = Some(code);
            Err(wasmtime::Error::msg("proc_exit"))
        },
    )?;
    Ok(linker)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: wasi_run <program.wasm>")?;
    let mut config = Config::new();
    config.cranelift_opt_level(OptLevel::Speed);
    let engine = Engine::new(&config)?;
    let module = Module::from_file(&engine, &path)?;
    let env = std::env::var("IDEMGATE_BENCH_SMOKE")
        .map(|v| vec![format!("IDEMGATE_BENCH_SMOKE={v}").into_bytes()])
        .unwrap_or_default();
    let mut store = Store::new(
        &engine,
        Host {
            env,
            started: Instant::now(),
            exit: None,
        },
    );
    let instance = linker(&engine)?.instantiate(&mut store, &module)?;
    let start = instance.get_typed_func::<(), ()>(&mut store, "_start")?;
    let result = start.call(&mut store, ());
    std::io::stdout().flush()?;
    match (result, store.data().exit) {
        (Ok(()), _) | (Err(_), Some(0)) => Ok(()),
        (Err(_), Some(code)) => Err(format!("{path} exited with {code}").into()),
        (Err(e), None) => Err(e.into()),
    }
}
