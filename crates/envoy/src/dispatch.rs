//! The proxy-wasm exports: the host calls these, and they route each call to the root context or
//! the HTTP context it names. One table per VM (wasm is single-threaded; each Envoy worker has
//! its own VM). Envoy never re-enters the module from inside a host call except through
//! `proxy_on_memory_allocate` (local replies and callout answers are delivered after the current
//! callback returns), so holding the table across a callback is sound; even so every borrow is a
//! `try_borrow_mut`, and a call that finds the table busy is answered with `Continue`, never a
//! panic.
//!
//! Callout answers (`proxy_on_http_call_response`) arrive on the *root* context that owns the
//! call; the root's [`crate::callout::CalloutTable`] says what the token was for, and the stream that asked is
//! looked up here — it may be gone, which is the point of [`crate::detached`].
#![allow(unsafe_code)]

use crate::abi::{self, Action, LogLevel};
use crate::clock;
use crate::detached;
use crate::filter::Filter;
use crate::id_map::{id_map, FewIds, IdMap};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::remote_store;
use crate::root::Root;
use crate::shared::{Pending, StoreCall};
use core::cell::RefCell;

struct Vm {
    roots: FewIds<Root>,
    streams: IdMap<Filter>,
    /// Filters whose stream is gone while their machine waits for a callout: each takes its
    /// answer when it comes, gives back what it holds, and goes.
    orphans: IdMap<Filter>,
}

const fn vm() -> RefCell<Vm> {
    RefCell::new(Vm {
        roots: FewIds::new(),
        streams: id_map(),
        orphans: id_map(),
    })
}

/// The VM's one table. In the `.wasm` a plain `static` (no std, so no `thread_local!`): wasm32 here
/// has no threads, which is what makes the `Sync` below true.
#[cfg(target_arch = "wasm32")]
struct OneThread(RefCell<Vm>);

// SAFETY: wasm32-wasip1 modules run on one thread (no shared memory, no thread spawning), so the
// table is never reached from two threads.
#[cfg(target_arch = "wasm32")]
unsafe impl Sync for OneThread {}

#[cfg(target_arch = "wasm32")]
static VM: OneThread = OneThread(vm());

#[cfg(not(target_arch = "wasm32"))]
std::thread_local! {
    static VM: RefCell<Vm> = const { vm() };
}

fn with_vm<T>(fallback: T, f: impl FnOnce(&mut Vm) -> T) -> T {
    clock::callback_begins();
    let result = with_vm_state(fallback, f);
    clock::callback_ends();
    result
}

fn with_vm_state<T>(fallback: T, f: impl FnOnce(&mut Vm) -> T) -> T {
    #[cfg(target_arch = "wasm32")]
    let borrowed = VM.0.try_borrow_mut();
    #[cfg(target_arch = "wasm32")]
    return match borrowed {
        Ok(mut vm) => f(&mut vm),
        Err(_) => fallback,
    };
    #[cfg(not(target_arch = "wasm32"))]
    VM.with(|vm| match vm.try_borrow_mut() {
        Ok(mut vm) => f(&mut vm),
        Err(_) => fallback,
    })
}

fn stream<T: Copy>(context_id: u32, fallback: T, f: impl FnOnce(&mut Filter) -> T) -> T {
    with_vm(fallback, |vm| match vm.streams.get_mut(&context_id) {
        Some(filter) => f(filter),
        None => fallback,
    })
}

fn action(a: Action) -> u32 {
    a as u32
}

#[cfg(target_os = "wasi")]
extern "C" {
    fn __wasm_call_ctors();
}

/// WASI reactor start: runs the module's constructors once, before any other export.
#[no_mangle]
pub extern "C" fn _initialize() {
    #[cfg(target_os = "wasi")]
    // SAFETY: called once by the host before any other export, as WASI reactors require.
    unsafe {
        __wasm_call_ctors();
    }
}

#[no_mangle]
pub extern "C" fn proxy_abi_version_0_2_1() {}

/// Memory the host fills (host call results, configuration): exactly `size` bytes (a boxed slice,
/// so the allocation's layout is that of a `Vec<u8>` of capacity `size`), leaked here and taken
/// back exactly once by [`crate::abi`] (or by `shared_data_abi`) with `Vec::from_raw_parts`.
#[no_mangle]
pub extern "C" fn proxy_on_memory_allocate(size: usize) -> *mut u8 {
    let buffer: Box<[core::mem::MaybeUninit<u8>]> = Box::new_uninit_slice(size);
    Box::into_raw(buffer).cast::<u8>()
}

#[no_mangle]
pub extern "C" fn proxy_on_context_create(context_id: u32, parent_id: u32) {
    with_vm((), |vm| {
        if parent_id == 0 {
            vm.roots.insert(context_id, Root::default());
        } else if let Some(filter) = vm
            .roots
            .get(&parent_id)
            .and_then(Root::shared)
            .map(|shared| Filter::new(shared, context_id))
        {
            vm.streams.insert(context_id, filter);
        }
    })
}

#[no_mangle]
pub extern "C" fn proxy_on_vm_start(_context_id: u32, _size: usize) -> u32 {
    1
}

#[no_mangle]
pub extern "C" fn proxy_on_configure(context_id: u32, size: usize) -> u32 {
    with_vm(0, |vm| match vm.roots.get_mut(&context_id) {
        Some(root) => u32::from(root.on_configure(size)),
        None => 0,
    })
}

#[no_mangle]
pub extern "C" fn proxy_on_tick(context_id: u32) {
    with_vm((), |vm| {
        if let Some(root) = vm.roots.get_mut(&context_id) {
            root.on_tick();
        }
        // Every parked duplicate on each tick: its deadline, and its next question to the store
        // (a record finished where no announcement reaches: another Envoy of a fleet).
        let waiters = vm
            .roots
            .get(&context_id)
            .and_then(Root::shared)
            .and_then(|shared| {
                let waiters = shared.waiters.try_borrow().ok()?;
                (!waiters.is_empty()).then(|| waiters.all())
            });
        if let (Some(waiters), Some(now)) = (waiters, crate::host::now()) {
            for (_, stream) in waiters {
                wake(vm, stream, now, false);
            }
        }
        if let Some(root) = vm.roots.get(&context_id) {
            root.pace_tick();
        }
    })
}

/// Keys completed or released in some worker were announced to this VM's queue: the duplicates
/// parked on them ask the store again.
#[no_mangle]
pub extern "C" fn proxy_on_queue_ready(context_id: u32, queue_id: u32) {
    with_vm((), |vm| {
        let keys = crate::waking::announced(queue_id);
        let Some(shared) = vm.roots.get(&context_id).and_then(Root::shared) else {
            return;
        };
        // No clock: the tick wakes them instead.
        let Some(now) = crate::host::now() else {
            return;
        };
        for key in keys {
            let streams = match shared.waiters.try_borrow() {
                Ok(waiters) => waiters.on(&key),
                Err(_) => continue,
            };
            for stream in streams {
                wake(vm, stream, now, true);
            }
        }
    })
}

/// Wakes the parked stream `stream` at `now`, made the effective context: its key `announced`,
/// or the tick.
fn wake(vm: &mut Vm, stream: u32, now: idemgate_core::time::UnixMillis, announced: bool) {
    if let Some(filter) = vm.streams.get_mut(&stream) {
        if abi::set_effective_context(stream).is_ok() {
            filter.wake(now, announced);
        }
    }
}

#[no_mangle]
pub extern "C" fn proxy_on_request_headers(context_id: u32, headers: usize, eos: u32) -> u32 {
    action(stream(context_id, Action::Continue, |f| {
        f.on_request_headers(headers, eos != 0)
    }))
}

#[no_mangle]
pub extern "C" fn proxy_on_request_body(context_id: u32, size: usize, eos: u32) -> u32 {
    action(stream(context_id, Action::Continue, |f| {
        f.on_request_body(size, eos != 0)
    }))
}

#[no_mangle]
pub extern "C" fn proxy_on_request_trailers(context_id: u32, trailers: usize) -> u32 {
    action(stream(context_id, Action::Continue, |f| {
        f.on_request_trailers(trailers)
    }))
}

#[no_mangle]
pub extern "C" fn proxy_on_response_headers(context_id: u32, headers: usize, eos: u32) -> u32 {
    action(stream(context_id, Action::Continue, |f| {
        f.on_response_headers(headers, eos != 0)
    }))
}

#[no_mangle]
pub extern "C" fn proxy_on_response_body(context_id: u32, size: usize, eos: u32) -> u32 {
    action(stream(context_id, Action::Continue, |f| {
        f.on_response_body(size, eos != 0)
    }))
}

#[no_mangle]
pub extern "C" fn proxy_on_response_trailers(context_id: u32, trailers: usize) -> u32 {
    action(stream(context_id, Action::Continue, |f| {
        f.on_response_trailers(trailers)
    }))
}

#[no_mangle]
pub extern "C" fn proxy_on_log(context_id: u32) {
    stream(context_id, (), |f| f.on_log())
}

#[no_mangle]
pub extern "C" fn proxy_on_done(context_id: u32) -> u32 {
    with_vm((), |vm| match vm.streams.get_mut(&context_id) {
        Some(filter) => filter.on_done(),
        // A root context done (its plugin removed, Envoy draining): its queued finishes go now
        // instead of going with the VM.
        None => {
            if let Some(shared) = vm.roots.get(&context_id).and_then(Root::shared) {
                remote_store::flush(&shared);
            }
        }
    });
    1
}

#[no_mangle]
pub extern "C" fn proxy_on_delete(context_id: u32) {
    with_vm((), |vm| match vm.streams.remove(&context_id) {
        Some(mut filter) => {
            if filter.client_gone() {
                vm.orphans.insert(context_id, filter);
            }
        }
        None => {
            vm.roots.remove(&context_id);
        }
    })
}

/// Gives a store answer to the stream that waits for it — or, its client gone, to its machine,
/// which gives back what the request holds (the filter then goes). `false`: nothing waits for it.
fn deliver(vm: &mut Vm, stream: u32, token: u32, f: impl FnOnce(&mut Filter)) -> bool {
    if let Some(filter) = vm.streams.get_mut(&stream) {
        if filter.awaits(token) && abi::set_effective_context(stream).is_ok() {
            f(filter);
            return true;
        }
        return false;
    }
    let Some(filter) = vm.orphans.get_mut(&stream) else {
        return false;
    };
    if !filter.awaits(token) {
        return false;
    }
    f(filter);
    if !filter.is_orphaned() {
        vm.orphans.remove(&stream);
    }
    true
}

/// A store answer nothing waits for (never expected: a stream that waits is kept until its
/// answer comes): said, so a claim left in flight until its lease is not silent.
fn undelivered(token: u32) {
    abi::log(
        LogLevel::Warn,
        &format!("store answer {token} found no request waiting for it: what it holds stays until its lease ends"),
    );
}

/// The answer to a callout, on the root context that owns it (see [`crate::callout`]).
#[no_mangle]
pub extern "C" fn proxy_on_http_call_response(
    context_id: u32,
    token: u32,
    num_headers: usize,
    body_size: usize,
    _num_trailers: usize,
) {
    with_vm((), |vm| {
        let pending = vm
            .roots
            .get(&context_id)
            .and_then(|root| root.callouts.try_borrow_mut().ok())
            .and_then(|mut table| table.take(token));
        match pending {
            Some(Pending::Detached(exchange)) => {
                let stream_id = exchange.stream;
                let waits = vm.streams.get(&stream_id).is_some_and(|f| f.awaits(token));
                // Reads the answer (it belongs to the root context) and settles the key first.
                let relay = detached::answered(exchange, num_headers, body_size, waits);
                if waits && abi::set_effective_context(stream_id).is_ok() {
                    if let Some(filter) = vm.streams.get_mut(&stream_id) {
                        filter.relay(&relay);
                    }
                }
            }
            Some(Pending::Store(call)) => {
                // The answer belongs to the root context: read it before switching contexts.
                let reply = remote_store::Reply::read(num_headers, body_size);
                match call {
                    StoreCall::Finishes(call) => remote_store::batch_answered(call, &reply),
                    StoreCall::OrderSettle(shared) => {
                        crate::sequencer::settle_answered(&shared, &reply)
                    }
                    StoreCall::OrderBegin(call) => {
                        let stream = call.stream;
                        let decision = crate::sequencer::began(*call, &reply);
                        if !deliver(vm, stream, token, |f| f.order_answered(decision)) {
                            undelivered(token);
                        }
                    }
                    StoreCall::Claim { stream } => {
                        if !deliver(vm, stream, token, |f| f.claim_answered(&reply)) {
                            undelivered(token);
                        }
                    }
                    StoreCall::Consume { stream } => {
                        if !deliver(vm, stream, token, |f| f.use_answered(&reply)) {
                            undelivered(token);
                        }
                    }
                }
            }
            None => abi::log(
                LogLevel::Debug,
                "an HTTP call answered that this root context does not know",
            ),
        }
    })
}
