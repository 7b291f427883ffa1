//! Callouts the root context owns: every `proxy_http_call` the filter makes is registered here
//! under its token, and its answer (`proxy_on_http_call_response(root_context_id, token, ..)`) is
//! routed from here — whether or not the stream that made the call still exists.
//!
//! Why the root and not the stream: in proxy-wasm-cpp-host an HTTP call belongs to the root
//! context, and Envoy keeps it running when the client's stream is destroyed. What a pending call
//! needs to finish its work therefore lives in the table entry, never in the stream: a detached
//! exchange carries its key, owner token and shared state; the stream, if it still exists when the
//! answer comes, is only told what to send to its client. Tokens are per root context, so each
//! root has its own table.
//!
//! Kinds of callouts are variants of [`Pending`]; a new kind (e.g. a remote store request) adds a
//! variant and its arm in [`crate::dispatch`]'s `proxy_on_http_call_response`.

use crate::detached::Exchange;
use crate::id_map::IdMap;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::remote_store::StoreCall;

/// A callout waiting for its answer.
#[non_exhaustive]
pub enum Pending {
    /// A claimed request sent upstream by the edge itself ([`crate::detached`]).
    Detached(Exchange),
    /// An operation on the remote store service ([`crate::remote_store`]).
    Store(StoreCall),
}

/// The pending callouts of one root context, by token.
#[derive(Default)]
pub struct CalloutTable {
    pending: IdMap<Pending>,
}

impl CalloutTable {
    /// Registers a callout the host accepted under `token`. A token the host reuses while its
    /// first use is pending (it never does) replaces the older entry, which is returned.
    pub fn insert(&mut self, token: u32, pending: Pending) -> Option<Pending> {
        self.pending.insert(token, pending)
    }

    /// Removes and returns the callout answered under `token`; `None` for a token this table
    /// never registered (e.g. made before a reconfiguration by another root).
    pub fn take(&mut self, token: u32) -> Option<Pending> {
        self.pending.remove(&token)
    }

    /// Callouts in flight (for memory accounting and tests).
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

/// Registers a callout the host accepted under `token` in `shared`'s table; `false` if the table
/// could not be borrowed (never expected: it is not held across callbacks). The caller then fails
/// its request and gives back what it claimed, rather than leaving an answer with no entry to
/// find (issue 22: no silent fallback).
pub fn register(shared: &crate::root::Shared, token: u32, pending: Pending) -> bool {
    match shared.callouts.try_borrow_mut() {
        Ok(mut table) => {
            table.insert(token, pending);
            true
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use crate::root::{OwnerTokens, Shared};
    use alloc::rc::Rc;
    use core::cell::{Cell, RefCell};
    use idemgate_core::policy::Policy;
    use idemgate_core::scope::StorageKey;
    use idemgate_core::time::UnixMillis;

    fn exchange(shared: &Rc<Shared>, stream: u32) -> Pending {
        Pending::Detached(Exchange {
            shared: Rc::clone(shared),
            key: StorageKey::from_stored([stream as u8; 32]),
            owner: shared.owners.next(),
            stream,
            claimed_at: Some(UnixMillis(0)),
            kind: idemgate_core::policy::RouteKind::Api,
            via: idemgate_core::policy::Via::Reentry,
            order: None,
        })
    }

    #[test]
    fn answers_are_found_by_token_once_whatever_became_of_the_stream() {
        let shared = Rc::new(Shared {
            policy: Rc::new(Policy::defaults()),
            metrics: Metrics::default(),
            debug: Cell::new(false),
            settle_updates: false,
            owners: OwnerTokens::new([7; 16]),
            callouts: Rc::new(RefCell::new(CalloutTable::default())),
            scope_tag: Default::default(),
            hashing: Rc::default(),
        });
        let mut table = CalloutTable::default();
        assert!(table.insert(1, exchange(&shared, 10)).is_none());
        assert!(table.insert(2, exchange(&shared, 11)).is_none());
        assert_eq!(table.len(), 2);
        // The entry carries the stream id; whether that stream still exists is the dispatcher's
        // question, not the table's: the entry is there either way.
        let Some(Pending::Detached(first)) = table.take(1) else {
            panic!("token 1 is pending")
        };
        assert_eq!(first.stream, 10);
        assert!(table.take(1).is_none(), "an answer is routed once");
        assert!(table.take(99).is_none(), "an unknown token finds nothing");
        assert_eq!(table.len(), 1);
        assert!(table.take(2).is_some());
        assert!(table.is_empty());
    }
}
