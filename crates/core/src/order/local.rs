//! The ordering rules on the local store: [`resource::begin`] and [`resource::settle`] as
//! [`Mutation`]s of the cell that holds the resource's record, so they run in the same read →
//! decide → compare-and-set loop as claims ([`crate::store::protocol::run`]) and a resource record
//! takes space like any record (a callback route's resources are its provider's, whose signature
//! was checked: they are bounded by the cells, not charged to a share).

use super::resource::{self, Begin, BeginOutcome, Resource, SettleOutcome};
use crate::client::scope::StorageKey;
use crate::store::protocol::{make_room, Apply, Mutation};
use crate::store::record::{Bucket, OwnerToken, Record};
use crate::time::{Span, UnixMillis};
use alloc::string::String;

fn resource_of<'b>(bucket: &'b Bucket, key: &StorageKey) -> Option<&'b Resource> {
    match bucket.get(key) {
        Some(Record::Resource(r)) => Some(r),
        _ => None,
    }
}

/// [`resource::begin`] on the cell of `key`.
pub struct BeginEvent<'a> {
    pub key: StorageKey,
    pub begin: Begin<'a>,
    pub per_cell: u16,
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
pub struct SettleEvent {
    pub key: StorageKey,
    pub owner: OwnerToken,
    pub to: String,
    pub applied: bool,
    pub ttl: Span,
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
