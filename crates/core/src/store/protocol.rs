//! The claim / complete / release / consume protocol over a compare-and-set [`Store`], written
//! sans-IO: an operation *asks* for the store call it needs ([`StoreRequest`]) and is resumed with
//! the answer ([`StoreReply`]). A host whose store answers at once (Envoy shared data, the memory
//! store) drives it with [`run`]; a host whose store answers later (an asynchronous HTTP call from
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
    /// Lost `MAX_ATTEMPTS` races in a row.
    Contention,
    /// A reply that does not answer the request made (a host bug).
    UnexpectedReply,
    /// The remote store holds a completed answer for the key whose seal does not check out
    /// ([`crate::record::seal`]): planted or altered by whoever reached the engine or the service.
    /// Never replayed, and not a store failure either: see [`ProtocolError::allows_failure_mode`].
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
        Step::Need(request) => drive(store, tx, request),
        Step::Done(result) => result,
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
    /// One of the request's payers already holds its share of the whole store
    /// ([`crate::store::share`]): 429, never the failure mode. `retry_after` is when enough of its
    /// records free their space; `share` says which share and whose, where the store knows
    /// (`None`: the remote store's answer, which does not name it).
    QuotaExceeded {
        retry_after: Span,
        share: Option<ShareRefusal>,
    },
    /// A late delivery's look-up ([`Engine::replay`]) found no stored answer to give it: nothing
    /// was written, and the delivery is refused as stale.
    NotReplayed,
}

/// Checks that the cell of `key` has room for one more record — made, if needed, by dropping claims
/// whose lease has ended. `Err` holds when the cell's first record frees its space. Whose share the
/// record counts against is the ledger's business ([`crate::store::share`]), not the cell's.
pub(crate) fn make_room(bucket: &mut Bucket, per_cell: u16, now: UnixMillis) -> Result<(), Span> {
    if bucket.entries.len() >= usize::from(per_cell) {
        bucket.evict_lapsed_claims(now);
    }
    if bucket.entries.len() >= usize::from(per_cell) {
        let first_free = bucket.first_free_at().unwrap_or(now);
        return Err(now.until(first_free));
    }
    Ok(())
}

/// Claims `key` for a request with `fingerprint` (`docs/semantics.md` §4).
pub struct Claim<'p> {
    pub key: StorageKey,
    pub fingerprint: Fingerprint,
    pub owner: OwnerToken,
    /// Who the claim's space is charged to, kept in the record so its finish moves the charge.
    pub payers: Payers,
    pub policy: &'p Policy,
}

impl Mutation for Claim<'_> {
    type Outcome = ClaimOutcome;

    fn apply(&mut self, bucket: &mut Bucket, now: UnixMillis) -> Apply<ClaimOutcome> {
        let existing = bucket.get(&self.key);
        let is_new = existing.is_none();
        let policy = self.policy;
        let terms = (policy.lease, policy.ttl);
        let (outcome, change) = rule::claim(
            existing,
            self.fingerprint,
            self.owner,
            self.payers,
            now,
            terms,
        );
        if is_new && matches!(change, Change::Put(_)) {
            if let Err(retry_after) = make_room(bucket, policy.capacity.per_cell, now) {
                return Apply::Keep(ClaimOutcome::StoreFull { retry_after });
            }
        }
        change_bucket(bucket, self.key, change, outcome)
    }
}

/// Carries a [`Change`] out on the cell's bucket.
fn change_bucket<O>(bucket: &mut Bucket, key: StorageKey, change: Change, outcome: O) -> Apply<O> {
    match change {
        Change::Keep => Apply::Keep(outcome),
        Change::Put(record) => {
            bucket.put(key, record);
            Apply::Write(outcome)
        }
        Change::Delete => {
            bucket.remove(&key);
            Apply::Write(outcome)
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

/// Completes or releases the claim `owner` holds on `key` (`docs/semantics.md` §5), with the
/// policy's verdict already made: [`Engine::finish`] makes it once, for the charge it moves and for
/// the record it writes, instead of once for each (and once more per lost race), which copied and
/// filtered the answer's body every time.
struct Settle {
    key: StorageKey,
    owner: OwnerToken,
    verdict: Verdict,
    ttl: Span,
}

impl Mutation for Settle {
    type Outcome = FinishOutcome;

    fn apply(&mut self, bucket: &mut Bucket, now: UnixMillis) -> Apply<FinishOutcome> {
        // Cloned, not taken: a lost race re-applies the mutation to the re-read bucket.
        let existing = bucket.get(&self.key);
        let (outcome, change) =
            rule::finish(existing, self.owner, self.verdict.clone(), now, self.ttl);
        change_bucket(bucket, self.key, change, outcome)
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
    /// A payer holds its share of the store, as in [`ClaimOutcome::QuotaExceeded`].
    QuotaExceeded {
        retry_after: Span,
        share: Option<ShareRefusal>,
    },
}

/// Marks a one-time token used, exactly once (`docs/semantics.md` §7). The key carries the token's
/// scope ([`StorageKey::tagged`]), so token uses count against the client's share like its claims.
pub struct Consume {
    pub key: StorageKey,
    pub expires_at: UnixMillis,
    pub per_cell: u16,
}

impl Mutation for Consume {
    type Outcome = ConsumeOutcome;

    fn apply(&mut self, bucket: &mut Bucket, now: UnixMillis) -> Apply<ConsumeOutcome> {
        let (outcome, change) = rule::consume(bucket.get(&self.key), self.expires_at, now);
        if matches!(change, Change::Put(_)) {
            if let Err(retry_after) = make_room(bucket, self.per_cell, now) {
                return Apply::Keep(ConsumeOutcome::StoreFull { retry_after });
            }
        }
        change_bucket(bucket, self.key, change, outcome)
    }
}

/// The protocol over a store that answers at once (Envoy shared data, the memory store): claim,
/// finish and consume in one call each, with each record charged to its payers' shares of the whole
/// store ([`crate::store::share`]) — charged before the record is written, given back if it is not.
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

    /// Reads the cell of `key`: the snapshot (handed on to the transaction, so the cell is read
    /// once), its bucket and the live record under `key`.
    fn look(
        &mut self,
        cell: &str,
        key: &StorageKey,
        now: UnixMillis,
    ) -> Result<Look, ProtocolError> {
        let snapshot = self.store.read(cell).map_err(ProtocolError::Store)?;
        let mut bucket = match &snapshot {
            None => Bucket::default(),
            Some(snap) => Bucket::decode(&snap.bytes).map_err(ProtocolError::Corrupt)?,
        };
        bucket.reclaim(now);
        let record = bucket.get(key).cloned();
        Ok(Look {
            snapshot,
            bucket,
            record,
        })
    }

    /// Claims `key` for a request charged to `payers` (`docs/semantics.md` §4; shares:
    /// `docs/semantics.md` §2).
    #[must_use = "the claim's outcome says what the host must do with the request"]
    pub fn claim(
        &mut self,
        key: StorageKey,
        fingerprint: Fingerprint,
        owner: OwnerToken,
        payers: Payers,
        now: UnixMillis,
    ) -> Result<ClaimOutcome, ProtocolError> {
        let layout = self.layout();
        let cell = layout.cell_name(&key);
        let policy = self.policy;
        let mut look = self.look(&cell, &key, now)?;
        let terms = (policy.lease, policy.ttl);
        let space = match rule::claim(look.record.as_ref(), fingerprint, owner, payers, now, terms)
        {
            (_, Change::Put(record)) => Space::of(&record),
            // A replay, a 409 or a 422 writes nothing and charges nothing: decided on this read,
            // as the transaction would decide it on the same snapshot.
            (outcome, _) => return Ok(outcome),
        };
        let bill = Bill::of(&layout, &policy.shares, payers, &key);
        // A full cell is the answer before any share (nothing would be written) — unless a payer
        // is over its share under pressure: that is what it is told, not that the store is full.
        if look.record.is_none() {
            if let Err(retry_after) = make_room(&mut look.bucket, policy.capacity.per_cell, now) {
                return Ok(
                    match share::refusal(self.store, &layout, &policy.shares, bill, now)? {
                        Some(over) => ClaimOutcome::QuotaExceeded {
                            retry_after: over.retry_after,
                            share: Some(over.refusal),
                        },
                        None => ClaimOutcome::StoreFull { retry_after },
                    },
                );
            }
        }
        // Only a claim adds a record that holds space.
        let charge = match share::charge(self.store, &layout, &policy.shares, bill, space, now)? {
            Ok(charge) => charge,
            Err(over) => {
                return Ok(ClaimOutcome::QuotaExceeded {
                    retry_after: over.retry_after,
                    share: Some(over.refusal),
                })
            }
        };
        let claim = Claim {
            key,
            fingerprint,
            owner,
            payers,
            policy,
        };
        let outcome = run_from(self.store, cell, claim, now, look.snapshot);
        // The transaction decides first on the very snapshot looked at, so it writes a claim only
        // where one was charged; a charge whose record was not written (another request won the
        // key) is given back — best effort: the outcome stands either way, and a failed refund
        // only over-counts until the charge's end.
        if !matches!(outcome, Ok(ClaimOutcome::Forward { .. })) {
            let _ = share::refund(self.store, &layout, charge, now);
        }
        outcome
    }

    /// Looks `key` up for a late delivery ([`crate::decision::decide_late`]): its stored answer
    /// ([`ClaimOutcome::Replay`]) or [`ClaimOutcome::NotReplayed`]. One read; nothing is written
    /// or charged, so it costs less than the claim a timely delivery makes.
    #[must_use = "the outcome says what the delivery gets"]
    pub fn replay(
        &mut self,
        key: StorageKey,
        fingerprint: Fingerprint,
        now: UnixMillis,
    ) -> Result<ClaimOutcome, ProtocolError> {
        let cell = self.layout().cell_name(&key);
        let look = self.look(&cell, &key, now)?;
        Ok(rule::replay(look.record.as_ref(), fingerprint, now).0)
    }

    /// Ends a forwarded request; `facts == None` releases the claim. A stored answer's space is
    /// charged until it expires (before it is written: a completion must land, so it is never
    /// refused, and the count is never below the truth), then the claim's charge until its lease
    /// end is given back; a released claim gives its charge back.
    #[must_use = "the finish's outcome says whether the answer was stored"]
    pub fn finish(
        &mut self,
        key: StorageKey,
        owner: OwnerToken,
        facts: Option<ResponseFacts>,
        now: UnixMillis,
    ) -> Result<FinishOutcome, ProtocolError> {
        let layout = self.layout();
        let cell = layout.cell_name(&key);
        let policy = self.policy;
        let look = self.look(&cell, &key, now)?;
        let claim = match look.record {
            Some(Record::InFlight(claim)) if claim.owner == owner => claim,
            _ => return Ok(FinishOutcome::NotOwner),
        };
        let bill = Bill::of(&layout, &policy.shares, claim.payers, &key);
        let lease_charge = Charge {
            bill,
            space: Space::of_claim(&claim),
        };
        let mut verdict = verdict(facts.unwrap_or(ResponseFacts::NeverReached), policy);
        let until = stored_until(&claim, now, policy.ttl);
        // The claim's charge becomes the stored answer's before the answer is written (one
        // compare-and-set for the fill shard and one per payer). The answer keeps its body only
        // where its shard has room for the bytes ([`share::shift_answer`], decided in the
        // shard's compare-and-set); otherwise it is stored without it — never refused. Never
        // let the ledger keep an answer from landing (that would run the request again after
        // the lease): if the charge cannot be moved, the claim's charge is kept instead (the
        // payer is counted until the lease ends, then not at all for this answer: an
        // under-count of one record, never a second execution) and the body is not kept.
        let lease = lease_charge.space;
        let moved = match &mut verdict {
            Verdict::Store(answer) => {
                let whole = Space::of_answer(answer, until);
                let body = core::mem::replace(&mut answer.body, StoredBody::NotKept);
                let bare = Space::of_answer(answer, until);
                let spaces = (lease, whole, bare);
                match share::shift_answer(self.store, &layout, &policy.shares, bill, spaces, now) {
                    Ok(true) => {
                        answer.body = body;
                        Some(whole)
                    }
                    Ok(false) => Some(bare),
                    Err(_) => None,
                }
            }
            _ => None,
        };
        let settle = Settle {
            key,
            owner,
            verdict,
            ttl: policy.ttl,
        };
        let outcome = run_from(self.store, cell, settle, now, look.snapshot);
        match (&outcome, moved) {
            (Ok(FinishOutcome::Released), None) => {
                // An error here only leaves the claim counted until its lease ends.
                let _ = share::refund(self.store, &layout, lease_charge, now);
            }
            // Moved, but the answer was not stored after all (not the owner any more, or the
            // write failed): the charge goes back to the claim's lease, best effort.
            (result, Some(answer)) if !matches!(result, Ok(FinishOutcome::Stored)) => {
                let _ = share::shift(self.store, &layout, bill, (answer, lease), now);
            }
            // Stored with its charge moved; stored without it (it could not be moved: the lease
            // charge stays, see above); kept in flight or not the owner: nothing more to do.
            _ => {}
        }
        outcome
    }

    /// Marks a one-time token used, charged to `payers` for as long as the use is remembered.
    #[must_use = "a token counts as consumed only if the outcome says so"]
    pub fn consume(
        &mut self,
        key: StorageKey,
        expires_at: UnixMillis,
        payers: Payers,
        now: UnixMillis,
    ) -> Result<ConsumeOutcome, ProtocolError> {
        let layout = self.layout();
        let cell = layout.cell_name(&key);
        let mut look = self.look(&cell, &key, now)?;
        if look.record.is_some() {
            return Ok(ConsumeOutcome::AlreadyUsed);
        }
        let shares = self.policy.shares;
        let bill = Bill::of(&layout, &shares, payers, &key);
        if let Err(retry_after) = make_room(&mut look.bucket, self.policy.capacity.per_cell, now) {
            // As for a claim: a payer over its share under pressure is told so.
            return Ok(
                match share::refusal(self.store, &layout, &shares, bill, now)? {
                    Some(over) => ConsumeOutcome::QuotaExceeded {
                        retry_after: over.retry_after,
                        share: Some(over.refusal),
                    },
                    None => ConsumeOutcome::StoreFull { retry_after },
                },
            );
        }
        // Charged for as long as the use is remembered ([`rule::token_hold`]), not only until
        // the token expires.
        let hold = Space::bare(rule::token_hold(expires_at, now));
        let charge = match share::charge(self.store, &layout, &shares, bill, hold, now)? {
            Ok(charge) => charge,
            Err(over) => {
                return Ok(ConsumeOutcome::QuotaExceeded {
                    retry_after: over.retry_after,
                    share: Some(over.refusal),
                })
            }
        };
        let consume = Consume {
            key,
            expires_at,
            per_cell: self.policy.capacity.per_cell,
        };
        let outcome = run_from(self.store, cell, consume, now, look.snapshot);
        if !matches!(outcome, Ok(ConsumeOutcome::Consumed)) {
            // Best effort, as for a claim: the outcome stands.
            let _ = share::refund(self.store, &layout, charge, now);
        }
        outcome
    }
}

/// A cell as [`Engine`] read it before deciding whether to charge.
struct Look {
    snapshot: Option<Snapshot>,
    /// Its records, the expired ones dropped.
    bucket: Bucket,
    record: Option<Record>,
}
