//! What a `no_std` `.wasm` must bring itself: the global allocator and the panic handler.
//!
//! The allocator is dlmalloc, the algorithm wasi-libc's `malloc` (used through std before) is too,
//! growing wasm memory page by page, behind free lists of small blocks ([`crate::allocator`]). A panic (there should be none: the crate denies
//! `unwrap`/`expect`/`panic!`, but indexing and arithmetic can still panic) logs one critical line,
//! `panicked at FILE:LINE: MESSAGE` (the message when it is a plain string), and traps; Envoy then
//! treats the VM as failed, as it did when std printed the panic to stderr and aborted.
//! Without wasi-libc nothing defines `memcmp` (compiler_builtins brings `memcpy`, `memmove` and
//! `memset`), so it is here too.
#![allow(unsafe_code)]

#[cfg(all(target_arch = "wasm32", not(test)))]
use crate::abi::{self, LogLevel};

#[cfg(all(target_arch = "wasm32", not(test)))]
#[global_allocator]
static ALLOCATOR: crate::allocator::Pooled<dlmalloc::GlobalDlmalloc> =
    crate::allocator::Pooled::new(dlmalloc::GlobalDlmalloc);

#[cfg(all(target_arch = "wasm32", not(test)))]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    let mut line = PanicLine::new();
    match info.location() {
        Some(at) => line.at(at.file(), at.line()),
        None => line.push("panicked"),
    }
    if let Some(message) = info.message().as_str() {
        line.push(": ");
        line.push(message);
    }
    abi::log(LogLevel::Critical, line.as_str());
    core::arch::wasm32::unreachable()
}

/// The panic's log line, in a fixed buffer: no allocation (the panic may be an allocation failure)
/// and no indexing (a panic while building it would re-enter the handler). Longer lines are cut.
#[cfg_attr(not(all(target_arch = "wasm32", not(test))), allow(dead_code))]
struct PanicLine {
    buf: [u8; 256],
    len: usize,
}

#[cfg_attr(not(all(target_arch = "wasm32", not(test))), allow(dead_code))]
impl PanicLine {
    fn new() -> Self {
        PanicLine {
            buf: [0; 256],
            len: 0,
        }
    }

    fn push(&mut self, text: &str) {
        for &b in text.as_bytes() {
            let Some(slot) = self.buf.get_mut(self.len) else {
                return;
            };
            *slot = b;
            self.len += 1;
        }
    }

    /// `panicked at FILE:LINE`.
    fn at(&mut self, file: &str, line: u32) {
        self.push("panicked at ");
        self.push(file);
        self.push(":");
        let mut divisor = 1_000_000_000;
        let mut started = false;
        while divisor > 0 {
            let digit = (line / divisor) % 10;
            if digit != 0 || started || divisor == 1 {
                started = true;
                let d = [b'0' + digit as u8];
                self.push(core::str::from_utf8(&d).unwrap_or("?"));
            }
            divisor /= 10;
        }
    }

    /// The line so far; a character cut at the end is left out.
    fn as_str(&self) -> &str {
        let bytes = self.buf.get(..self.len).unwrap_or_default();
        match core::str::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => core::str::from_utf8(bytes.get(..e.valid_up_to()).unwrap_or_default())
                .unwrap_or_default(),
        }
    }
}

/// C's `memcmp`, which slice and string comparisons compile to.
///
/// # Safety
/// `a` and `b` must each be valid for reads of `n` bytes.
#[cfg(all(target_arch = "wasm32", not(test)))]
#[no_mangle]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    let mut i = 0;
    while i < n {
        // SAFETY: `i < n`, and the caller guarantees `n` readable bytes at each pointer.
        let (x, y) = unsafe { (*a.add(i), *b.add(i)) };
        if x != y {
            return i32::from(x) - i32::from(y);
        }
        i += 1;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::PanicLine;

    #[test]
    fn panic_lines_name_file_line_and_are_cut_at_a_character() {
        let mut line = PanicLine::new();
        line.at("crates/envoy/src/filter.rs", 940);
        line.push(": test-panic");
        assert_eq!(
            line.as_str(),
            "panicked at crates/envoy/src/filter.rs:940: test-panic"
        );
        let mut zero = PanicLine::new();
        zero.at("f.rs", 0);
        assert_eq!(zero.as_str(), "panicked at f.rs:0");
        let mut max = PanicLine::new();
        max.at("f.rs", u32::MAX);
        assert_eq!(max.as_str(), "panicked at f.rs:4294967295");
        let mut long = PanicLine::new();
        long.push(&"a".repeat(255));
        long.push("é");
        assert_eq!(long.as_str(), "a".repeat(255));
    }
}
