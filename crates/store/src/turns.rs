//! One engine operation at a time on each payer's ledger, within this service.
//!
//! Every request of one client charges the same ledger keys (its identity's and its address
//! group's, issue 23), so a busy client's concurrent requests would all read the same value and
//! race to compare-and-set it: all but one lose, read again and retry, and enough of them run
//! out of attempts and answer *contention* — a store error for an honest caller. Taking turns
//! here turns that race into a short queue: a ledger's read and compare-and-set happen while its
//! turn is held, so requests through one service never conflict on a ledger, and conflicts are
//! left to what only the engine can see (another service replica writing the same ledger).
//!
//! Turns are striped: a fixed table of locks, a key's stripe chosen by its (hashed, uniform)
//! bytes. Two payers sharing a stripe only queue behind each other. An operation holds at most
//! one turn at a time (it moves from one payer's ledger to the next), so turns never deadlock.

use idemgate_core::scope::StorageKey;
use tokio::sync::{Mutex, MutexGuard};

/// How many stripes: enough that unrelated busy payers rarely share one, small enough to be a
/// fixed table (each is a few words).
const STRIPES: usize = 256;

/// The table of turns (one per process: every engine call of this service goes through it).
pub struct Turns {
    stripes: [Mutex<()>; STRIPES],
}

/// A held turn on one key: the key, and the stripe's lock until it is dropped.
pub struct Turn<'a> {
    key: StorageKey,
    _held: MutexGuard<'a, ()>,
}

impl Turn<'_> {
    pub fn key(&self) -> &StorageKey {
        &self.key
    }
}

impl Turns {
    pub const fn new() -> Turns {
        Turns {
            stripes: [const { Mutex::const_new(()) }; STRIPES],
        }
    }

    /// Waits for `key`'s turn (first come, first served: tokio's mutex is fair).
    pub async fn take(&self, key: StorageKey) -> Turn<'_> {
        let bytes = key.as_bytes();
        let stripe = usize::from(u16::from_le_bytes([bytes[0], bytes[1]])) % STRIPES;
        Turn {
            key,
            _held: self.stripes[stripe].lock().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_key_is_held_by_one_operation_at_a_time() {
        static TURNS: Turns = Turns::new();
        let inside = Arc::new(AtomicU32::new(0));
        let most = Arc::new(AtomicU32::new(0));
        let key = StorageKey::from_stored([3; 32]);
        let mut tasks = Vec::new();
        for _ in 0..16 {
            let (inside, most) = (inside.clone(), most.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..20 {
                    let turn = TURNS.take(key).await;
                    assert_eq!(turn.key(), &key);
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn other_stripes_are_not_held_up() {
        let turns = Turns::new();
        let _a = turns.take(StorageKey::from_stored([1; 32])).await;
        // Another stripe is free while the first is held (a deadlock would hang the test, which
        // the timeout turns into a failure).
        let b = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            turns.take(StorageKey::from_stored([2; 32])),
        )
        .await;
        assert!(b.is_ok());
    }
}
