//! What this service replica wrote for the claims it forwarded, kept until their finish, so the
//! owner's finish can skip its read: the core's exchange assumes the key still holds that claim
//! and the compare-and-set on its version proves it (see the core's `Operation::speculate`).
//!
//! A hint, never a source of truth: a value that is stale (the claim was taken over, expired,
//! or finished through another replica) only costs the compare-and-set that fails and answers
//! with what Redis holds. A finish that reaches another replica than its claim (several replicas
//! behind one address) finds nothing here and reads first. Bounded: two generations of at most
//! [`GENERATION`] values each; a claim whose finish never comes (the outcome was in doubt, the
//! Envoy went away) is dropped with its generation.

use idemgate_core::client::scope::StorageKey;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Values per generation: about 150 bytes each with its key, so at most ~10 MB in all.
const GENERATION: usize = 32_768;

#[derive(Default)]
pub struct Recall {
    generations: Mutex<Generations>,
}

#[derive(Default)]
struct Generations {
    current: HashMap<StorageKey, Vec<u8>>,
    previous: HashMap<StorageKey, Vec<u8>>,
}

impl Recall {
    /// Keeps the value written for a claim on `key` (replacing any older one).
    pub fn remember(&self, key: StorageKey, value: Vec<u8>) {
        let mut g = self
            .generations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if g.current.len() >= GENERATION {
            g.previous = std::mem::take(&mut g.current);
        }
        g.previous.remove(&key);
        g.current.insert(key, value);
    }

    /// Takes the value kept for `key`: a finish uses it once, whatever its outcome.
    pub fn take(&self, key: &StorageKey) -> Option<Vec<u8>> {
        let mut g = self
            .generations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let current = g.current.remove(key);
        let previous = g.previous.remove(key);
        current.or(previous)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_taken_once_and_bounded_to_two_generations() {
        let recall = Recall::default();
        let key = |n: usize| {
            let mut bytes = [0u8; 32];
            bytes[..8].copy_from_slice(&(n as u64).to_be_bytes());
            StorageKey::from_stored(bytes)
        };
        recall.remember(key(0), vec![1]);
        recall.remember(key(0), vec![2]);
        assert_eq!(recall.take(&key(0)), Some(vec![2]));
        assert_eq!(recall.take(&key(0)), None);
        for n in 0..GENERATION * 2 + 1 {
            recall.remember(key(n), vec![3]);
        }
        // The oldest generation is gone; the last two are kept.
        assert_eq!(recall.take(&key(0)), None);
        assert_eq!(recall.take(&key(GENERATION)), Some(vec![3]));
        assert_eq!(recall.take(&key(GENERATION * 2)), Some(vec![3]));
    }
}
