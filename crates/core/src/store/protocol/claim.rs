//! The operations on one key's cell: claim it for a request, finish it (store the answer or
//! release the claim), and use a one-time token — each a [`Mutation`] of the cell, run by a
//! [`Transaction`] or [`run`].

use super::*;

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
    /// A late delivery's look-up ([`Protocol::replay`](crate::Protocol::replay)) found no stored answer to give it: nothing
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
pub struct Claiming<'p> {
    pub key: StorageKey,
    pub fingerprint: Fingerprint,
    pub owner: OwnerToken,
    /// Who the claim's space is charged to, kept in the record so its finish moves the charge.
    pub payers: Payers,
    pub policy: &'p Policy,
}

impl Mutation for Claiming<'_> {
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
/// policy's verdict already made: [`Protocol::finish`] makes it once, for the charge it moves and for
/// the record it writes, instead of once for each (and once more per lost race), which copied and
/// filtered the answer's body every time.
pub(super) struct Settling {
    pub(super) key: StorageKey,
    pub(super) owner: OwnerToken,
    pub(super) verdict: Verdict,
    pub(super) ttl: Span,
}

impl Mutation for Settling {
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
pub(crate) struct Consuming {
    pub(crate) key: StorageKey,
    pub(crate) expires_at: UnixMillis,
    pub(crate) per_cell: u16,
}

impl Mutation for Consuming {
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
