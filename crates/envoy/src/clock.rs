//! The clock as the running callback sees it. A callback is one instant for the filter (its host
//! calls take microseconds, the clock counts milliseconds), so the host's clock is read at most
//! once per callback instead of once per use (a claim and the exchange it starts, a settle and
//! the retry-after it answers). [`crate::dispatch`] marks each callback's start and end;
//! [`crate::host::now`] reads through [`callback_now`]. A leaf module, so the host calls below
//! the dispatcher never call back up into it.
#![allow(unsafe_code)]

use core::cell::Cell;
use idemgate_core::time::UnixMillis;

/// `None` outside a callback, `Some(None)` inside one before the first read, `Some(Some(t))`
/// after it.
type CallbackClock = Cell<Option<Option<UnixMillis>>>;

#[cfg(target_arch = "wasm32")]
struct OneThreadClock(CallbackClock);

// SAFETY: wasm32-wasip1 modules run on one thread (no shared memory, no thread spawning), so the
// clock is never reached from two threads.
#[cfg(target_arch = "wasm32")]
unsafe impl Sync for OneThreadClock {}

#[cfg(target_arch = "wasm32")]
static CLOCK: OneThreadClock = OneThreadClock(Cell::new(None));

#[cfg(not(target_arch = "wasm32"))]
std::thread_local! {
    static CLOCK: CallbackClock = const { Cell::new(None) };
}

fn with_clock<T>(f: impl FnOnce(&CallbackClock) -> T) -> T {
    #[cfg(target_arch = "wasm32")]
    return f(&CLOCK.0);
    #[cfg(not(target_arch = "wasm32"))]
    CLOCK.with(f)
}

/// A callback starts: the next read of the time is its one reading.
pub fn callback_begins() {
    with_clock(|clock| clock.set(Some(None)));
}

/// The callback is over: the next one reads the host's clock again.
pub fn callback_ends() {
    with_clock(|clock| clock.set(None));
}

/// The time now: inside a callback, the callback's one reading of `read` (taken on first
/// successful use); outside one (unit tests), `read` itself. `None`: the host's clock failed.
pub fn callback_now(read: impl FnOnce() -> Option<UnixMillis>) -> Option<UnixMillis> {
    with_clock(|clock| match clock.get() {
        Some(Some(now)) => Some(now),
        Some(None) => {
            let now = read();
            if let Some(now) = now {
                clock.set(Some(Some(now)));
            }
            now
        }
        None => read(),
    })
}
