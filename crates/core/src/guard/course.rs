//! What a request does between its idempotency decision and the upstream, in the core's order
//! (`docs/semantics.md` §7: the idempotency decision comes first). A claimed request on
//! a route that orders its events has its event decided by the sequencer, then its one-time
//! token is used, once, then it goes out; a request forwarded without idempotency still has its
//! token used first. The order was the Envoy filter's, spread over four functions; the host now
//! asks the course for the next stage and carries it out, locally at once or after a store's
//! answer.
//!
//! A stage that refuses the request (the sequencer answers, the token was used before, the
//! store cannot record its use) ends the course: the request was never sent, so the host
//! releases the claim it holds — [`super::after_use`] and the sequencer say what it answers.

use super::VerifiedToken;

/// The stages still ahead of a request. `O` is what the host's sequencer needs of the
/// event, handed back with its stage, so a stage cannot come without it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a request goes out only when its course says so"]
pub struct Course<O> {
    order: Option<O>,
    token: Option<VerifiedToken>,
}

/// The next stage of a request's course.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage<O> {
    /// Have the sequencer decide the request's event (claimed requests only).
    Order(O),
    /// Use the request's one-time token, once.
    UseToken(VerifiedToken),
    /// Send it upstream.
    Go,
}

impl<O> Course<O> {
    /// A claimed request's: its event's order if the route orders events, its token if the
    /// route requires one.
    pub fn claimed(order: Option<O>, token: Option<VerifiedToken>) -> Course<O> {
        Course { order, token }
    }

    /// A request forwarded without idempotency (no key, or a failure mode): only its token.
    /// Nothing is claimed, so there is no event to order.
    pub(crate) fn unguarded(token: Option<VerifiedToken>) -> Course<O> {
        Course { order: None, token }
    }

    /// The token still to be used, the rest of the course dropped (a claim that fell through
    /// to a failure mode has no event to order).
    pub(crate) fn into_token(self) -> Option<VerifiedToken> {
        self.token
    }

    /// The next stage, taken off the course: each is given once, `Go` last (and again after).
    pub(crate) fn next_stage(&mut self) -> Stage<O> {
        if let Some(order) = self.order.take() {
            return Stage::Order(order);
        }
        match self.token.take() {
            Some(token) => Stage::UseToken(token),
            None => Stage::Go,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::scope::StorageKey;
    use crate::time::UnixMillis;

    fn token() -> VerifiedToken {
        VerifiedToken {
            expires_at: UnixMillis(9),
            use_key: StorageKey::from_stored([7; 32]),
        }
    }

    fn steps(mut course: Course<u8>) -> [Stage<u8>; 4] {
        [
            course.next_stage(),
            course.next_stage(),
            course.next_stage(),
            course.next_stage(),
        ]
    }

    #[test]
    fn the_event_is_ordered_before_the_token_is_used_and_both_before_the_request_goes() {
        let t = token();
        use Stage::{Go, Order, UseToken};
        assert_eq!(
            steps(Course::claimed(Some(5), Some(t))),
            [Order(5), UseToken(t), Go, Go]
        );
        assert_eq!(
            steps(Course::claimed(Some(5), None)),
            [Order(5), Go, Go, Go]
        );
        assert_eq!(
            steps(Course::claimed(None, Some(t))),
            [UseToken(t), Go, Go, Go]
        );
        assert_eq!(steps(Course::claimed(None, None)), [Go; 4]);
        assert_eq!(steps(Course::unguarded(Some(t))), [UseToken(t), Go, Go, Go]);
        assert_eq!(steps(Course::unguarded(None)), [Go; 4]);
    }
}
