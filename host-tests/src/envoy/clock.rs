//! The simulated wall clock: tests move it (forward, or backwards to inject a clock jump); every
//! worker reads the same one, as Envoy's workers read one system clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Unix time of a fresh clock: 2023-11-14T22:13:20Z.
pub const START_MS: u64 = 1_700_000_000_000;

/// Shared by every worker of one simulated Envoy.
#[derive(Debug, Clone)]
pub struct Clock {
    nanos: Arc<AtomicU64>,
    /// What the monotonic clock (WASI `clock_time_get` id 1) reads; never goes backwards.
    monotonic: Arc<AtomicU64>,
}

impl Default for Clock {
    fn default() -> Self {
        Clock {
            nanos: Arc::new(AtomicU64::new(START_MS * 1_000_000)),
            monotonic: Arc::new(AtomicU64::new(1_000_000_000)),
        }
    }
}

impl Clock {
    pub fn now_nanos(&self) -> u64 {
        self.nanos.load(Ordering::SeqCst)
    }

    pub fn now_ms(&self) -> u64 {
        self.now_nanos() / 1_000_000
    }

    pub fn monotonic_nanos(&self) -> u64 {
        self.monotonic.load(Ordering::SeqCst)
    }

    pub fn advance(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(nanos, Ordering::SeqCst);
        self.monotonic.fetch_add(nanos, Ordering::SeqCst);
    }

    /// A wall-clock jump backwards (NTP step): the monotonic clock is unaffected.
    pub fn rewind(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let _ = self
            .nanos
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| {
                Some(now.saturating_sub(nanos))
            });
    }

    pub fn set_ms(&self, unix_ms: u64) {
        self.nanos
            .store(unix_ms.saturating_mul(1_000_000), Ordering::SeqCst);
    }
}
