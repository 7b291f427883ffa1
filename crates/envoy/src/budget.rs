//! The VM's budget for request bodies being fingerprinted (issue 14, finding 8). A stream's body
//! is hashed as it passes; in `json` / `fields` mode the hasher keeps the canonical encoding of the
//! objects still open, which can approach the bytes seen so far. One stream is bounded by
//! `max_request_body`, but many concurrent streams (HTTP/2 multiplexes hundreds on a connection)
//! multiply it, and a failed allocation would trap the VM — every stream of the worker lost. So
//! every stream reserves the body bytes it has fed the hasher from one per-VM budget
//! (`hashing_budget`) before feeding more; a stream that would go over it is answered 503
//! `hashing_budget_exceeded` instead. A reservation is returned when its stream's hashing ends,
//! however it ends (claim, answer, reset): [`Reservation`] gives it back on drop.

#[allow(unused_imports)]
use crate::prelude::*;
use alloc::rc::Rc;
use core::cell::Cell;

/// Bytes reserved by the VM's hashing streams (shared by every request context of the VM).
#[derive(Debug, Default)]
pub struct HashingBudget {
    used: Cell<u64>,
}

impl HashingBudget {
    /// Bytes reserved now (for tests and logs).
    pub fn used(&self) -> u64 {
        self.used.get()
    }
}

/// One stream's share of the budget.
#[derive(Debug)]
pub struct Reservation {
    budget: Rc<HashingBudget>,
    bytes: u64,
}

impl Reservation {
    pub fn new(budget: Rc<HashingBudget>) -> Reservation {
        Reservation { budget, bytes: 0 }
    }

    /// Reserves `more` bytes if the VM's total stays within `limit`; `false` leaves it unchanged.
    pub fn grow(&mut self, more: u64, limit: u64) -> bool {
        let used = self.budget.used.get();
        match used.checked_add(more) {
            Some(total) if total <= limit => {
                self.budget.used.set(total);
                self.bytes += more;
                true
            }
            _ => false,
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let used = self.budget.used.get();
        self.budget.used.set(used.saturating_sub(self.bytes));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_share_one_limit_and_are_returned_on_drop() {
        let budget = Rc::new(HashingBudget::default());
        let mut a = Reservation::new(Rc::clone(&budget));
        let mut b = Reservation::new(Rc::clone(&budget));
        assert!(a.grow(600, 1000));
        assert!(!b.grow(500, 1000), "over the VM's budget");
        assert!(b.grow(400, 1000));
        assert_eq!(budget.used(), 1000);
        drop(a);
        assert_eq!(budget.used(), 400);
        assert!(b.grow(600, 1000));
        drop(b);
        assert_eq!(budget.used(), 0);
        let mut c = Reservation::new(Rc::clone(&budget));
        assert!(!c.grow(u64::MAX, u64::MAX - 1));
    }
}
