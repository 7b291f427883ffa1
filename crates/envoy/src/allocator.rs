//! The filter's global allocator: free lists of small blocks in front of dlmalloc.
//!
//! A request makes about a hundred small allocations (header copies, vectors that grow, the
//! core's records), and dlmalloc's `malloc` and `free` cost about 80 wasm operators each, plus
//! its size check on free: about a tenth of a raw keyed request's work (`make bench-work`'s
//! profile). Blocks of at most [`SMALL`] bytes are therefore rounded up to a power of two and, once
//! freed, kept on a list per size to be handed out again: a `malloc` or `free` of a small block is
//! then a few operators. Rust passes the layout on free, so a block needs no header to find its
//! list. Freed small blocks are not given back to dlmalloc: the lists hold at most what was live
//! at once, and are reused by the next requests (a worker's VM serves requests one after another,
//! so its peak is a few requests' worth). Larger blocks, and alignments above 8, go to dlmalloc
//! as before.
#![allow(unsafe_code)]

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::ptr;

/// The largest block the lists keep.
pub const SMALL: usize = 256;
/// The smallest class: a freed block holds the list's next pointer.
const MIN_SHIFT: u32 = 3;
/// Classes 8, 16, 32, 64, 128 and 256 bytes.
const CLASSES: usize = 6;
/// dlmalloc's own alignment on wasm32 (and more than any small Rust type needs there).
const MAX_ALIGN: usize = 8;

/// `backing` with free lists of small blocks in front of it.
pub struct Pooled<A> {
    backing: A,
    heads: UnsafeCell<[*mut u8; CLASSES]>,
}

// SAFETY: the filter's `.wasm` has no threads (Envoy runs one VM, with its own linear memory, per
// worker thread), so the lists are never touched from two threads; native unit tests use one
// `Pooled` per test thread.
unsafe impl<A: Sync> Sync for Pooled<A> {}

impl<A> Pooled<A> {
    pub const fn new(backing: A) -> Self {
        Pooled {
            backing,
            heads: UnsafeCell::new([ptr::null_mut(); CLASSES]),
        }
    }
}

/// The class of a block of `layout`, if the lists keep it.
#[inline]
fn class(layout: &Layout) -> Option<usize> {
    if layout.size() > SMALL || layout.align() > MAX_ALIGN {
        return None;
    }
    let bits = usize::BITS - (layout.size().max(1) - 1).leading_zeros();
    Some(bits.saturating_sub(MIN_SHIFT) as usize)
}

/// The bytes a block of class `class` has.
#[inline]
fn class_size(class: usize) -> usize {
    1 << (class as u32 + MIN_SHIFT)
}

// SAFETY: small blocks come from `backing` at their class's whole size and alignment 8, so each
// fits any layout of its class and holds a list pointer; a block is on a list only after its
// owner freed it, and is taken off before it is handed out again. The rest is `backing`'s.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Pooled<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(class) = class(&layout) else {
            // SAFETY: the caller's contract, passed on.
            return unsafe { self.backing.alloc(layout) };
        };
        // SAFETY: one thread (see `Sync`), and no reference to the lists outlives this call.
        let heads = unsafe { &mut *self.heads.get() };
        let Some(head) = heads.get_mut(class) else {
            // SAFETY: as above.
            return unsafe { self.backing.alloc(layout) };
        };
        if head.is_null() {
            // A fresh block of the whole class, so that any size of the class can reuse it.
            // SAFETY: a power of two of at least 8 bytes, aligned to 8: a valid, non-zero layout.
            return unsafe {
                self.backing.alloc(Layout::from_size_align_unchecked(
                    class_size(class),
                    MAX_ALIGN,
                ))
            };
        }
        let block = *head;
        // SAFETY: a freed block of this class, at least 8 bytes and aligned to 8, holding the next.
        *head = unsafe { block.cast::<*mut u8>().read() };
        block
    }

    #[inline]
    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        let Some(class) = class(&layout) else {
            // SAFETY: the caller's contract, passed on.
            return unsafe { self.backing.dealloc(block, layout) };
        };
        // SAFETY: one thread (see `Sync`), and no reference to the lists outlives this call.
        let heads = unsafe { &mut *self.heads.get() };
        if let Some(head) = heads.get_mut(class) {
            // SAFETY: the block was handed out for this class: at least 8 bytes, aligned to 8, and
            // its owner gives it up.
            unsafe { block.cast::<*mut u8>().write(*head) };
            *head = block;
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if class(&layout).is_none() {
            // SAFETY: the caller's contract, passed on.
            return unsafe { self.backing.alloc_zeroed(layout) };
        }
        // SAFETY: the caller's contract, passed on.
        let block = unsafe { self.alloc(layout) };
        if !block.is_null() {
            // SAFETY: the block has at least `layout.size()` bytes.
            unsafe { ptr::write_bytes(block, 0, layout.size()) };
        }
        block
    }

    #[inline]
    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size` rounded to `layout.align()` does not overflow.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (class(&layout), class(&new)) {
            // SAFETY: the caller's contract, passed on.
            (None, None) => unsafe { self.backing.realloc(block, layout, new_size) },
            (Some(old), Some(now)) if old == now => block,
            _ => {
                // SAFETY: `new` is valid and non-zero (the caller's contract); both blocks hold
                // the bytes copied, and the old one is freed with the layout it was given.
                unsafe {
                    let moved = self.alloc(new);
                    if !moved.is_null() {
                        ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                        self.dealloc(block, layout);
                    }
                    moved
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::System;

    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size, 1).unwrap()
    }

    #[test]
    fn sizes_fall_in_power_of_two_classes() {
        let classes: Vec<_> = [1, 8, 9, 16, 17, 32, 33, 64, 65, 128, 129, 256]
            .into_iter()
            .map(|size| class(&layout(size)))
            .collect();
        let expected = [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5].map(Some);
        assert_eq!(classes, expected);
        assert_eq!(class(&layout(257)), None);
        assert_eq!(class(&Layout::from_size_align(16, 16).unwrap()), None);
        for size in 1..=SMALL {
            let c = class(&layout(size)).unwrap();
            assert!(class_size(c) >= size && (c == 0 || class_size(c - 1) < size));
        }
    }

    #[test]
    fn a_freed_small_block_is_handed_out_again_and_contents_survive_reallocs() {
        let pool = Pooled::new(System);
        unsafe {
            let a = pool.alloc(layout(20));
            pool.dealloc(a, layout(20));
            let b = pool.alloc(layout(30));
            assert_eq!(a, b, "the same class reuses the block");
            for i in 0..30 {
                b.add(i).write(i as u8);
            }
            let c = pool.realloc(b, layout(30), 32);
            assert_eq!(b, c, "within its class a block stays where it is");
            let d = pool.realloc(c, layout(32), 200);
            let e = pool.realloc(d, layout(200), 1000);
            let f = pool.realloc(e, layout(1000), 100);
            for i in 0..30 {
                assert_eq!(f.add(i).read(), i as u8);
            }
            let z = pool.alloc_zeroed(layout(64));
            assert!((0..64).all(|i| z.add(i).read() == 0));
            pool.dealloc(z, layout(64));
            pool.dealloc(f, layout(100));
        }
    }
}
