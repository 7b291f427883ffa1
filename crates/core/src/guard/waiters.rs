//! The requests a host holds parked ([`crate::guard::Action::Park`]): duplicates waiting for
//! the answer of a request in flight, by the key they wait on. Bounded per key, per payer and in
//! all, so that waiting costs a VM no more than the bounds below whatever its clients send, and
//! no client takes the room of others; a request over a bound is told so
//! ([`crate::guard::Guarded::parked`] with `false`) and gets 409.

use crate::client::payer::PayerTag;
use crate::client::scope::StorageKey;
use crate::time::Span;
use alloc::vec::Vec;

/// Waiters on one key. A client retrying one key in a loop (or many clients sharing a key in one
/// scope) gets this many answered by the first's answer; the rest are told 409 as before.
pub(crate) const MAX_WAITERS_PER_KEY: usize = 16;

/// Waiters in one VM (one Envoy worker). Each holds an open stream and, on a detached route, its
/// kept body: a worker's waiters stay a small part of what it serves.
pub(crate) const MAX_WAITERS: usize = 1024;

/// Waiters one payer may hold in one VM — the request's first payer, charged as its records are
/// (`docs/semantics.md` §2: an address group, or a verified identity): a quarter of the VM's
/// room, as with the hashing and relay budgets, so a client that parks duplicates of many slow
/// keys leaves the others room to wait (four such clients are needed to fill it).
pub(crate) const MAX_WAITERS_PER_PAYER: usize = MAX_WAITERS / 4;

/// The parked requests, each named by the host's `T` (its stream's id), with the key it waits
/// on and its payer. A list, not a map: it holds at most 1,024 (`MAX_WAITERS`), and is read whole
/// or by key only when a record ends or the tick comes.
#[derive(Debug)]
pub struct Waiters<T> {
    held: Vec<(StorageKey, Option<PayerTag>, T)>,
}

impl<T> Default for Waiters<T> {
    fn default() -> Self {
        Waiters { held: Vec::new() }
    }
}

impl<T> Waiters<T> {
    /// How often a host holding parked requests calls [`crate::guard::Guarded::tick`]: their
    /// shortest pause between questions.
    pub const TICK: Span = Span(50);
}

impl<T: Copy + PartialEq> Waiters<T> {
    /// Holds `who` parked on `key` for `payer` (the action's) if the bounds allow; `false`: it
    /// is not held.
    pub fn admit(&mut self, key: StorageKey, payer: Option<PayerTag>, who: T) -> bool {
        let on_key = self.held.iter().filter(|(k, _, _)| *k == key).count();
        let of_payer = payer.map_or(0, |payer| {
            let of = |(_, p, _): &&(StorageKey, Option<PayerTag>, T)| *p == Some(payer);
            self.held.iter().filter(of).count()
        });
        if self.held.len() >= MAX_WAITERS
            || on_key >= MAX_WAITERS_PER_KEY
            || of_payer >= MAX_WAITERS_PER_PAYER
        {
            return false;
        }
        self.held.push((key, payer, who));
        true
    }

    /// `who` waits no more (answered, or its client gone); nothing if it was not held.
    pub fn leave(&mut self, key: StorageKey, who: T) {
        let held = |(k, _, w): &(StorageKey, Option<PayerTag>, T)| *k == key && *w == who;
        if let Some(at) = self.held.iter().position(held) {
            self.held.swap_remove(at);
        }
    }

    /// Those waiting on `key`: to wake when its record may have changed.
    pub fn on(&self, key: &StorageKey) -> Vec<T> {
        let on_key = self.held.iter().filter(|(k, _, _)| k == key);
        on_key.map(|(_, _, who)| *who).collect()
    }

    /// Every waiter, with its key: to wake on a tick (deadlines; a record finished elsewhere).
    pub fn all(&self) -> Vec<(StorageKey, T)> {
        self.held.iter().map(|(key, _, who)| (*key, *who)).collect()
    }

    /// How many are held.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_per_key_and_in_all_and_freed_on_leaving() {
        let mut waiters = Waiters::default();
        let key = StorageKey::from_stored([1; 32]);
        for who in 0..MAX_WAITERS_PER_KEY {
            assert!(waiters.admit(key, None, who));
        }
        assert!(!waiters.admit(key, None, 99), "over the key's bound");
        waiters.leave(key, 3);
        assert!(waiters.admit(key, None, 99), "a slot freed");
        assert_eq!(waiters.on(&key).len(), MAX_WAITERS_PER_KEY);
        let mut n = MAX_WAITERS_PER_KEY;
        let mut k = 0u32;
        while n < MAX_WAITERS {
            let mut bytes = [0; 32];
            bytes[..4].copy_from_slice(&k.to_be_bytes());
            // Four payers, each within its share, fill the VM.
            let payer = PayerTag([(n % 4) as u8; 8]);
            assert!(waiters.admit(StorageKey::from_stored(bytes), Some(payer), 1000 + n));
            n += 1;
            k += 1;
        }
        let other = StorageKey::from_stored([2; 32]);
        assert!(!waiters.admit(other, None, 5), "over the VM's bound");
        assert!(waiters.on(&other).is_empty());
        assert_eq!(waiters.len(), MAX_WAITERS);
        for (key, who) in waiters.all() {
            waiters.leave(key, who);
        }
        assert!(waiters.is_empty());
        waiters.leave(key, 1); // not held: nothing
        assert!(waiters.is_empty());
    }

    #[test]
    fn one_payer_holds_a_quarter_of_the_room_and_others_still_wait() {
        let mut waiters = Waiters::default();
        let (greedy, other) = (PayerTag([7; 8]), PayerTag([8; 8]));
        let key = |n: usize| {
            let mut bytes = [0; 32];
            bytes[..8].copy_from_slice(&(n as u64).to_be_bytes());
            StorageKey::from_stored(bytes)
        };
        for n in 0..MAX_WAITERS_PER_PAYER {
            assert!(waiters.admit(key(n), Some(greedy), n));
        }
        assert!(
            !waiters.admit(key(9999), Some(greedy), 9999),
            "over the payer's share"
        );
        assert!(
            waiters.admit(key(9999), Some(other), 9999),
            "another payer waits"
        );
        assert!(
            waiters.admit(key(9998), None, 9998),
            "no payer: the other bounds only"
        );
        waiters.leave(key(0), 0);
        assert!(waiters.admit(key(0), Some(greedy), 0), "its slot back");
    }
}
