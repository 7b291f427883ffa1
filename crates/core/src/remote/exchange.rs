//! What an operation does to the record under its key ([`apply`]), and the read → decide →
//! compare-and-set loop that makes it atomic ([`Exchange`]), sans-IO: the service reads and writes
//! the engine, this module decides.

use super::stored::{StoredValue, ValueVersion};
use super::wire::{End, Failure, Request, Response};
use crate::decision::Verdict;
use crate::protocol::{ClaimOutcome, ConsumeOutcome, MAX_ATTEMPTS};
use crate::record::Record;
use crate::rule;
use crate::share::Payers;
use crate::store::WriteOutcome;
use crate::time::{Span, UnixMillis};
use alloc::vec::Vec;

pub use crate::rule::Change;

/// Decides `request` on the record found under its key (`None` when the key is absent), at `now`
/// on the engine's clock: the rules of the core's `rule` module, the same the local store applies. The
/// remote store keeps no shares (issue 23 leaves them to the local store for now), so a claim
/// names no payers.
#[must_use = "the response must be sent and the change written"]
pub fn apply(request: &Request, current: Option<&Record>, now: UnixMillis) -> (Response, Change) {
    let live = current.filter(|record| !record.is_expired(now));
    match request {
        Request::Claim {
            fingerprint,
            owner,
            lease,
            ttl,
            ..
        } => {
            let (outcome, change) = rule::claim(
                live,
                *fingerprint,
                *owner,
                Payers::NONE,
                now,
                (*lease, *ttl),
            );
            (Response::Claim(outcome), change)
        }
        Request::Finish {
            owner, ttl, end, ..
        } => {
            let verdict = match end {
                End::Release => Verdict::Release,
                End::Store(response) => Verdict::Store(response.clone()),
            };
            let (outcome, change) = rule::finish(live, *owner, verdict, now, *ttl);
            (Response::Finish(outcome), change)
        }
        Request::OrderBegin {
            owner,
            lease,
            ttl,
            retry_after,
            forward_after,
            event,
            table,
            ..
        } => {
            let current = match live {
                None => None,
                Some(Record::Resource(r)) => Some(r),
                // Resource keys are a hash domain of their own: anything else is not ours.
                Some(_) => return (Response::Failed(Failure::Corrupt), Change::Keep),
            };
            let begin = crate::order::Begin {
                table,
                event,
                owner: *owner,
                lease: *lease,
                ttl: *ttl,
                retry_after: *retry_after,
                forward_after: *forward_after,
            };
            let (outcome, write) = crate::order::begin(current, &begin, now);
            let change = write.map_or(Change::Keep, |r| Change::Put(Record::Resource(r)));
            (Response::Begin(outcome), change)
        }
        Request::OrderSettle {
            owner,
            ttl,
            to,
            applied,
            ..
        } => {
            let current = match live {
                Some(Record::Resource(r)) => Some(r),
                _ => None,
            };
            let (outcome, write) = crate::order::settle(current, *owner, to, *applied, *ttl, now);
            let change = write.map_or(Change::Keep, |r| Change::Put(Record::Resource(r)));
            (Response::Settle(outcome), change)
        }
        Request::Consume { expires_at, .. } => {
            let (outcome, change) = rule::consume(live, *expires_at, now);
            (Response::Consume(outcome), change)
        }
    }
}

/// How long a client is told to wait when the engine is out of memory: the engine frees memory as
/// keys expire, and there is no one record whose expiry to point at.
pub(crate) const FULL_RETRY_AFTER: Span = Span::from_secs(5);

/// The answer when the engine refuses a write for lack of memory: claims and token uses are told
/// the store is full (the filter's `on_store_full` applies); a finish fails (the claim stays in
/// flight until its lease ends, as for any finish that cannot land).
#[must_use = "the response must be sent"]
pub fn full(request: &Request) -> Response {
    match request {
        Request::Claim { .. } => Response::Claim(ClaimOutcome::StoreFull {
            retry_after: FULL_RETRY_AFTER,
        }),
        Request::Consume { .. } => Response::Consume(ConsumeOutcome::StoreFull {
            retry_after: FULL_RETRY_AFTER,
        }),
        Request::OrderBegin { .. } => Response::Begin(crate::order::BeginOutcome::StoreFull {
            retry_after: FULL_RETRY_AFTER,
        }),
        Request::Finish { .. } | Request::OrderSettle { .. } => Response::Failed(Failure::Full),
    }
}

/// An engine call the exchange needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// Read the key's value and the engine's clock, in one atomic step.
    Read,
    /// Compare-and-set: write only if the key is still as it was read — absent when `expect` is
    /// `None`, else holding a value whose first bytes are `expect`.
    ///
    /// `at` is `Some` for a *speculative* write ([`Exchange::speculate`]): one decided without a
    /// read, on the host's clock at `at`. The engine must refuse it unless its own clock is within
    /// [`CLOCK_TOLERANCE`] of `at`, so every write still lands on a decision made at the engine's
    /// time (within the tolerance). An engine that can, answers a refusal with its clock and the
    /// key's current value in the same step ([`Exchange::conflicted`]), so the fallback decision
    /// needs no read of its own.
    Write {
        expect: Option<ValueVersion>,
        write: Write,
        at: Option<UnixMillis>,
    },
}

/// How far the host's clock may be from the engine's for a speculative write to land: a
/// speculative decision uses the host's clock, and this bounds how far its times (a new claim's
/// lease and expiry, a completed record's expiry, a token use's hold) can be from the ones a
/// decision on the engine's clock would have given. Past it, the engine refuses and the exchange
/// decides again on the engine's clock.
pub const CLOCK_TOLERANCE: Span = Span(100);

/// The write half of [`Need::Write`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Set the value, expiring at `expires_at` on the engine's clock (Redis `PXAT`).
    Set {
        value: Vec<u8>,
        expires_at: UnixMillis,
    },
    Delete,
}

/// Either another engine call, or the answer to send back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Need(Need),
    Done(Response),
}

/// One operation in progress: read → [`apply`] → compare-and-set, deciding again after a lost race
/// (someone else changed the key, so the decision is made again on what they wrote), at most
/// `MAX_ATTEMPTS` times.
///
/// The common cases need no read at all ([`Exchange::speculate`]): the exchange assumes what the
/// key most likely holds — nothing, for a claim or a token use; the claim the host itself wrote,
/// for the owner's finish — decides on that with [`apply`] as usual, and sends the write as a
/// compare-and-set on the assumed version. The compare-and-set *proves* the assumption (versions
/// never repeat at a key, see [`super::stored`]), so a write that lands is exactly the one a read
/// would have led to; one that does not is decided again on what the engine holds.
#[derive(Debug)]
pub struct Exchange {
    request: Request,
    attempts: u32,
    pending: Option<Response>,
}

impl Exchange {
    /// Starts an operation with a read.
    #[must_use = "the first step must be carried out"]
    pub fn start(request: Request) -> (Exchange, Need) {
        let exchange = Exchange {
            request,
            attempts: 0,
            pending: None,
        };
        (exchange, Need::Read)
    }

    /// Starts an operation with a speculative compare-and-set when one can be decided without a
    /// read, else with a read ([`Exchange::start`]).
    ///
    /// `at` is the host's clock; `claimed` is the value the host itself wrote for a claim on this
    /// key, if it remembers one (only a finish uses it: its owner's claim is what it expects to
    /// find); `fresh` a random version for the write. A claim and a token use assume the key is
    /// absent. Speculation is only sent when the assumed state leads to a write: an answer that
    /// writes nothing (a replay, a conflict) must come from what the engine really holds.
    #[must_use = "the first step must be carried out"]
    pub fn speculate(
        request: Request,
        at: UnixMillis,
        claimed: Option<&[u8]>,
        fresh: ValueVersion,
    ) -> (Exchange, Need) {
        let key = *request.key();
        let assumed = match &request {
            Request::Claim { .. } | Request::Consume { .. } => None,
            // A resource's state is whatever the engine holds: always read first.
            Request::OrderBegin { .. } | Request::OrderSettle { .. } => {
                return Exchange::start(request)
            }
            Request::Finish { owner, .. } => {
                match claimed.map(|bytes| StoredValue::decode(&key, bytes)) {
                    Some(Ok(value)) if matches!(&value.record, Record::InFlight(c) if c.owner == *owner) => {
                        Some(value)
                    }
                    _ => return Exchange::start(request),
                }
            }
        };
        let (mut exchange, read) = Exchange::start(request);
        match exchange.decide(assumed.as_ref(), at, fresh, Some(at)) {
            Step::Need(need @ Need::Write { .. }) => (exchange, need),
            // Nothing to write on the assumed state: ask the engine what it holds.
            _ => {
                exchange.pending = None;
                (exchange, read)
            }
        }
    }

    pub fn request(&self) -> &Request {
        &self.request
    }

    /// Resumes with what the read found: `now` from the engine's clock, the key's bytes, and a
    /// fresh random version for a write (drawn by the host: the core has no entropy).
    #[must_use = "the next step must be carried out"]
    pub fn read(&mut self, now: UnixMillis, value: Option<&[u8]>, fresh: ValueVersion) -> Step {
        let key = *self.request.key();
        let current = match value.map(|bytes| StoredValue::decode(&key, bytes)) {
            None => None,
            Some(Ok(stored)) => Some(stored),
            // Never overwrite what cannot be read: it may be a record of a newer format.
            Some(Err(_)) => return Step::Done(Response::Failed(Failure::Corrupt)),
        };
        self.decide(current.as_ref(), now, fresh, None)
    }

    /// [`apply`] on `current` at `now`, and the compare-and-set that makes it so.
    fn decide(
        &mut self,
        current: Option<&StoredValue>,
        now: UnixMillis,
        fresh: ValueVersion,
        at: Option<UnixMillis>,
    ) -> Step {
        let key = *self.request.key();
        let (response, change) = apply(&self.request, current.map(|s| &s.record), now);
        let expect = current.map(|s| s.version);
        let write = match change {
            Change::Keep => return Step::Done(response),
            Change::Delete => Write::Delete,
            Change::Put(record) => {
                let expires_at = record.expires_at();
                let value = StoredValue {
                    version: fresh,
                    record,
                };
                Write::Set {
                    value: value.encode(&key),
                    expires_at,
                }
            }
        };
        self.pending = Some(response);
        Step::Need(Need::Write { expect, write, at })
    }

    /// Resumes with the compare-and-set's result, when the engine said only whether it wrote: a
    /// conflict is followed by a read.
    #[must_use = "the next step must be carried out"]
    pub fn written(&mut self, outcome: WriteOutcome) -> Step {
        match (outcome, self.pending.take()) {
            (WriteOutcome::Written, Some(response)) => Step::Done(response),
            (WriteOutcome::Conflict, Some(_)) => match self.lost() {
                Some(done) => done,
                None => Step::Need(Need::Read),
            },
            // A write result with no write asked for: a host bug, answered as a failure.
            (_, None) => Step::Done(Response::Failed(Failure::Unavailable)),
        }
    }

    /// Resumes after a compare-and-set the engine refused (another version, or a speculative
    /// write off the engine's clock) and answered, in the same atomic step, with its clock and
    /// the key's current value: decided again on those, as after a read.
    #[must_use = "the next step must be carried out"]
    pub fn conflicted(
        &mut self,
        now: UnixMillis,
        value: Option<&[u8]>,
        fresh: ValueVersion,
    ) -> Step {
        if self.pending.take().is_none() {
            return Step::Done(Response::Failed(Failure::Unavailable));
        }
        match self.lost() {
            Some(done) => done,
            None => self.read(now, value, fresh),
        }
    }

    /// Counts a lost compare-and-set: the answer once there were too many.
    fn lost(&mut self) -> Option<Step> {
        self.attempts += 1;
        (self.attempts >= MAX_ATTEMPTS).then_some(Step::Done(Response::Failed(Failure::Contention)))
    }
}
