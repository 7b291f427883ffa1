//! The claim / complete / release / consume protocol over a compare-and-set [`Store`], written
//! sans-IO: an operation *asks* for the store call it needs ([`StoreRequest`]) and is resumed with
//! the answer ([`StoreReply`]). A host whose store answers at once (Envoy shared data, the memory
//! store) drives it with `run`; a host whose store answers later (an asynchronous HTTP call from
//! proxy-wasm, which cannot block) keeps the [`Transaction`] between callbacks.
//!
//! Every operation is read → decide on the decoded bucket → conditional write. A lost race returns
//! `Conflict` and the transaction re-reads and decides again, so the decision is always made on the
//! state the write replaces: that is what makes a claim atomic across workers.

use crate::client::scope::StorageKey;
use crate::decision::{stored_until, verdict, ResponseFacts, Verdict};
use crate::policy::Policy;
use crate::record::seal::SealError;
use crate::record::{Bucket, DecodeError, OwnerToken, Record, StoredBody, StoredResponse};
use crate::request::fingerprint::Fingerprint;
use crate::store::rule::{self, Change};
use crate::store::share::{self, Bill, Charge, Payers, ShareRefusal, Space};
use crate::store::{Expect, Layout, Snapshot, Store, StoreError, WriteOutcome};
use crate::time::{Span, UnixMillis};
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

pub(crate) mod claim;
pub(crate) mod immediate;

pub(crate) use claim::make_room;
pub(crate) use claim::ClaimOutcome;
pub use claim::Claiming;
pub(crate) use claim::ConsumeOutcome;
pub(crate) use claim::Consuming;
pub(crate) use claim::FinishOutcome;
use claim::Settling;

/// How many lost races an operation tolerates before giving up (each loss means another request
/// made progress on the same cell, so this bounds work, not correctness).
pub(crate) const MAX_ATTEMPTS: u32 = 16;

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
pub enum TransactionStep<O> {
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
    /// Lost `MAX_ATTEMPTS` races in a row.
    Contention,
    /// A reply that does not answer the request made (a host bug).
    UnexpectedReply,
    /// The remote store holds a completed answer for the key whose seal does not check out
    /// ([`crate::record::seal`]): planted or altered by whoever reached the engine or the service.
    /// Never replayed, and not a store failure either: see `ProtocolError::allows_failure_mode`.
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
    pub(crate) fn allows_failure_mode(&self) -> bool {
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
    pub fn resume(&mut self, reply: StoreReply) -> TransactionStep<M::Outcome> {
        let state = core::mem::replace(&mut self.state, State::Finished);
        match (state, reply) {
            (_, StoreReply::Failed(e)) => TransactionStep::Done(Err(ProtocolError::Store(e))),
            (State::Reading, StoreReply::Read(snapshot)) => self.decide(snapshot),
            (State::Writing(outcome), StoreReply::Write(WriteOutcome::Written)) => {
                TransactionStep::Done(Ok(outcome))
            }
            (State::Writing(_), StoreReply::Write(WriteOutcome::Conflict)) => {
                self.attempts += 1;
                if self.attempts >= MAX_ATTEMPTS {
                    return TransactionStep::Done(Err(ProtocolError::Contention));
                }
                self.state = State::Reading;
                TransactionStep::Need(StoreRequest::Read {
                    cell: self.cell.clone(),
                })
            }
            _ => TransactionStep::Done(Err(ProtocolError::UnexpectedReply)),
        }
    }

    fn decide(&mut self, snapshot: Option<Snapshot>) -> TransactionStep<M::Outcome> {
        let (mut bucket, expect) = match &snapshot {
            None => (Bucket::default(), Expect::Absent),
            Some(snap) => match Bucket::decode(&snap.bytes) {
                Ok(bucket) => (bucket, Expect::Version(snap.version)),
                Err(e) => return TransactionStep::Done(Err(ProtocolError::Corrupt(e))),
            },
        };
        bucket.reclaim(self.now);
        match self.mutation.apply(&mut bucket, self.now) {
            Apply::Keep(outcome) => TransactionStep::Done(Ok(outcome)),
            Apply::Write(outcome) => {
                self.state = State::Writing(outcome);
                TransactionStep::Need(StoreRequest::Write {
                    cell: self.cell.clone(),
                    bytes: bucket.encode(),
                    expect,
                })
            }
        }
    }
}

/// Drives a transaction against a store that answers at once.
pub(crate) fn run<S: Store + ?Sized, M: Mutation>(
    store: &mut S,
    cell: String,
    mutation: M,
    now: UnixMillis,
) -> Result<M::Outcome, ProtocolError> {
    let (tx, request) = Transaction::start(cell, mutation, now);
    drive(store, tx, request)
}

/// [`run`] from a read the caller already made (`first`, the cell as it was just read): an
/// operation that looks at its cell before it charges a share does not read it twice.
pub(crate) fn run_from<S: Store + ?Sized, M: Mutation>(
    store: &mut S,
    cell: String,
    mutation: M,
    now: UnixMillis,
    first: Option<Snapshot>,
) -> Result<M::Outcome, ProtocolError> {
    let (mut tx, _read) = Transaction::start(cell, mutation, now);
    match tx.resume(StoreReply::Read(first)) {
        TransactionStep::Need(request) => drive(store, tx, request),
        TransactionStep::Done(result) => result,
    }
}

fn drive<S: Store + ?Sized, M: Mutation>(
    store: &mut S,
    mut tx: Transaction<M>,
    mut request: StoreRequest,
) -> Result<M::Outcome, ProtocolError> {
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
            TransactionStep::Need(next) => request = next,
            TransactionStep::Done(result) => return result,
        }
    }
}
