//! How a request forwarded on the router path ends: the upstream's head, the body the record
//! keeps, and its end — settled as the key's owner, with the sequencer's claim. (A detached
//! exchange's ending is [`crate::guard::Ending`]'s.)

use super::{Action, Guarded, State, Warning};
use crate::decision::{DoubtCause, ResponseFacts};
use crate::guard::sequencer::{applies, settlement};
use crate::guard::Capture;

impl<O, H> Guarded<O, H> {
    /// The head of an answer that came from the upstream itself (an answer the proxy or a later
    /// filter made is an end without one: [`Guarded::ended`]).
    pub fn upstream_head(&mut self, head: Capture) {
        let State::Forwarded { order, capture, .. } = &mut self.state else {
            return;
        };
        if capture.is_some() {
            return self.warn(Warning::OutOfOrder("a second upstream head"));
        }
        let applied = order.is_some() && head.status().is_some_and(applies);
        *capture = Some(head);
        if applied {
            self.queue.push(Action::MarkApplied);
        }
    }

    /// Whether the next `size` bytes of the upstream's body are kept for the record (read them
    /// and hand them to [`Guarded::upstream_chunk`]) or passed on unread.
    pub fn upstream_wants(&mut self, size: u64) -> bool {
        match &mut self.state {
            State::Forwarded {
                capture: Some(capture),
                ..
            } => capture.wants(size),
            _ => false,
        }
    }

    /// A body chunk [`Guarded::upstream_wants`] asked for; `None`: the host could not read it.
    pub fn upstream_chunk(&mut self, chunk: Option<&[u8]>) {
        if let State::Forwarded {
            capture: Some(capture),
            ..
        } = &mut self.state
        {
            capture.chunk(chunk);
        }
    }

    /// The forwarded request is over: its upstream answer `complete`, or not (the client gone,
    /// a reset, an answer made elsewhere) — then `without` says what the host observed.
    pub fn ended(&mut self, complete: bool, without: impl FnOnce() -> (ResponseFacts, DoubtCause)) {
        let (key, owner, order, capture) = match core::mem::replace(&mut self.state, State::Over) {
            State::Forwarded {
                key,
                owner,
                order,
                capture,
            } => (key, owner, order, capture),
            // Not forwarded: the upstream has nothing to end (a stream that waits for a store
            // gives back what it holds when that answer finds it gone).
            state => {
                self.state = state;
                return;
            }
        };
        let capture = if complete { capture } else { None };
        let status = capture.as_ref().and_then(Capture::status);
        let (facts, cause) = match capture {
            Some(capture) => {
                let facts = capture.facts();
                if facts == ResponseFacts::InDoubt {
                    self.warn(Warning::AnswerUnreadable);
                }
                (facts, DoubtCause::Other)
            }
            None => without(),
        };
        match settlement(facts == ResponseFacts::InDoubt, status) {
            Some(applied) => self.settle_order(order, applied),
            // Dropped unsettled: the store's claim holds until its lease ends.
            None => drop(order),
        }
        self.finish(key, owner, facts, cause);
    }
}
