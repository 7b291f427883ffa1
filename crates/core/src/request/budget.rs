//! A VM's byte budgets, each shared per peer group: [`Budget`] is the type of both. One holds the
//! request bodies being fingerprinted (`hashing_budget`, below); the other the answers Envoy may
//! be buffering for detached exchanges (`relay_budget`, at the end).
//!
//! The VM's budget for request bodies being fingerprinted (hardening finding 8; shared per peer
//! like the store's shares; `crate::guard::Intake::charge` reserves from it). A stream's body is
//! hashed as it passes; in `json` / `fields` mode the hasher keeps the canonical encoding of the
//! objects still open, which can approach the bytes seen so far, and where a key source reads the
//! body, the sequencer reads it, or a detached exchange will send it, the host keeps a copy of
//! it too. One stream is bounded by `max_request_body` (per copy), but many concurrent streams
//! (HTTP/2 multiplexes hundreds on a connection) multiply it, and a failed allocation would trap
//! the VM — every stream of the worker lost. So every stream reserves the body bytes it keeps (each
//! copy counted) from one per-VM budget (`hashing_budget`) before feeding more; a stream that would
//! go over it is answered 503 `hashing_budget_exceeded` instead.
//!
//! The budget is shared per peer: the streams of one peer group
//! (`crate::client::payer::Shares::peer_group`: the client's address, an IPv6 address's /64) hold
//! at most `hashing_budget_per_peer` of it together, so one client holding hundreds of slow bodies
//! open takes its own part, not the whole budget, and other clients' bodies still pass.
//!
//! A reservation is returned when what it covers is dropped, however the stream ends (claim,
//! answer, reset): [`Reservation`] gives its bytes back on drop, to the VM's total and to its
//! peer's, and a peer with nothing reserved has no entry (the table holds only peers with a body
//! in progress).
//!
//! The relay budget: a detached exchange's answer is buffered whole by Envoy (its async client)
//! before the filter sees any of it, so each exchange in flight may cost the worker its answer's
//! size. Envoy sets no bound of its own there: measured in Envoy 1.40, with an app sending half of
//! a 20 MB answer and then pausing, `server.memory_allocated` rose by 10.5 MB while the default
//! `upstream.max_body` was 8 MiB — the filter only declines to read a body over that bound. So
//! the budget counts each exchange at the bound the app's answers are expected to stay within
//! (the app is the operator's own; one answering past it costs more). An exchange reserves
//! `upstream.max_body` from the VM's `relay_budget` (its peer group at most
//! `relay_budget_per_peer`) once its claim is won, before anything is sent; the filter keeps the
//! reservation with the exchange and drops it when the answer has been read or the exchange ends
//! any other way. An exchange that does not fit is answered 503 `relay_budget_exceeded` and its
//! claim released: nothing was forwarded, so the retry runs.

use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};

/// Bytes reserved from one of the VM's budgets (shared by every request context of the VM).
#[derive(Debug, Default)]
pub struct Budget {
    used: Cell<u64>,
    /// Bytes reserved per peer group; only groups with bytes reserved have an entry.
    peers: RefCell<PeerTable>,
}

/// Bytes reserved per peer group, sorted by group: found by binary search. A sorted list rather
/// than a `BTreeMap`, whose code would cost the `.wasm` several KB; it holds one entry per peer
/// with a body in progress, so its insertions move little.
#[derive(Debug, Default)]
struct PeerTable(Vec<(Rc<[u8]>, u64)>);

impl PeerTable {
    fn find(&self, peer: &[u8]) -> Result<usize, usize> {
        self.0.binary_search_by(|(p, _)| (**p).cmp(peer))
    }

    fn get(&self, peer: &[u8]) -> Option<u64> {
        self.find(peer).ok().map(|i| self.0[i].1)
    }

    /// Sets `peer`'s bytes; zero removes its entry.
    fn set(&mut self, peer: &Rc<[u8]>, bytes: u64) {
        match (self.find(peer), bytes) {
            (Ok(i), 0) => {
                self.0.remove(i);
            }
            (Ok(i), _) => self.0[i].1 = bytes,
            (Err(_), 0) => {}
            (Err(i), _) => self.0.insert(i, (Rc::clone(peer), bytes)),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.len()
    }
}

impl Budget {
    /// Bytes reserved now (for tests and logs).
    pub fn used(&self) -> u64 {
        self.used.get()
    }

    /// Bytes the peer group `peer` has reserved now.
    #[cfg(test)]
    pub(crate) fn used_by(&self, peer: &[u8]) -> u64 {
        self.peers
            .try_borrow()
            .ok()
            .and_then(|peers| peers.get(peer))
            .unwrap_or(0)
    }

    /// How many peer groups hold a reservation now.
    #[cfg(test)]
    pub(crate) fn peers(&self) -> usize {
        self.peers.try_borrow().map_or(0, |peers| peers.len())
    }
}

/// The budget's two limits: the VM's total and one peer group's part of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) total: u64,
    pub(crate) per_peer: u64,
}

/// One stream's share of the budget (or a part split off it), charged to its peer group.
#[derive(Debug)]
pub struct Reservation {
    budget: Rc<Budget>,
    peer: Rc<[u8]>,
    bytes: u64,
}

impl Reservation {
    pub fn new(budget: Rc<Budget>, peer: Rc<[u8]>) -> Reservation {
        Reservation {
            budget,
            peer,
            bytes: 0,
        }
    }

    /// Bytes this reservation holds.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Reserves `more` bytes if the VM's total stays within `limits.total` and this peer group's
    /// within `limits.per_peer`; `false` leaves everything unchanged.
    pub(crate) fn grow(&mut self, more: u64, limits: Limits) -> bool {
        let Some(total) = self
            .budget
            .used
            .get()
            .checked_add(more)
            .filter(|total| *total <= limits.total)
        else {
            return false;
        };
        let Ok(mut peers) = self.budget.peers.try_borrow_mut() else {
            return false;
        };
        let held = peers.get(&self.peer).unwrap_or(0);
        let Some(mine) = held
            .checked_add(more)
            .filter(|mine| *mine <= limits.per_peer)
        else {
            return false;
        };
        if more == 0 {
            return true;
        }
        peers.set(&self.peer, mine);
        self.budget.used.set(total);
        self.bytes += more;
        true
    }

    /// Moves `bytes` (at most what this holds) into a reservation of their own, for a copy that
    /// outlives the rest of what this one covers (a detached exchange's body). Nothing is
    /// reserved or returned: the VM's and the peer's totals stay as they are.
    pub(crate) fn split(&mut self, bytes: u64) -> Reservation {
        let moved = bytes.min(self.bytes);
        self.bytes -= moved;
        Reservation {
            budget: Rc::clone(&self.budget),
            peer: Rc::clone(&self.peer),
            bytes: moved,
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.bytes == 0 {
            return;
        }
        let used = self.budget.used.get();
        self.budget.used.set(used.saturating_sub(self.bytes));
        // Borrowed only inside `grow` and here, never across a call out: always free. Were it
        // not, the entry would stay over-counted (never under), which only refuses sooner.
        if let Ok(mut peers) = self.budget.peers.try_borrow_mut() {
            let left = peers
                .get(&self.peer)
                .map_or(0, |held| held.saturating_sub(self.bytes));
            peers.set(&self.peer, left);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;

    const WIDE: Limits = Limits {
        total: 1000,
        per_peer: 1000,
    };

    fn reservation(budget: &Rc<Budget>, peer: &str) -> Reservation {
        Reservation::new(Rc::clone(budget), Rc::from(peer.as_bytes()))
    }

    #[test]
    fn reservations_share_one_limit_and_are_returned_on_drop() {
        let budget = Rc::new(Budget::default());
        let mut a = reservation(&budget, "10.0.0.1");
        let mut b = reservation(&budget, "10.0.0.2");
        assert!(a.grow(600, WIDE));
        assert!(!b.grow(500, WIDE), "over the VM's budget");
        assert!(b.grow(400, WIDE));
        assert_eq!(budget.used(), 1000);
        drop(a);
        assert_eq!(budget.used(), 400);
        assert!(b.grow(600, WIDE));
        drop(b);
        assert_eq!(budget.used(), 0);
        let mut c = reservation(&budget, "10.0.0.3");
        let max = Limits {
            total: u64::MAX - 1,
            per_peer: u64::MAX - 1,
        };
        assert!(!c.grow(u64::MAX, max));
        assert_eq!((budget.used(), budget.peers()), (0, 0));
    }

    #[test]
    fn one_peer_holds_at_most_its_part_and_others_still_reserve() {
        let budget = Rc::new(Budget::default());
        let limits = Limits {
            total: 1000,
            per_peer: 300,
        };
        // Many streams of one peer: together no more than its part.
        let mut flood: Vec<Reservation> = (0..10).map(|_| reservation(&budget, "a")).collect();
        let granted = flood
            .iter_mut()
            .map(|r| r.grow(100, limits))
            .filter(|granted| *granted)
            .count();
        assert_eq!(granted, 3);
        assert_eq!(budget.used_by(b"a"), 300);
        assert!(!flood[9].grow(1, limits), "past its part, even by one byte");
        // Another peer gets its own part, and a third one too, up to the VM's total.
        let mut b = reservation(&budget, "b");
        assert!(b.grow(300, limits));
        let mut c = reservation(&budget, "c");
        assert!(c.grow(300, limits));
        let mut d = reservation(&budget, "d");
        assert!(!d.grow(200, limits), "the VM's total still applies");
        assert!(d.grow(100, limits));
        assert_eq!(budget.used(), 1000);
        // Refusals changed nothing.
        assert_eq!(budget.used_by(b"d"), 100);
        drop(flood);
        assert_eq!((budget.used(), budget.used_by(b"a")), (700, 0));
        assert!(d.grow(200, limits));
    }

    #[test]
    fn peers_with_nothing_reserved_leave_the_table() {
        let budget = Rc::new(Budget::default());
        let mut a1 = reservation(&budget, "a");
        let mut a2 = reservation(&budget, "a");
        let mut b = reservation(&budget, "b");
        let empty = reservation(&budget, "e");
        assert!(a1.grow(10, WIDE) && a2.grow(20, WIDE) && b.grow(5, WIDE));
        assert!(reservation(&budget, "z").grow(0, WIDE));
        assert_eq!(budget.peers(), 2, "a zero reservation adds no entry");
        drop(a1);
        assert_eq!((budget.used_by(b"a"), budget.peers()), (20, 2));
        drop(a2);
        drop(empty);
        assert_eq!((budget.used_by(b"a"), budget.peers()), (0, 1));
        drop(b);
        assert_eq!((budget.used(), budget.peers()), (0, 0));
        // Many peers come and go: the table holds only those with bytes reserved.
        for n in 0..1000 {
            let mut r = reservation(&budget, &format!("10.0.{}.{}", n / 256, n % 256));
            assert!(r.grow(1, WIDE));
        }
        assert_eq!((budget.used(), budget.peers()), (0, 0));
    }

    #[test]
    fn a_split_part_is_returned_when_it_is_dropped() {
        let budget = Rc::new(Budget::default());
        let mut stream = reservation(&budget, "a");
        assert!(stream.grow(300, WIDE));
        let copy = stream.split(100);
        assert_eq!((stream.bytes(), copy.bytes()), (200, 100));
        assert_eq!((budget.used(), budget.used_by(b"a")), (300, 300));
        drop(stream);
        assert_eq!((budget.used(), budget.used_by(b"a")), (100, 100));
        drop(copy);
        assert_eq!((budget.used(), budget.peers()), (0, 0));
        // A split asks for no more than there is.
        let mut small = reservation(&budget, "a");
        assert!(small.grow(10, WIDE));
        let all = small.split(50);
        assert_eq!((small.bytes(), all.bytes()), (0, 10));
        drop(small);
        assert_eq!(budget.used(), 10);
        drop(all);
        assert_eq!((budget.used(), budget.peers()), (0, 0));
    }
}
