//! The claim / complete / release / consume protocol over a compare-and-set [`Store`], written
//! sans-IO: an operation *asks* for the store call it needs ([`StoreRequest`]) and is resumed with
//! the answer ([`StoreReply`]). A host whose store answers at once (Envoy shared data, the memory
//! store) drives it with [`run`]; a host whose store answers later (an asynchronous HTTP call from
//! proxy-wasm, which cannot block) keeps the [`Transaction`] between callbacks.
//!
//! Every operation is read → decide on the decoded bucket → conditional write. A lost race returns
//! `Conflict` and the transaction re-reads and decides again, so the decision is always made on the
//! state the write replaces: that is what makes a claim atomic across workers.

use crate::decision::{complete, decide, Completion, Decision, ResponseFacts};
use crate::fingerprint::Fingerprint;
use crate::policy::{Policy, Quota};
use crate::record::{Bucket, DecodeError, OwnerToken, Record, StoredResponse};
use crate::scope::StorageKey;
use crate::seal::SealError;
use crate::store::{Expect, Layout, Snapshot, Store, StoreError, WriteOutcome};
use crate::time::{Span, UnixMillis};
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// How many lost races an operation tolerates before giving up (each loss means another request
/// made progress on the same cell, so this bounds work, not correctness).
pub const MAX_ATTEMPTS: u32 = 16;

/// A store call the protocol needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreRequest {
    Read {
        cell: String,
    },
    Write {
        cell: String,
        bytes: Vec<u8>,
        expect: Expect,
    },
}

/// The host's answer to the last [`StoreRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreReply {
    Read(Option<Snapshot>),
    Write(WriteOutcome),
    Failed(StoreError),
}

/// Either another store call, or the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step<O> {
    Need(StoreRequest),
    Done(Result<O, ProtocolError>),
}

/// Why an operation could not finish. Hosts apply the configured failure mode.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtocolError {
    Store(StoreError),
    /// The cell's bytes are not a bucket; nothing is overwritten.
    Corrupt(DecodeError),
    /// Lost [`MAX_ATTEMPTS`] races in a row.
    Contention,
    /// A reply that does not answer the request made (a host bug).
    UnexpectedReply,
    /// The remote store holds a completed answer for the key whose seal does not check out
    /// ([`crate::seal`]): planted or altered by whoever reached the engine or the service. Never
    /// replayed, and not a store failure either: see [`ProtocolError::allows_failure_mode`].
    Tampered(SealError),
}

impl ProtocolError {
    pub fn code(&self) -> &'static str {
        match self {
            ProtocolError::Store(e) => e.code(),
            ProtocolError::Corrupt(_) => "store_corrupt",
            ProtocolError::Contention => "store_contention",
            ProtocolError::UnexpectedReply => "store_unexpected_reply",
            ProtocolError::Tampered(_) => "record_corrupt",
        }
    }

    /// Whether the configured failure mode (`on_store_error`) may answer for this error. Not for
    /// a tampered record: the store says the key's request completed, so passing it through could
    /// run it a second time, and replaying it would send what an attacker planted. The client gets
    /// the core's `record_corrupt` answer instead ([`crate::answer`]).
    pub fn allows_failure_mode(&self) -> bool {
        !matches!(self, ProtocolError::Tampered(_))
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::Store(e) => write!(f, "{e}"),
            ProtocolError::Corrupt(e) => write!(f, "{e}"),
            ProtocolError::Contention => {
                f.write_str("too many concurrent writers on one store cell")
            }
            ProtocolError::UnexpectedReply => f.write_str("store reply does not match the request"),
            ProtocolError::Tampered(e) => write!(f, "stored answer refused: {e}"),
        }
    }
}

/// One operation's decision on a bucket.
pub enum Apply<O> {
    /// Write the (modified) bucket back; the outcome holds once the write wins.
    Write(O),
    /// Nothing to write; this is the outcome.
    Keep(O),
}

/// An operation expressed as a change to the bucket of its cell.
pub trait Mutation {
    type Outcome;
    /// Decides on `bucket` (already stripped of expired records) and may modify it.
    fn apply(&mut self, bucket: &mut Bucket, now: UnixMillis) -> Apply<Self::Outcome>;
}

enum State<O> {
    Reading,
    Writing(O),
    Finished,
}

/// A [`Mutation`] in progress against one cell.
pub struct Transaction<M: Mutation> {
    cell: String,
    mutation: M,
    now: UnixMillis,
    attempts: u32,
    state: State<M::Outcome>,
}

impl<M: Mutation> Transaction<M> {
    /// Starts the operation; the first request is always a read of its cell.
    #[must_use = "the first store request must be sent and the transaction resumed with its reply"]
    pub fn start(cell: String, mutation: M, now: UnixMillis) -> (Self, StoreRequest) {
        let request = StoreRequest::Read { cell: cell.clone() };
        let tx = Transaction {
            cell,
            mutation,
            now,
            attempts: 0,
            state: State::Reading,
        };
        (tx, request)
    }

    /// Feeds the answer to the last request.
    #[must_use = "the next store request must be sent, or the outcome acted on"]
    pub fn resume(&mut self, reply: StoreReply) -> Step<M::Outcome> {
        let state = core::mem::replace(&mut self.state, State::Finished);
        match (state, reply) {
            (_, StoreReply::Failed(e)) => Step::Done(Err(ProtocolError::Store(e))),
            (State::Reading, StoreReply::Read(snapshot)) => self.decide(snapshot),
            (State::Writing(outcome), StoreReply::Write(WriteOutcome::Written)) => {
                Step::Done(Ok(outcome))
            }
            (State::Writing(_), StoreReply::Write(WriteOutcome::Conflict)) => {
                self.attempts += 1;
                if self.attempts >= MAX_ATTEMPTS {
                    return Step::Done(Err(ProtocolError::Contention));
                }
                self.state = State::Reading;
                Step::Need(StoreRequest::Read {
                    cell: self.cell.clone(),
                })
            }
            _ => Step::Done(Err(ProtocolError::UnexpectedReply)),
        }
    }

    fn decide(&mut self, snapshot: Option<Snapshot>) -> Step<M::Outcome> {
        let (mut bucket, expect) = match &snapshot {
            None => (Bucket::default(), Expect::Absent),
            Some(snap) => match Bucket::decode(&snap.bytes) {
                Ok(bucket) => (bucket, Expect::Version(snap.version)),
                Err(e) => return Step::Done(Err(ProtocolError::Corrupt(e))),
            },
        };
        bucket.reclaim(self.now);
        match self.mutation.apply(&mut bucket, self.now) {
            Apply::Keep(outcome) => Step::Done(Ok(outcome)),
            Apply::Write(outcome) => {
                self.state = State::Writing(outcome);
                Step::Need(StoreRequest::Write {
                    cell: self.cell.clone(),
                    bytes: bucket.encode(),
                    expect,
                })
            }
        }
    }
}

/// Drives a transaction against a store that answers at once.
pub fn run<S: Store + ?Sized, M: Mutation>(
    store: &mut S,
    cell: String,
    mutation: M,
    now: UnixMillis,
) -> Result<M::Outcome, ProtocolError> {
    let (mut tx, mut request) = Transaction::start(cell, mutation, now);
    loop {
        let reply = match &request {
            StoreRequest::Read { cell } => match store.read(cell) {
                Ok(snapshot) => StoreReply::Read(snapshot),
                Err(e) => StoreReply::Failed(e),
            },
            StoreRequest::Write {
                cell,
                bytes,
                expect,
            } => match store.write(cell, bytes, *expect) {
                Ok(outcome) => StoreReply::Write(outcome),
                Err(e) => StoreReply::Failed(e),
            },
        };
        match tx.resume(reply) {
            Step::Need(next) => request = next,
            Step::Done(result) => return result,
        }
    }
}

/// The outcome of claiming a key for a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// This request owns the key: forward it, then complete or release with `owner`.
    Forward {
        owner: OwnerToken,
        takeover: bool,
    },
    Conflict {
        retry_after: Span,
    },
    Replay(StoredResponse),
    Mismatch,
    /// The cell holds as many live records as it may: the failure mode applies. `retry_after` is
    /// when the cell's first record frees its space.
    StoreFull {
        retry_after: Span,
    },
    /// This client already holds its share of the cell (issue 14): 429, never the failure mode.
    /// `retry_after` is when the first of its own records there frees its space.
    QuotaExceeded {
        retry_after: Span,
    },
}

/// Why a new record was not added to a cell.
pub(crate) enum NoRoom {
    Quota(Span),
    Full(Span),
}

/// Checks that `key` may add a record to `bucket` (issue 14): its scope holds less than its share
/// of the cell, and the cell has room — made, if needed, by dropping claims whose lease has ended.
pub(crate) fn make_room(
    bucket: &mut Bucket,
    key: &StorageKey,
    per_cell: u16,
    quota: Quota,
    now: UnixMillis,
) -> Result<(), NoRoom> {
    let tag = key.quota_tag();
    let share = quota.per_cell(tag.class());
    let (held, first_free) = bucket.held_by(tag, now);
    // A share of the whole cell is no quota: the cell being full is then the reason.
    if share < per_cell && held >= usize::from(share) {
        return Err(NoRoom::Quota(now.until(first_free.unwrap_or(now))));
    }
    if bucket.entries.len() >= usize::from(per_cell) {
        bucket.evict_lapsed_claims(now);
    }
    if bucket.entries.len() >= usize::from(per_cell) {
        let first_free = bucket.first_free_at().unwrap_or(now);
        return Err(NoRoom::Full(now.until(first_free)));
    }
    Ok(())
}

/// Claims `key` for a request with `fingerprint` (semantics §4).
pub struct Claim<'p> {
    pub key: StorageKey,
    pub fingerprint: Fingerprint,
    pub owner: OwnerToken,
    pub policy: &'p Policy,
}

impl Mutation for Claim<'_> {
    type Outcome = ClaimOutcome;

    fn apply(&mut self, bucket: &mut Bucket, now: UnixMillis) -> Apply<ClaimOutcome> {
        let existing = bucket.get(&self.key);
        let is_new = existing.is_none();
        match decide(existing, self.fingerprint, self.owner, now, self.policy) {
            Decision::Claim { claim, takeover } => {
                if is_new {
                    let policy = self.policy;
                    let room = make_room(
                        bucket,
                        &self.key,
                        policy.capacity.per_cell,
                        policy.quota,
                        now,
                    );
                    match room {
                        Ok(()) => {}
                        Err(NoRoom::Quota(retry_after)) => {
                            return Apply::Keep(ClaimOutcome::QuotaExceeded { retry_after })
                        }
                        Err(NoRoom::Full(retry_after)) => {
                            return Apply::Keep(ClaimOutcome::StoreFull { retry_after })
                        }
                    }
                }
                bucket.put(self.key, Record::InFlight(claim));
                Apply::Write(ClaimOutcome::Forward {
                    owner: self.owner,
                    takeover,
                })
            }
            Decision::Conflict { retry_after } => {
                Apply::Keep(ClaimOutcome::Conflict { retry_after })
            }
            Decision::Replay(response) => Apply::Keep(ClaimOutcome::Replay(response)),
            Decision::Mismatch => Apply::Keep(ClaimOutcome::Mismatch),
        }
    }
}

/// The outcome of ending a forwarded request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishOutcome {
    Stored,
    Released,
    /// Outcome in doubt: the claim stays until its lease ends.
    KeptInFlight,
    /// The claim is no longer ours (taken over after our lease ended, or expired): nothing written.
    NotOwner,
}

/// Completes or releases the claim `owner` holds on `key` (semantics §5).
pub struct Finish<'p> {
    pub key: StorageKey,
    pub owner: OwnerToken,
    pub facts: Option<ResponseFacts>,
    pub policy: &'p Policy,
}

impl Mutation for Finish<'_> {
    type Outcome = FinishOutcome;

    fn apply(&mut self, bucket: &mut Bucket, now: UnixMillis) -> Apply<FinishOutcome> {
        let claim = match bucket.get(&self.key) {
            Some(Record::InFlight(claim)) if claim.owner == self.owner => claim.clone(),
            _ => return Apply::Keep(FinishOutcome::NotOwner),
        };
        // Cloned, not taken: a lost race re-applies the mutation to the re-read bucket.
        let facts = self.facts.clone().unwrap_or(ResponseFacts::NeverReached);
        match complete(&claim, facts, now, self.policy) {
            Completion::Store(done) => {
                bucket.put(self.key, Record::Completed(done));
                Apply::Write(FinishOutcome::Stored)
            }
            Completion::Release => {
                bucket.remove(&self.key);
                Apply::Write(FinishOutcome::Released)
            }
            Completion::KeepInFlight => Apply::Keep(FinishOutcome::KeptInFlight),
        }
    }
}

/// The outcome of consuming a one-time token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeOutcome {
    Consumed,
    AlreadyUsed,
    /// No room to record the use; `retry_after` as in [`ClaimOutcome::StoreFull`].
    StoreFull {
        retry_after: Span,
    },
    /// The client holds its share of the cell, as in [`ClaimOutcome::QuotaExceeded`].
    QuotaExceeded {
        retry_after: Span,
    },
}

/// Marks a one-time token used, exactly once (semantics §7). The key carries the token's scope
/// ([`StorageKey::tagged`]), so token uses count against the client's share like its claims.
pub struct Consume {
    pub key: StorageKey,
    pub expires_at: UnixMillis,
    pub per_cell: u16,
    pub quota: Quota,
}

impl Mutation for Consume {
    type Outcome = ConsumeOutcome;

    fn apply(&mut self, bucket: &mut Bucket, now: UnixMillis) -> Apply<ConsumeOutcome> {
        if bucket.get(&self.key).is_some() {
            return Apply::Keep(ConsumeOutcome::AlreadyUsed);
        }
        match make_room(bucket, &self.key, self.per_cell, self.quota, now) {
            Ok(()) => {}
            Err(NoRoom::Quota(retry_after)) => {
                return Apply::Keep(ConsumeOutcome::QuotaExceeded { retry_after })
            }
            Err(NoRoom::Full(retry_after)) => {
                return Apply::Keep(ConsumeOutcome::StoreFull { retry_after })
            }
        }
        bucket.put(
            self.key,
            Record::TokenUsed {
                expires_at: self.expires_at,
            },
        );
        Apply::Write(ConsumeOutcome::Consumed)
    }
}

/// Convenience for hosts with a synchronous store: claim, finish and consume in one call each.
pub struct Engine<'p, S: Store + ?Sized> {
    pub store: &'p mut S,
    pub policy: &'p Policy,
}

impl<S: Store + ?Sized> Engine<'_, S> {
    fn layout(&self) -> Layout {
        Layout {
            capacity: self.policy.capacity,
        }
    }

    #[must_use = "the claim's outcome says what the host must do with the request"]
    pub fn claim(
        &mut self,
        key: StorageKey,
        fingerprint: Fingerprint,
        owner: OwnerToken,
        now: UnixMillis,
    ) -> Result<ClaimOutcome, ProtocolError> {
        let cell = self.layout().cell_name(&key);
        let policy = self.policy;
        run(
            self.store,
            cell,
            Claim {
                key,
                fingerprint,
                owner,
                policy,
            },
            now,
        )
    }

    /// Ends a forwarded request; `facts == None` releases the claim.
    #[must_use = "the finish's outcome says whether the answer was stored"]
    pub fn finish(
        &mut self,
        key: StorageKey,
        owner: OwnerToken,
        facts: Option<ResponseFacts>,
        now: UnixMillis,
    ) -> Result<FinishOutcome, ProtocolError> {
        let cell = self.layout().cell_name(&key);
        let policy = self.policy;
        run(
            self.store,
            cell,
            Finish {
                key,
                owner,
                facts,
                policy,
            },
            now,
        )
    }

    #[must_use = "a token counts as consumed only if the outcome says so"]
    pub fn consume(
        &mut self,
        key: StorageKey,
        expires_at: UnixMillis,
        now: UnixMillis,
    ) -> Result<ConsumeOutcome, ProtocolError> {
        let cell = self.layout().cell_name(&key);
        let per_cell = self.policy.capacity.per_cell;
        let quota = self.policy.quota;
        run(
            self.store,
            cell,
            Consume {
                key,
                expires_at,
                per_cell,
                quota,
            },
            now,
        )
    }
}
