//! Fresh random bytes for owner tokens (fencing) and token nonces: WASI `random_get` in Envoy.

use core::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// 16 random bytes. If the host's random source fails, falls back to SHA-256 over a per-VM counter
/// and the host's clock: still unique per VM, never a panic. (The `.wasm` has no std, so no
/// std-seeded hasher to mix with, and std's seeding asked the same failing source anyway.)
pub fn random16() -> [u8; 16] {
    let mut out = [0u8; 16];
    if getrandom::fill(&mut out).is_ok() {
        return out;
    }
    let count = COUNTER.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
    let time = crate::abi::current_time_nanos().unwrap_or(0);
    let mut input = [0u8; 16];
    input[..8].copy_from_slice(&count.to_le_bytes());
    input[8..].copy_from_slice(&time.to_le_bytes());
    let digest = idemgate_core::hash::sha256(&input);
    out.copy_from_slice(&digest[..16]);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn differs() {
        assert_ne!(super::random16(), super::random16());
    }
}
