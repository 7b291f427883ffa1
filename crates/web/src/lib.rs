//! # idemgate-web
//!
//! The browser side of idemgate (`docs/semantics.md` §9): the core's rules exported with
//! `wasm-bindgen`, and wrapped by the hand-written ES module in `js/` into the npm package
//! `idemgate`. Nothing here decides anything the core does not: keys are parsed, fingerprints
//! hashed, retries timed and submit states moved by `idemgate-core`; this crate converts values and
//! errors at the boundary.
//!
//! Exports (JS names): `defaults` (the core's defaults), `newKey`, `parseKeyValues`,
//! `Fingerprinter`, `requestTarget`, `retryNext`, `parseRetryAfter`, `classifyStatus`, `settle`,
//! `intentIsOver`, `payloadMode`, `reusesKey`, `isReplayed`, `tokenTarget`,
//! `tokenIsFresh`, `StateTable` (`declare`, `submit`, `describe`, `answer`). Errors are JS
//! `Error`s named `IdemgateError` with a stable `code` (the core's `code()` string).
//!
//! Every export takes strings, numbers, booleans and byte arrays, so the same `.wasm` also runs
//! under a host without JavaScript (the wasmtime harness), with `idemgate_error` and
//! `idemgate_object` as its only JS imports that matter (JS draws the randomness `newKey` formats).
//! Results are typed: a name (`classifyStatus`), a boolean, an optional string, or a
//! plain object with named members (`retryNext`'s `{retry, delayMs | reason}`, `settle`'s
//! `{event, keepsKey}`, `StateTable.answer`'s `{outcome, state}`, `requestTarget`'s `{method, path}`;
//! see [`object`]) — never a number whose meaning a table elsewhere decodes, and never a string
//! with a prefix to parse. Fewer, flatter exports also mean less JS glue (size).
#![cfg_attr(all(target_arch = "wasm32", feature = "standalone"), no_std)]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod defaults;
pub mod error;
pub mod fingerprint;
pub mod intent;
pub mod key;
pub mod object;
pub mod outline;
pub mod parts;
pub mod retry;
pub mod target;
pub mod transition;

/// Without std (feature `standalone`, wasm32): a panic traps. The crate has no panicking paths by
/// construction (`unwrap`/`expect`/`panic` are denied), so this only ever sees bugs.
#[cfg(all(target_arch = "wasm32", feature = "standalone"))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    core::arch::wasm32::unreachable()
}

/// The allocator without std: lol_alloc's free list, 2.2 KB gzipped smaller than dlmalloc (see
/// Cargo.toml). `LockedAllocator` rather than the `unsafe` single-threaded wrapper.
#[cfg(all(target_arch = "wasm32", feature = "standalone"))]
#[global_allocator]
static ALLOCATOR: lol_alloc::LockedAllocator<lol_alloc::FreeListAllocator> =
    lol_alloc::LockedAllocator::new(lol_alloc::FreeListAllocator::new());
