//! What an operation does to the record under its key ([`apply`]), and the read → decide →
//! compare-and-set loop that makes it atomic ([`Operation`]), sans-IO: the service reads and writes
//! the engine, this module decides. The record's payers are then charged, each on its own ledger
//! key, through [`Need::Ledger`]: the host settles those jobs ([`super::settle`]),
//! several operations' at once on one key. One key per engine call, as Redis Cluster needs.

use super::ledger::Job;
use super::settle::{LedgerJob, LedgerOutcome};
use super::stored::{StoredValue, ValueVersion, VERSION_LEN};
use super::wire::{End, Failure, Request, Response};
use crate::client::scope::StorageKey;
use crate::decision::Verdict;
use crate::hash::PartsHasher;
use crate::order::SettleOutcome;
use crate::record::Record;
use crate::store::protocol::{ClaimOutcome, ConsumeOutcome, MAX_ATTEMPTS};
use crate::store::rule;
use crate::store::share::{Billed, Fill, OverShare, PayerTag, Payers, Space};
use crate::store::WriteOutcome;
use crate::time::{Span, UnixMillis};
use alloc::vec::Vec;

pub use crate::store::rule::Change;

mod apply;
mod charging;

pub use apply::apply;
pub use apply::full;

/// An engine call the operation needs, on `key`: the request's own key, or a payer's ledger key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// Read the key's value and the engine's clock, in one atomic step.
    Read { key: StorageKey },
    /// Compare-and-set: write only if the key is still as it was read — absent when `expect` is
    /// `None`, else holding a value whose first bytes are `expect`.
    ///
    /// `at` is `Some` for a *speculative* write ([`Operation::speculate`]): one decided without a
    /// read, on the host's clock at `at`. The engine must refuse it unless its own clock is within
    /// [`CLOCK_TOLERANCE`] of `at`, so every write still lands on a decision made at the engine's
    /// time (within the tolerance). An engine that can, answers a refusal with its clock and the
    /// key's current value in the same step ([`Operation::conflicted`]), so the fallback decision
    /// needs no read of its own.
    Write {
        key: StorageKey,
        expect: Option<ValueVersion>,
        write: Write,
        at: Option<UnixMillis>,
    },
    /// Settle a job on a payer's ledger (`super::settle`), alone or together with other
    /// operations' jobs on the same key, and resume with [`Operation::settled`].
    Ledger(LedgerJob),
}

impl Need {
    /// The key the call is on.
    pub fn key(&self) -> StorageKey {
        match self {
            Need::Read { key } | Need::Write { key, .. } => *key,
            Need::Ledger(job) => job.key(),
        }
    }
}

/// How far the host's clock may be from the engine's for a speculative write to land: a
/// speculative decision uses the host's clock, and this bounds how far its times (a new claim's
/// lease and expiry, a completed record's expiry, a token use's hold) can be from the ones a
/// decision on the engine's clock would have given. Past it, the engine refuses and the operation
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
pub enum OperationStep {
    Need(Need),
    Done(Response),
}

/// How a host resumes one of the core's engine loops — an [`Operation`] or a payer
/// ledger's [`Settlement`](super::Settlement) — after each engine call: the four answers an engine
/// gives. A host written against it carries both loops with one piece of code.
pub trait Resume {
    /// What the loop asks for next, or its answer.
    type Step;

    /// Resumes with what a read found: `now` on the engine's clock, the key's bytes (`None`:
    /// absent), and a fresh random version for a write (drawn by the host: the core has no
    /// entropy).
    #[must_use = "the next step must be carried out"]
    fn read(&mut self, now: UnixMillis, value: Option<&[u8]>, fresh: ValueVersion) -> Self::Step;

    /// Resumes with a compare-and-set's result, when the engine said only whether it wrote.
    #[must_use = "the next step must be carried out"]
    fn written(&mut self, outcome: WriteOutcome) -> Self::Step;

    /// Resumes after a compare-and-set the engine refused and answered, in the same atomic step,
    /// with its clock and the key's current value.
    #[must_use = "the next step must be carried out"]
    fn conflicted(
        &mut self,
        now: UnixMillis,
        value: Option<&[u8]>,
        fresh: ValueVersion,
    ) -> Self::Step;

    /// Resumes after the engine failed a call (the host's timeout, a refused write, a lost
    /// connection).
    #[must_use = "the next step must be carried out"]
    fn failed(&mut self, failure: Failure) -> Self::Step;
}

/// One operation in progress: read → [`apply`] → compare-and-set on the request's key, deciding
/// again after a lost race (someone else changed the key, so the decision is made again on what
/// they wrote), at most `MAX_ATTEMPTS` times; then a [`Need::Ledger`] for each payer's charge.
///
/// The common cases need no read at all ([`Operation::speculate`]): the operation assumes what the
/// key most likely holds — nothing, for a claim or a token use; the claim
/// the host itself wrote, for the owner's finish — decides on that with [`apply`] as usual, and
/// sends the write as a compare-and-set on the assumed version. The compare-and-set *proves* the
/// assumption (versions never repeat at a key, see `super::stored`), so a write that lands is
/// exactly the one a read would have led to; one that does not is decided again on what the
/// engine holds.
///
/// **Shares.** A claim or a token use that wrote its record — or an ordering begin
/// that made a new resource record — is then charged to each payer the request names, within its share, and counted in its fill shard (a ledger key like a
/// payer's). A payer at its share is refused only while that shard is under pressure: the shard's
/// count is read then, and only then ([`Need::Ledger`] again); below the pressure the payer is
/// charged beyond its share. A payer refused (or a ledger that cannot be charged) undoes the
/// operation: the charges made are given back and the key is put back as it
/// was (only if it still holds the record written), and the answer is 429 (or the failure). So a
/// record holds space uncharged only between its write and its payers' charges — at most one
/// record per operation in progress. The record is written first so that what writes nothing (a
/// replay, a 409, a 422: most retries) costs no ledger call. The owner's finish moves the claim's
/// charge to the stored answer (or gives it back on a release), best effort: a finish is never
/// undone over a ledger. A host that gives up on an operation midway (its timeout) leaves at worst
/// a claim uncharged until its lease ends, or a charge until its hold ends.
#[derive(Debug)]
pub struct Operation {
    request: Request,
    /// Compare-and-sets lost on the current key.
    attempts: u32,
    /// The write in flight and what it means once it lands.
    pending: Option<Pending>,
    /// The ledger work left once the record's answer is known.
    after: Option<After>,
    /// The latest fresh version the host gave, and how many versions were derived from it.
    fresh: ValueVersion,
    derived: u32,
}

/// What a write in flight does once it lands.
#[derive(Debug)]
enum Pending {
    /// The record under the request's key (boxed: one per operation, and far larger than the rest).
    Record(alloc::boxed::Box<Landing>),
    /// Deleting the record this operation wrote (a charge was refused).
    Unwrite,
}

/// A record write and what its payers owe once it lands.
#[derive(Debug)]
struct Landing {
    response: Response,
    /// The version written (`None` for a delete).
    version: Option<ValueVersion>,
    /// The space the written record takes.
    space: Option<Space>,
    /// The claim it replaced: whose charge a finish moves, and the space it was charged.
    replaced: Option<(Payers, Space)>,
    /// What the key held before, when the write may have to be undone (a charged claim or use).
    previous: Option<Record>,
}

/// The ledger work after the record's answer.
#[derive(Debug)]
struct After {
    answer: Response,
    /// Still to do, in order; the first is in progress.
    tasks: Vec<Task>,
    /// The record this operation wrote (a claim or a token use) and what the key held before,
    /// put back if a charge fails.
    written: Option<(ValueVersion, Option<Record>)>,
    /// The charges made so far, given back if a later one fails.
    refunds: Vec<Job>,
}

#[derive(Debug, Clone)]
enum Task {
    Ledger(Job),
    /// Put back what the key held before the record this operation wrote at the version: a
    /// claim that took over an abandoned one leaves that claim as it was, as if never written.
    Unwrite(ValueVersion, Option<Record>),
}

impl Operation {
    /// Starts an operation with a read.
    #[must_use = "the first step must be carried out"]
    pub fn start(request: Request) -> (Operation, Need) {
        let key = *request.key();
        let operation = Operation {
            request,
            attempts: 0,
            pending: None,
            after: None,
            fresh: ValueVersion([0; VERSION_LEN]),
            derived: 0,
        };
        (operation, Need::Read { key })
    }

    /// Starts an operation with a speculative compare-and-set when one can be decided without a
    /// read, else with a read ([`Operation::start`]).
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
    ) -> (Operation, Need) {
        let key = *request.key();
        let assumed = match &request {
            Request::Claim { .. } | Request::Consume { .. } => None,
            // A resource's state, or a late delivery's answer, is whatever the engine holds:
            // always read first.
            Request::OrderBegin { .. } | Request::OrderSettle { .. } | Request::Replay { .. } => {
                return Operation::start(request)
            }
            Request::Finish { owner, .. } => {
                match claimed.map(|bytes| StoredValue::decode(&key, bytes)) {
                    Some(Ok(value)) if matches!(&value.record, Record::InFlight(c) if c.owner == *owner) => {
                        Some(value)
                    }
                    _ => return Operation::start(request),
                }
            }
        };
        let (mut operation, read) = Operation::start(request);
        match operation.decide(assumed.as_ref(), at, fresh, Some(at)) {
            OperationStep::Need(need @ Need::Write { .. }) => (operation, need),
            // Nothing to write on the assumed state: ask the engine what it holds.
            _ => {
                operation.pending = None;
                (operation, read)
            }
        }
    }

    /// [`apply`] on `current` at `now`, and the compare-and-set that makes it so.
    fn decide(
        &mut self,
        current: Option<&StoredValue>,
        now: UnixMillis,
        fresh: ValueVersion,
        at: Option<UnixMillis>,
    ) -> OperationStep {
        self.fresh = fresh;
        let key = *self.request.key();
        let (response, change) = apply(&self.request, current.map(|s| &s.record), now);
        let expect = current.map(|s| s.version);
        let counted = matches!(&self.request, Request::Finish { shard: Some(_), .. });
        let replaced = match current.map(|s| &s.record) {
            Some(Record::InFlight(claim)) if counted || !claim.payers.is_empty() => {
                Some((claim.payers, Space::of_claim(claim)))
            }
            _ => None,
        };
        let charged = match &self.request {
            Request::Claim { payers, fill, .. } | Request::Consume { payers, fill, .. } => {
                !payers.is_empty() || fill.is_some()
            }
            _ => false,
        };
        let previous = current.filter(|_| charged).map(|s| s.record.clone());
        // A begin's record takes space to charge only when it is a new one: a live resource's was
        // charged when it was made (and a new one replaces nothing worth putting back).
        let creates = |written: &Record| match (&self.request, written) {
            (Request::OrderBegin { .. }, Record::Resource(resource)) => {
                let before = match current.map(|s| &s.record) {
                    Some(Record::Resource(r)) => Some(r),
                    _ => None,
                };
                crate::order::creates(before, Some(resource), now)
            }
            _ => true,
        };
        let (write, version, space) = match change {
            Change::Keep => return OperationStep::Done(response),
            Change::Delete => (Write::Delete, None, None),
            Change::Put(record) => {
                let expires_at = record.expires_at();
                let space = creates(&record).then(|| Space::of(&record));
                let value = StoredValue {
                    version: fresh,
                    record,
                };
                let write = Write::Set {
                    value: value.encode(&key),
                    expires_at,
                };
                (write, Some(fresh), space)
            }
        };
        self.pending = Some(Pending::Record(alloc::boxed::Box::new(Landing {
            response,
            version,
            space,
            replaced,
            previous,
        })));
        OperationStep::Need(Need::Write {
            key,
            expect,
            write,
            at,
        })
    }

    /// A version for a write the host gave no fresh one for (putting back what a refused claim
    /// replaced): derived from the last fresh one, so it never repeats either.
    fn derive_version(&mut self) -> ValueVersion {
        self.derived += 1;
        let mut hasher = PartsHasher::new("idemgate-derived-version-v1");
        hasher.part(&self.fresh.0).part(&self.derived.to_be_bytes());
        let hash = hasher.finish();
        let mut version = [0; VERSION_LEN];
        version.copy_from_slice(&hash[..VERSION_LEN]);
        ValueVersion(version)
    }
}

impl Resume for Operation {
    type Step = OperationStep;

    /// Resumes with what the read found: `now` from the engine's clock, the key's bytes, and a
    /// fresh random version for a write (drawn by the host: the core has no entropy).
    fn read(&mut self, now: UnixMillis, value: Option<&[u8]>, fresh: ValueVersion) -> Self::Step {
        if self.after.is_some() {
            // Only the record is read: ledgers are settled, a delete is never preceded by a read.
            return self.task_failed(Failure::Unavailable);
        }
        let key = *self.request.key();
        let current = match value.map(|bytes| StoredValue::decode(&key, bytes)) {
            None => None,
            Some(Ok(stored)) => Some(stored),
            // Never overwrite what cannot be read: it may be a record of a newer format.
            Some(Err(_)) => return OperationStep::Done(Response::Failed(Failure::Corrupt)),
        };
        self.decide(current.as_ref(), now, fresh, None)
    }

    /// Resumes with the compare-and-set's result, when the engine said only whether it wrote: a
    /// conflict is followed by a read.
    fn written(&mut self, outcome: WriteOutcome) -> Self::Step {
        match (outcome, self.pending.take()) {
            (WriteOutcome::Written, Some(Pending::Record(landing))) => self.landed(*landing),
            // Deleted, or no longer the record written (taken over, expired): either way done.
            (_, Some(Pending::Unwrite)) => self.next_task(),
            (WriteOutcome::Conflict, Some(Pending::Record(_))) => match self.lost() {
                Some(done) => done,
                None => OperationStep::Need(Need::Read {
                    key: *self.request.key(),
                }),
            },
            // A write result with no write asked for: a host bug, answered as a failure.
            (_, None) => OperationStep::Done(Response::Failed(Failure::Unavailable)),
        }
    }

    /// Resumes after a compare-and-set the engine refused (another version, or a speculative
    /// write off the engine's clock) and answered, in the same atomic step, with its clock and
    /// the key's current value: decided again on those, as after a read.
    fn conflicted(
        &mut self,
        now: UnixMillis,
        value: Option<&[u8]>,
        fresh: ValueVersion,
    ) -> Self::Step {
        match self.pending.take() {
            None => OperationStep::Done(Response::Failed(Failure::Unavailable)),
            Some(Pending::Unwrite) => self.next_task(),
            Some(Pending::Record(_)) => match self.lost() {
                Some(done) => done,
                None => self.read(now, value, fresh),
            },
        }
    }

    /// Resumes after the engine failed a call (the host's timeout, a refused write, a lost
    /// connection): on the record, the operation's answer; on a payer's charge, the operation is
    /// undone as far as the engine lets it; on a finish's ledger move, the finish stands.
    fn failed(&mut self, failure: Failure) -> Self::Step {
        self.pending = None;
        match self.after {
            None if failure == Failure::Full => OperationStep::Done(full(&self.request)),
            None => OperationStep::Done(Response::Failed(failure)),
            Some(_) => self.task_failed(failure),
        }
    }
}
