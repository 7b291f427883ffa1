//! The ordering rules on the local store: [`resource::begin`] and [`resource::settle`] as
//! [`Mutation`]s of the cell that holds the resource's record, so they run in the same read →
//! decide → compare-and-set loop as claims (`crate::store::protocol::run`). A new resource
//! record takes space like a claim's and is charged like one ([`begin`]): to the route when it
//! has a share (`routes[].share`) and, on a route without a signature, to the sender's address
//! group — the payers of the delivery's own claim — within their shares while the store is under
//! pressure (`share::charge`, the claim's rule). The charge lapses with the record's TTL, as a
//! stored answer's does; a record that lives on (a settle extends it) was charged once.

use crate::client::scope::StorageKey;
use crate::order::resource::{self, Begin, BeginOutcome, SettleOutcome};
use crate::policy::Policy;
use crate::record::resource::Resource;
use crate::record::{Bucket, OwnerToken, Record};
use crate::store::protocol::{make_room, run_from, Apply, Mutation, ProtocolError};
use crate::store::share::{self, Bill, Payers, Space};
use crate::store::{Layout, Store};
use crate::time::{Span, UnixMillis};
use alloc::string::String;

fn resource_of<'b>(bucket: &'b Bucket, key: &StorageKey) -> Option<&'b Resource> {
    match bucket.get(key) {
        Some(Record::Resource(r)) => Some(r),
        _ => None,
    }
}

/// [`resource::begin`] on the local store for the event of a delivery whose claim was charged to
/// `payers`: a begin that makes a new resource record charges it to them first (given back if
/// it is not written after all); one over its share under pressure is refused, 429 naming the
/// share, and nothing is written. A full cell is answered before any share, as for a claim —
/// unless a payer is over its share under pressure: that is what it is told.
pub fn begin<S: Store + ?Sized>(
    store: &mut S,
    policy: &Policy,
    key: StorageKey,
    begin: Begin<'_>,
    payers: Payers,
    now: UnixMillis,
) -> Result<BeginOutcome, ProtocolError> {
    let layout = Layout {
        capacity: policy.capacity,
    };
    let cell = layout.cell_name(&key);
    let snapshot = store.read(&cell).map_err(ProtocolError::Store)?;
    let mut bucket = match &snapshot {
        None => Bucket::default(),
        Some(snap) => Bucket::decode(&snap.bytes).map_err(ProtocolError::Corrupt)?,
    };
    bucket.reclaim(now);
    let current = resource_of(&bucket, &key);
    let (decided, written) = resource::begin(current, &begin, now);
    let event = BeginEvent {
        key,
        begin,
        per_cell: policy.capacity.per_cell,
    };
    let record = match written {
        Some(record) if resource::creates(current, Some(&record), now) => record,
        // Nothing new holds space: decided on this read, as the transaction decides on it.
        _ => return run_from(store, cell, event, now, snapshot),
    };
    let space = Space::of(&Record::Resource(record));
    let bill = Bill::of(&layout, &policy.shares, payers, &key);
    if let Err(retry_after) = make_room(&mut bucket, policy.capacity.per_cell, now) {
        return Ok(
            match share::refusal(store, &layout, &policy.shares, bill, now)? {
                Some(over) => BeginOutcome::QuotaExceeded {
                    retry_after: over.retry_after,
                    share: Some(over.refusal),
                },
                None => BeginOutcome::StoreFull { retry_after },
            },
        );
    }
    let charge = match share::charge(store, &layout, &policy.shares, bill, space, now)? {
        Ok(charge) => charge,
        Err(over) => {
            return Ok(BeginOutcome::QuotaExceeded {
                retry_after: over.retry_after,
                share: Some(over.refusal),
            })
        }
    };
    let outcome = run_from(store, cell, event, now, snapshot);
    // The transaction decides first on the snapshot read here, so it makes the record charged
    // for unless another request changed the cell meanwhile: then the charge is given back (best
    // effort, as a claim's: a failed refund over-counts until the record's TTL, never under).
    if outcome.as_ref() != Ok(&decided) {
        let _ = share::refund(store, &layout, charge, now);
    }
    outcome
}

/// [`resource::begin`] on the cell of `key`.
pub(crate) struct BeginEvent<'a> {
    pub(crate) key: StorageKey,
    pub(crate) begin: Begin<'a>,
    pub(crate) per_cell: u16,
}

impl Mutation for BeginEvent<'_> {
    type Outcome = BeginOutcome;

    fn apply(&mut self, bucket: &mut Bucket, now: UnixMillis) -> Apply<BeginOutcome> {
        let current = resource_of(bucket, &self.key);
        let is_new = current.is_none();
        let (outcome, change) = resource::begin(current, &self.begin, now);
        let Some(record) = change else {
            return Apply::Keep(outcome);
        };
        if is_new {
            if let Err(retry_after) = make_room(bucket, self.per_cell, now) {
                return Apply::Keep(BeginOutcome::StoreFull { retry_after });
            }
        }
        bucket.put(self.key, Record::Resource(record));
        Apply::Write(outcome)
    }
}

/// [`resource::settle`] on the cell of `key`.
pub(crate) struct SettleEvent {
    pub(crate) key: StorageKey,
    pub(crate) owner: OwnerToken,
    pub(crate) to: String,
    pub(crate) applied: bool,
    pub(crate) ttl: Span,
}

impl Mutation for SettleEvent {
    type Outcome = SettleOutcome;

    fn apply(&mut self, bucket: &mut Bucket, now: UnixMillis) -> Apply<SettleOutcome> {
        let current = resource_of(bucket, &self.key);
        match resource::settle(current, self.owner, &self.to, self.applied, self.ttl, now) {
            (outcome, Some(record)) => {
                bucket.put(self.key, Record::Resource(record));
                Apply::Write(outcome)
            }
            (outcome, None) => Apply::Keep(outcome),
        }
    }
}

#[cfg(test)]
mod tests;
