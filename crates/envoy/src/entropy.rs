//! Fresh random bytes for owner tokens (fencing) and token nonces: WASI `random_get` in Envoy.

use std::cell::Cell;
use std::hash::{BuildHasher, Hasher};

thread_local! {
    static COUNTER: Cell<u64> = const { Cell::new(0) };
}

/// 16 random bytes. If the host's random source fails, falls back to SipHash under std's
/// per-thread random keys over a counter and the time: still unique per VM, never a panic.
pub fn random16() -> [u8; 16] {
    let mut out = [0u8; 16];
    if getrandom::fill(&mut out).is_ok() {
        return out;
    }
    let count = COUNTER.with(|c| {
        let next = c.get().wrapping_add(1);
        c.set(next);
        next
    });
    let time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let state = std::collections::hash_map::RandomState::new();
    for (i, half) in out.chunks_mut(8).enumerate() {
        let mut hasher = state.build_hasher();
        hasher.write_u64(count);
        hasher.write_u128(time);
        hasher.write_usize(i);
        half.copy_from_slice(&hasher.finish().to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn differs() {
        assert_ne!(super::random16(), super::random16());
    }
}
