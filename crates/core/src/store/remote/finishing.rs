//! A finish sent to the store service, sans-IO: the rule for a finish whose answer did not come
//! back. Nobody waits for a finish (the client has its answer), so the host sends it and feeds
//! what came back to [`Finishing::answered`]: a decision is done; no usable answer (timeout,
//! reset, 503, garbage) sends the same bytes again, up to `FINISH_ATTEMPTS` times in all. One
//! that landed unseen is found by the resend as *not owner*. If none lands, the claim stays in
//! flight: retries get 409 until the lease ends, then may take it over.

use super::client::{finish_outcome, CalloutReply, FINISH_ATTEMPTS};
use super::wire::{End, Request};
use crate::client::scope::StorageKey;
use crate::events::{Event, Events};
use crate::store::protocol::{FinishOutcome, ProtocolError};
use alloc::vec::Vec;
use core::fmt;

/// A finish in flight: its encoded request, resent as is if no answer comes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finishing {
    key: StorageKey,
    body: Vec<u8>,
    /// This send's number, from 1.
    attempt: u32,
    intended: FinishOutcome,
}

/// What a finish's answer leads to.
#[derive(Debug)]
#[must_use = "a finish not sent again stays in flight until its lease ends"]
pub enum FinishStep {
    /// The store service decided.
    Done(FinishOutcome),
    /// No decision came back: send `again`'s bytes ([`Finishing::body`]) once more.
    SendAgain {
        again: Finishing,
        error: ProtocolError,
    },
    /// No decision came back, `FINISH_ATTEMPTS` times: the claim stays in flight until its
    /// lease ends.
    GiveUp(ProtocolError),
}

impl Finishing {
    /// The first send of `request` (a finish: [`super::client::finish`]).
    pub fn new(request: &Request) -> Finishing {
        let intended = match request {
            Request::Finish {
                end: End::Release, ..
            } => FinishOutcome::Released,
            _ => FinishOutcome::Stored,
        };
        Finishing {
            key: *request.key(),
            body: request.encode(),
            attempt: 1,
            intended,
        }
    }

    /// The key the finish ends the claim of.
    pub(crate) fn key(&self) -> StorageKey {
        self.key
    }

    /// The bytes to send (the same on every attempt).
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// What the finish writes if it lands: the answer stored, or the claim released.
    pub fn intended(&self) -> FinishOutcome {
        self.intended
    }

    /// What came back for this attempt.
    pub fn answered(self, reply: CalloutReply<'_>) -> FinishStep {
        self.decided(finish_outcome(reply))
    }

    /// What this attempt's decision — or why there is none — leads to: the rule for a finish
    /// sent alone and for each finish of a batch alike.
    pub(crate) fn decided(self, outcome: Result<FinishOutcome, ProtocolError>) -> FinishStep {
        match outcome {
            Ok(outcome) => FinishStep::Done(outcome),
            Err(error) if self.attempt < FINISH_ATTEMPTS => FinishStep::SendAgain {
                again: Finishing {
                    attempt: self.attempt + 1,
                    ..self
                },
                error,
            },
            Err(error) => FinishStep::GiveUp(error),
        }
    }
}

impl FinishStep {
    /// What to count.
    pub fn events(&self) -> Events {
        match self {
            FinishStep::Done(FinishOutcome::Stored) => Events::of(&[Event::Stored]),
            FinishStep::Done(FinishOutcome::Released) => Events::of(&[Event::Released]),
            FinishStep::Done(_) => Events::default(),
            FinishStep::SendAgain { .. } | FinishStep::GiveUp(_) => {
                Events::of(&[Event::StoreError])
            }
        }
    }

    /// What to log: [`FinishNote::is_warning`] for a failure, else a debug line.
    pub fn note(&self) -> FinishNote<'_> {
        match self {
            FinishStep::Done(FinishOutcome::Stored) => FinishNote::Stored,
            FinishStep::Done(FinishOutcome::Released) => FinishNote::Released,
            FinishStep::Done(_) => FinishNote::NotOwner,
            FinishStep::SendAgain { again, error } => FinishNote::Retrying {
                failed: again.attempt - 1,
                error,
            },
            FinishStep::GiveUp(error) => FinishNote::GaveUp { error },
        }
    }
}

/// A finish's line for the host's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FinishNote<'a> {
    Stored,
    Released,
    /// No longer the owner, or an earlier attempt landed: nothing written.
    NotOwner,
    /// Attempt `failed` got no decision: sent again.
    Retrying {
        failed: u32,
        error: &'a ProtocolError,
    },
    /// The last attempt got no decision.
    GaveUp {
        error: &'a ProtocolError,
    },
}

impl FinishNote<'_> {
    /// A failure to warn of; otherwise a debug line about the finish's key.
    pub fn is_warning(&self) -> bool {
        matches!(
            self,
            FinishNote::Retrying { .. } | FinishNote::GaveUp { .. }
        )
    }
}

impl fmt::Display for FinishNote<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FinishNote::Stored => f.write_str("answer stored (remote)"),
            FinishNote::Released => f.write_str("released (remote)"),
            FinishNote::NotOwner => f.write_str(
                "no longer the owner (or an earlier attempt landed): nothing written",
            ),
            FinishNote::Retrying { failed, error } => write!(
                f,
                "store failed on a finish (attempt {failed} of {FINISH_ATTEMPTS}): {error}; sending it again"
            ),
            FinishNote::GaveUp { error } => write!(
                f,
                "store failed on a finish {FINISH_ATTEMPTS} times: {error}; the claim stays in flight until its lease ends"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::scope::StorageKey;
    use crate::record::OwnerToken;
    use crate::store::remote::wire::Response;
    use crate::time::Span;
    use alloc::string::ToString;

    fn release() -> Request {
        Request::Finish {
            key: StorageKey::from_stored([7; 32]),
            owner: OwnerToken([1; 16]),
            ttl: Span::from_secs(60),
            end: End::Release,
            shard: None,
        }
    }

    #[test]
    fn a_finish_with_no_answer_is_sent_again_then_given_up() {
        let mut finishing = Finishing::new(&release());
        assert_eq!(finishing.intended(), FinishOutcome::Released);
        let body = finishing.body().to_vec();
        let nothing = || CalloutReply {
            status: None,
            body: &[],
        };
        for attempt in 1..FINISH_ATTEMPTS {
            match finishing.answered(nothing()) {
                step @ FinishStep::SendAgain { .. } => {
                    assert!(step.note().is_warning());
                    assert!(step
                        .note()
                        .to_string()
                        .contains(&alloc::format!("attempt {attempt} of {FINISH_ATTEMPTS}")));
                    assert_eq!(
                        step.events().iter().collect::<Vec<_>>(),
                        [Event::StoreError]
                    );
                    let FinishStep::SendAgain { again, .. } = step else {
                        unreachable!()
                    };
                    assert_eq!(again.body(), body, "the same bytes again");
                    finishing = again;
                }
                other => panic!("attempt {attempt}: {other:?}"),
            }
        }
        let last = finishing.answered(nothing());
        assert!(matches!(last, FinishStep::GiveUp(_)), "{last:?}");
        assert!(last
            .note()
            .to_string()
            .contains("the claim stays in flight"));
        assert_eq!(
            last.events().iter().collect::<Vec<_>>(),
            [Event::StoreError]
        );
    }

    #[test]
    fn a_decision_ends_the_finish_and_is_counted() {
        let finishing = Finishing::new(&release());
        let body = Response::Finish(FinishOutcome::Released).encode();
        let step = finishing.answered(CalloutReply {
            status: Some(200),
            body: &body,
        });
        assert!(matches!(step, FinishStep::Done(FinishOutcome::Released)));
        assert_eq!(step.events().iter().collect::<Vec<_>>(), [Event::Released]);
        assert!(!step.note().is_warning());
    }
}
