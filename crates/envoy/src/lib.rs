//! # idemgate-envoy
//!
//! The proxy-wasm HTTP filter that gives Envoy exactly-once `Idempotency-Key` enforcement. A thin
//! adapter: Envoy facts (headers, body chunks, properties, shared data, time) in, `idemgate-core`
//! decisions out. Build with `make build-filter`; configuration, behaviour table and metrics are in
//! this crate's README.
//!
//! Modules, one concept each: [`abi`] (the proxy-wasm host calls, without panics) and [`dispatch`]
//! (the exports: the filter has its own thin ABI layer instead of the `proxy-wasm` SDK, so that
//! callout answers can be routed by the root context — see [`abi`] for why), [`callout`] (the root
//! context's table of pending callouts), [`shared`] (what a root's streams and callouts share:
//! the configuration and each pending callout's state), [`clock`] (one reading of the time per
//! callback), [`remote_store`] and [`sequencer`] (the store service's and the sequencer's
//! callouts), [`detached`] (a claimed request's exchange that outlives its
//! client), [`settle`] (ending a claim), [`root`] (configuration, background reclaim), [`filter`] (one request),
//! [`shared_store`] (the core's compare-and-set store over Envoy shared data), [`origin`] (who made a
//! response), [`metrics`],
//! [`host`] (host calls without panics), [`entropy`], [`environment`] (the VM's environment
//! variables), [`id_map`] (maps by host id), [`runtime`] (what the `.wasm` brings without std:
//! allocator, panic handler, `memcmp`), and (with the test-only `conformance`
//! feature) the conformance export for the wasmtime harness. [`access_log`] writes each request's decision where Envoy's access logs print it.
//!
//! No two modules import each other, directly or around a circle (`tests/modules.rs` checks it):
//! [`dispatch`] and [`filter`] stand on the callout-making modules, which stand on [`shared`],
//! which stands on the leaves.
#![deny(unsafe_code)]
// The `.wasm` leaves out the standard library (its runtime, I/O, panic printing and wasi-libc's
// allocator were 34 KB of the filter): it needs only `core` and `alloc`, like the core crate. The
// allocator and the panic handler it then needs are in [`runtime`]. Native builds (unit tests)
// keep std.
#![cfg_attr(all(target_arch = "wasm32", not(test)), no_std)]

extern crate alloc;

/// What std's prelude would bring: the crate is `no_std` in the `.wasm`.
#[allow(unused_imports)]
mod prelude {
    pub use alloc::borrow::ToOwned;
    pub use alloc::boxed::Box;
    pub use alloc::format;
    pub use alloc::string::{String, ToString};
    pub use alloc::vec;
    pub use alloc::vec::Vec;
}

pub mod abi;
pub mod access_log;
pub mod allocator;
pub mod backend;
pub mod callout;
pub mod clock;
pub mod detached;
pub mod dispatch;
pub mod entropy;
pub mod environment;
pub mod filter;
pub mod host;
pub mod id_map;
pub mod metrics;
pub mod origin;
pub mod remote_store;
pub mod root;
pub mod runtime;
pub mod sequencer;
pub mod settle;
pub mod shared;
pub mod shared_data_abi;
pub mod shared_store;
pub mod waking;

/// Conformance vectors through the shipped `.wasm` (for the wasmtime harness): reads the UTF-8 JSON
/// case `{"group":..,"input":..}` at `ptr..ptr+len` (memory the harness obtained from the exported
/// `proxy_on_memory_allocate`), evaluates it with the core, and returns the answer's location as
/// `(ptr << 32) | len`. The answer is leaked: the harness reads it and discards the instance.
/// Only in the test build (`--features conformance`): the shipped `.wasm` has no such export.
#[cfg(feature = "conformance")]
// The only callers are wasm hosts, through the export: an `unsafe fn` would change nothing for them.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[no_mangle]
pub extern "C" fn idemgate_conformance(ptr: *const u8, len: usize) -> u64 {
    let input: &[u8] = if ptr.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: the caller (the harness) wrote `len` initialized bytes at `ptr` inside a block
        // it allocated from this module's allocator and does not touch while this call runs; the
        // slice does not outlive the call.
        unsafe { core::slice::from_raw_parts(ptr, len) }
    };
    let answer = match core::str::from_utf8(input) {
        Ok(case) => idemgate_core::conformance::evaluate_json(case),
        Err(_) => alloc::string::String::from(r#"{"error":"vector_not_utf8"}"#),
    };
    let answer: &'static mut str = answer.leak();
    // wasm32 addresses and lengths fit in 32 bits each.
    ((answer.as_ptr() as usize as u64) << 32) | (answer.len() as u64 & 0xffff_ffff)
}
