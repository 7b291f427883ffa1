//! The host a rule test drives the whole guard with: one client at one address, a clock the test
//! sets, owner tokens counted up, and a VM's fresh budgets — what the filter gives the core, and
//! nothing it would not.

use crate::client::identity::{ScopeHashes, Unreadable};
use crate::guard::Host;
use crate::request::budget::Budget;
use crate::{OwnerToken, UnixMillis};
use std::cell::Cell;
use std::prelude::rust_2021::Vec;
use std::rc::Rc;

pub(super) struct Edge {
    now: Cell<UnixMillis>,
    owners: Cell<u8>,
    budget: Rc<Budget>,
    relay: Rc<Budget>,
    scopes: ScopeHashes,
}

impl Edge {
    /// The host, its clock at `now`.
    pub(super) fn at(now: UnixMillis) -> Edge {
        Edge {
            now: Cell::new(now),
            owners: Cell::new(0),
            budget: Rc::new(Budget::default()),
            relay: Rc::new(Budget::default()),
            scopes: ScopeHashes::default(),
        }
    }

    /// Moves the clock to `secs` (unix seconds).
    pub(super) fn set_secs(&self, secs: u64) {
        self.now.set(UnixMillis(secs * 1000));
    }
}

impl Host for Edge {
    fn property(&self, _path: &[&str]) -> Result<Option<Vec<u8>>, Unreadable> {
        Ok(Some(b"192.0.2.7:40000".to_vec()))
    }
    fn now(&self) -> Option<UnixMillis> {
        Some(self.now.get())
    }
    fn nonce(&self) -> [u8; 16] {
        [9; 16]
    }
    fn owner(&self) -> OwnerToken {
        self.owners.set(self.owners.get() + 1);
        OwnerToken([self.owners.get(); 16])
    }
    fn scopes(&self) -> &ScopeHashes {
        &self.scopes
    }
    fn budget(&self) -> Rc<Budget> {
        Rc::clone(&self.budget)
    }
    fn relay_budget(&self) -> Rc<Budget> {
        Rc::clone(&self.relay)
    }
}
