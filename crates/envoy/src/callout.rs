//! Callouts the root context owns: every `proxy_http_call` the filter makes is registered under its
//! token, and its answer (`proxy_on_http_call_response(root_context_id, token, ..)`) is routed from
//! here — whether or not the stream that made the call still exists.
//!
//! Why the root and not the stream: in proxy-wasm-cpp-host an HTTP call belongs to the root
//! context, and Envoy keeps it running when the client's stream is destroyed. What a pending call
//! needs to finish its work therefore lives in the table entry, never in the stream: a detached
//! exchange carries its key, owner token and shared state; the stream, if it still exists when the
//! answer comes, is only told what to send to its client. Tokens are per root context, so each
//! root has its own table.
//!
//! The table knows nothing of what it holds ([`crate::shared::Pending`] names the kinds of
//! callouts; a new kind adds a variant there and its arm in [`crate::dispatch`]'s
//! `proxy_on_http_call_response`), so it sits below every module that makes callouts.

use crate::id_map::IdMap;
#[allow(unused_imports)]
use crate::prelude::*;

/// The pending callouts of one root context, by token.
pub struct CalloutTable<P> {
    pending: IdMap<P>,
}

impl<P> Default for CalloutTable<P> {
    fn default() -> Self {
        CalloutTable {
            pending: IdMap::default(),
        }
    }
}

impl<P> CalloutTable<P> {
    /// Registers a callout the host accepted under `token`. A token the host reuses while its
    /// first use is pending (it never does) replaces the older entry, which is returned.
    pub fn insert(&mut self, token: u32, pending: P) -> Option<P> {
        self.pending.insert(token, pending)
    }

    /// Removes and returns the callout answered under `token`; `None` for a token this table
    /// never registered (e.g. made before a reconfiguration by another root).
    pub fn take(&mut self, token: u32) -> Option<P> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry as a detached exchange's would be: the stream it was made for.
    struct Entry {
        stream: u32,
    }

    #[test]
    fn answers_are_found_by_token_once_whatever_became_of_the_stream() {
        let mut table = CalloutTable::default();
        assert!(table.insert(1, Entry { stream: 10 }).is_none());
        assert!(table.insert(2, Entry { stream: 11 }).is_none());
        assert_eq!(table.len(), 2);
        // The entry carries the stream id; whether that stream still exists is the dispatcher's
        // question, not the table's: the entry is there either way.
        let Some(first) = table.take(1) else {
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
