//! The protocol over a store that answers at once: [`Protocol`].

use super::*;

/// The protocol over a store that answers at once (Envoy shared data, the memory store): claim,
/// finish and consume in one call each, with each record charged to its payers' shares of the whole
/// store ([`crate::store::share`]) — charged before the record is written, given back if it is not.
pub struct Protocol<'p, S: Store + ?Sized> {
    pub store: &'p mut S,
    pub policy: &'p Policy,
}

impl<S: Store + ?Sized> Protocol<'_, S> {
    fn layout(&self) -> Layout {
        Layout {
            capacity: self.policy.capacity,
        }
    }

    /// Reads the cell: the snapshot (handed on to the transaction, so the cell is read once) and
    /// its bucket.
    fn look(&mut self, cell: &str, now: UnixMillis) -> Result<Look, ProtocolError> {
        let snapshot = self.store.read(cell).map_err(ProtocolError::Store)?;
        let mut bucket = match &snapshot {
            None => Bucket::default(),
            Some(snap) => Bucket::decode(&snap.bytes).map_err(ProtocolError::Corrupt)?,
        };
        bucket.reclaim(now);
        Ok(Look { snapshot, bucket })
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
        let mut look = self.look(&cell, now)?;
        let terms = (policy.lease, policy.ttl);
        let live = look.bucket.get(&key);
        let absent = live.is_none();
        let space = match rule::claim(live, fingerprint, owner, payers, now, terms) {
            (_, Change::Put(record)) => Space::of(&record),
            // A replay, a 409 or a 422 writes nothing and charges nothing: decided on this read,
            // as the transaction would decide it on the same snapshot.
            (outcome, _) => return Ok(outcome),
        };
        let bill = Bill::of(&layout, &policy.shares, payers, &key);
        // A full cell is the answer before any share (nothing would be written) — unless a payer
        // is over its share under pressure: that is what it is told, not that the store is full.
        if absent {
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
        let claim = Claiming {
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

    /// Looks `key` up for a late delivery (`crate::decision::decide_late`): its stored answer
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
        let look = self.look(&cell, now)?;
        Ok(rule::replay(look.bucket.get(&key), fingerprint, now).0)
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
        let look = self.look(&cell, now)?;
        let claim = match look.bucket.get(&key) {
            Some(Record::InFlight(claim)) if claim.owner == owner => claim.clone(),
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
        let settle = Settling {
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
        let mut look = self.look(&cell, now)?;
        if look.bucket.get(&key).is_some() {
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
        let consume = Consuming {
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

/// A cell as [`Protocol`] read it before deciding whether to charge.
struct Look {
    snapshot: Option<Snapshot>,
    /// Its records, the expired ones dropped. The record under the key is looked up in it, not
    /// copied out: a stored answer's headers and body were cloned once per replay for that.
    bucket: Bucket,
}
