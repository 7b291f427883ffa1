//! The proxy-wasm ABI 0.2.1 host (Envoy's side of every `env::proxy_*` import) and the WASI calls a
//! `wasm32-wasip1` build imports. Host calls act on the calling VM's [`VmState`], which lives in
//! wasmtime's `Store<VmState>`, and through it on the simulated Envoy ([`crate::envoy::World`]).
//!
//! A call whose guest pointers fall outside memory answers `InvalidMemoryAccess`, as Envoy does;
//! an import the harness does not implement is refused before instantiation, naming the import.

mod buffers;
mod control;
mod headers;
mod logging;
pub(crate) mod maps;
pub mod memory;
mod metrics;
mod properties;
mod queues;
mod shared_data;
mod unsupported;
mod wasi;

use crate::envoy::VmState;
use wasmtime::{Linker, Module};

/// proxy-wasm status codes (ABI 0.2.1 `WasmResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Status {
    Ok = 0,
    NotFound = 1,
    BadArgument = 2,
    SerializationFailure = 3,
    ParseFailure = 4,
    InvalidMemoryAccess = 6,
    Empty = 7,
    CasMismatch = 8,
    InternalFailure = 10,
    BrokenConnection = 11,
    Unimplemented = 12,
}

impl Status {
    pub fn code(self) -> i32 {
        self as i32
    }
}

/// The import module of the proxy-wasm host calls.
pub const ENV: &str = "env";
/// The import module of WASI preview 1.
pub const WASI: &str = "wasi_snapshot_preview1";

/// A linker with every host call the harness implements.
pub fn linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<VmState>> {
    let mut linker = Linker::new(engine);
    logging::add(&mut linker)?;
    properties::add(&mut linker)?;
    headers::add(&mut linker)?;
    buffers::add(&mut linker)?;
    shared_data::add(&mut linker)?;
    queues::add(&mut linker)?;
    metrics::add(&mut linker)?;
    control::add(&mut linker)?;
    unsupported::add(&mut linker)?;
    wasi::add(&mut linker)?;
    Ok(linker)
}

/// The imports of `module` that `linker` does not define, as `module::name` — each one would make
/// the filter fail at load in this harness.
pub fn missing_imports(linker: &mut Linker<VmState>, module: &Module) -> Vec<String> {
    let mut store = wasmtime::Store::new(module.engine(), VmState::detached());
    module
        .imports()
        .filter(|import| {
            linker
                .get(&mut store, import.module(), import.name())
                .is_err()
        })
        .map(|import| format!("{}::{}", import.module(), import.name()))
        .collect()
}

/// A linker whose every import of `module` is a thin wrapper that counts the call by import (in
/// [`VmState::import_calls`], indexed like `module.imports()`) and then calls the real host
/// function, resolved once per store into [`VmState::imports`]. The work ledger reads these
/// counts to say which host calls a request makes; a wasmtime call hook could count calls but
/// cannot tell which import was called.
pub fn counting_linker(
    engine: &wasmtime::Engine,
    module: &Module,
) -> wasmtime::Result<Linker<VmState>> {
    let mut outer = Linker::new(engine);
    for (index, import) in module.imports().enumerate() {
        if let wasmtime::ExternType::Func(ty) = import.ty() {
            outer.func_new(
                import.module(),
                import.name(),
                ty,
                move |mut caller: wasmtime::Caller<'_, VmState>, params, results| {
                    let fuel = caller.get_fuel().unwrap_or(0);
                    let state = caller.data_mut();
                    state.host_calls += 1;
                    if let Some(trace) = &mut state.trace {
                        trace.push((index, fuel));
                    }
                    if let Some(count) = state.import_calls.get_mut(index) {
                        *count += 1;
                    }
                    let Some(Some(func)) = state.imports.get(index).copied() else {
                        return Err(wasmtime::Error::msg(format!("import {index} not resolved")));
                    };
                    func.call(&mut caller, params, results)
                },
            )?;
        }
    }
    Ok(outer)
}
