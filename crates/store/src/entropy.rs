//! Fresh value versions (see the core's `remote::stored`): 16 random bytes for every write,
//! drawn from the operating system's CSPRNG like before, but [`POOL`] bytes per `getrandom`
//! call instead of 16. A call per version was one system call per operation — about a sixth
//! of the service's system calls on the fleet bench's hot path.
//!
//! The bytes are the OS's own, handed out once each, in order: nothing is derived or reused,
//! so a version is exactly as unpredictable and as unlikely to repeat as one drawn on its own.

use idemgate_core::store::remote::ValueVersion;
use std::sync::{Mutex, PoisonError};

/// Bytes drawn per system call: 256 versions.
const POOL: usize = 4096;
const VERSION: usize = std::mem::size_of::<ValueVersion>();

/// A pool of OS randomness, refilled when it runs out.
pub struct Entropy {
    pool: Mutex<Pool>,
}

struct Pool {
    bytes: [u8; POOL],
    /// The next unused byte; `POOL` when empty.
    next: usize,
}

impl Entropy {
    /// An empty pool (filled on first use), so it can be a `static`.
    pub const fn new() -> Entropy {
        Entropy {
            pool: Mutex::new(Pool {
                bytes: [0; POOL],
                next: POOL,
            }),
        }
    }

    /// A fresh random version; `None` when the OS could not give randomness (the operation
    /// then fails as unavailable, as before).
    pub fn version(&self) -> Option<ValueVersion> {
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        if pool.next + VERSION > POOL {
            getrandom::fill(&mut pool.bytes[..]).ok()?;
            pool.next = 0;
        }
        let start = pool.next;
        let mut version = [0u8; VERSION];
        version.copy_from_slice(&pool.bytes[start..start + VERSION]);
        // Handed out once: wiped, so no byte can be handed out twice even by a bug here.
        pool.bytes[start..start + VERSION].fill(0);
        pool.next = start + VERSION;
        Some(ValueVersion(version))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn versions_never_repeat_across_refills() {
        let entropy = Entropy::new();
        let mut seen = HashSet::new();
        // Three pools' worth: every refill is crossed.
        for _ in 0..3 * POOL / VERSION {
            let version = entropy.version().unwrap();
            assert_ne!(version.0, [0; VERSION], "a wiped slot was handed out");
            assert!(seen.insert(version.0), "a version repeated");
        }
    }
}
