//! A worker's finishes, queued and sent together (op 7, `wire::batch`), sans-IO: the rule for
//! when a batch goes, and what its answer means for each finish in it.
//!
//! Nobody waits for a finish (the client has its answer), so a finish may wait a little for
//! others: the host queues each in its worker's [`FinishQueue`] with the time, and sends a batch
//! when the queue says — at once when it holds `MAX_FINISHES` (64) finishes or `MAX_BATCH_BYTES`
//! (1 MiB) bytes, else once its oldest finish has waited [`BATCH_DELAY`] (the host's tick asks
//! [`FinishQueue::due`]). What waiting costs is a longer in-flight window: for up to
//! `BATCH_DELAY` more, a duplicate finds the claim in flight and waits (a route with
//! `in_flight.wait`) or gets 409 with its `Retry-After`, exactly as while a single finish travels.
//!
//! The answer is read per finish, by the rule of a finish sent alone ([`Finishing`]): a decision
//! ends that finish; a finish that got none (no answer to the batch at all, a garbage or
//! mismatched answer, or its own failure inside the answer) is sent again, up to the same
//! attempts, and one that landed unseen is found by the resend as *not owner*; after the last
//! attempt its claim stays in flight until its lease ends. A batch refused whole (400: a store
//! service that predates batches, or one that cannot read it) is not sent again — resending the
//! same bytes to the same service cannot change its answer — and its claims stay in flight until
//! their leases end: [`BatchStep::Refused`], which the host counts and warns of.

use super::client::{answer, CalloutReply};
use super::finishing::{FinishStep, Finishing};
use super::wire::{encode_finishes, Failure, Response, MAX_FINISHES};
use crate::client::scope::StorageKey;
use crate::time::{Span, UnixMillis};
use alloc::vec::Vec;

/// The longest a finish waits in its worker's queue for others to join it.
pub const BATCH_DELAY: Span = Span(10);

/// A batch is sent at once when its finishes' bytes reach this much (a stored answer rides in its
/// finish); the store service reads bodies up to 16 MiB by default.
pub(crate) const MAX_BATCH_BYTES: usize = 1 << 20;

/// One worker's finishes waiting to be sent.
#[derive(Debug, Default)]
pub struct FinishQueue {
    queued: Vec<Finishing>,
    bytes: usize,
    /// When the oldest queued finish was queued.
    since: Option<UnixMillis>,
}

impl FinishQueue {
    /// Queues `finishing` at `now`. A batch to send at once when that fills the queue; `None`:
    /// it waits (the host's tick sends it by [`FinishQueue::due`]). A finish that would take the
    /// queue past `MAX_BATCH_BYTES` (1 MiB) sends what waits before it first.
    #[must_use = "a full queue's batch must be sent"]
    pub fn push(&mut self, finishing: Finishing, now: UnixMillis) -> Option<FinishBatch> {
        let len = finishing.body().len();
        let before = match self.queued.is_empty() {
            false if self.bytes.saturating_add(len) > MAX_BATCH_BYTES => self.take(),
            _ => None,
        };
        if self.queued.is_empty() {
            self.since = Some(now);
        }
        self.bytes = self.bytes.saturating_add(len);
        self.queued.push(finishing);
        let full = self.queued.len() >= MAX_FINISHES || self.bytes >= MAX_BATCH_BYTES;
        match before {
            None if full => self.take(),
            before => before,
        }
    }

    /// The batch due at `now`: everything queued, once the oldest has waited [`BATCH_DELAY`].
    #[must_use = "a due batch must be sent"]
    pub fn due(&mut self, now: UnixMillis) -> Option<FinishBatch> {
        match self.since {
            Some(since) if now >= since.after(BATCH_DELAY) => self.take(),
            _ => None,
        }
    }

    /// Everything queued, now (the host cannot wait: its configuration is being replaced).
    #[must_use = "the batch must be sent"]
    pub fn flush(&mut self) -> Option<FinishBatch> {
        self.take()
    }

    pub fn is_empty(&self) -> bool {
        self.queued.is_empty()
    }

    fn take(&mut self) -> Option<FinishBatch> {
        self.since = None;
        self.bytes = 0;
        FinishBatch::new(core::mem::take(&mut self.queued))
    }
}

/// Finishes sent as one request: their bytes, and each finish's own resend rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishBatch {
    finishes: Vec<Finishing>,
    body: Vec<u8>,
}

impl FinishBatch {
    /// `None` for no finishes (nothing to send).
    fn new(finishes: Vec<Finishing>) -> Option<FinishBatch> {
        if finishes.is_empty() {
            return None;
        }
        let body = encode_finishes(finishes.iter().map(Finishing::body));
        Some(FinishBatch { finishes, body })
    }

    /// The bytes to send (`POST /v1/op`).
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// How many finishes it carries.
    pub fn len(&self) -> usize {
        self.finishes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.finishes.is_empty()
    }

    /// The keys of its finishes, in order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = StorageKey> + '_ {
        self.finishes.iter().map(Finishing::key)
    }

    /// What came back for this batch.
    pub fn answered(self, reply: CalloutReply<'_>) -> BatchStep {
        let sent = self.finishes.len();
        let answers = match answer(reply) {
            Ok(Response::Failed(Failure::BadRequest)) => {
                return BatchStep::Refused(self.keys().collect())
            }
            Ok(response) => response.into_finishes(sent),
            Err(error) => Err(error),
        };
        let steps = match answers {
            Ok(answers) => self
                .finishes
                .into_iter()
                .zip(answers)
                .map(|(finishing, outcome)| (finishing.key(), finishing.decided(outcome)))
                .collect(),
            Err(error) => self
                .finishes
                .into_iter()
                .map(|finishing| (finishing.key(), finishing.decided(Err(error.clone()))))
                .collect(),
        };
        BatchStep::Answered(steps)
    }
}

/// What a batch's answer leads to.
#[derive(Debug)]
#[must_use = "finishes not sent again stay in flight until their leases end"]
pub enum BatchStep {
    /// Each finish's step with its key, in the batch's order: count and log each
    /// ([`FinishStep::events`], [`FinishStep::note`]), then send [`BatchStep::resend`] at once.
    Answered(Vec<(StorageKey, FinishStep)>),
    /// The service refused the batch whole (400): not sent again; these keys' claims stay in
    /// flight until their leases end.
    Refused(Vec<StorageKey>),
}

impl BatchStep {
    /// The finishes that got no decision and have attempts left, as one batch to send now.
    #[must_use = "a batch to resend must be sent"]
    pub fn resend(self) -> Option<FinishBatch> {
        let BatchStep::Answered(steps) = self else {
            return None;
        };
        let again = steps.into_iter().filter_map(|(_, step)| match step {
            FinishStep::SendAgain { again, .. } => Some(again),
            _ => None,
        });
        FinishBatch::new(again.collect())
    }
}
