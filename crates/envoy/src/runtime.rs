//! What a `no_std` `.wasm` must bring itself: the global allocator and the panic handler.
//!
//! The allocator is dlmalloc, the algorithm wasi-libc's `malloc` (used through std before) is too,
//! growing wasm memory page by page. A panic (there should be none: the crate denies
//! `unwrap`/`expect`/`panic!`, but indexing and arithmetic can still panic) logs one critical line,
//! `panicked at FILE:LINE: MESSAGE` (the message when it is a plain string), and traps; Envoy then
//! treats the VM as failed, as it did when std printed the panic to stderr and aborted.
//! Without wasi-libc nothing defines `memcmp` (compiler_builtins brings `memcpy`, `memmove` and
//! `memset`), so it is here too.
#![allow(unsafe_code)]

use crate::abi::{self, LogLevel};
use alloc::string::String;
use core::panic::PanicInfo;

#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

#[panic_handler]
fn panic(info: &PanicInfo<'_>) -> ! {
    let mut line = String::from("panicked");
    if let Some(at) = info.location() {
        line.push_str(" at ");
        line.push_str(at.file());
        line.push(':');
        push_decimal(&mut line, at.line());
    }
    if let Some(message) = info.message().as_str() {
        line.push_str(": ");
        line.push_str(message);
    }
    abi::log(LogLevel::Critical, &line);
    core::arch::wasm32::unreachable()
}

fn push_decimal(out: &mut String, mut n: u32) {
    let mut digits = [0u8; 10];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[i..] {
        out.push(char::from(d));
    }
}

/// C's `memcmp`, which slice and string comparisons compile to.
///
/// # Safety
/// `a` and `b` must each be valid for reads of `n` bytes.
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
