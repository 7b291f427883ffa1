//! Shares of the whole store: who pays for a record's space, and how many records and
//! bytes each payer may hold at once, so that no client — however many identities it makes up —
//! can deny the store to others.
//!
//! **Who pays.** A scope the client writes itself (any request header) is its own word: a client
//! can send a new `Authorization` value with every request. Each record is therefore charged to
//! the scope *and* to the address group the request came from (the peer, after Envoy's
//! `xff_num_trusted_hops`; IPv6 grouped by its /64 by default, since one host holds a whole /64),
//! unless the scope source is verified — something before this filter established it (a JWT
//! claim in dynamic metadata, a header the operator declares Envoy sets). A record of a
//! peer-scoped request is charged to its address group alone.
//!
//! **Of the whole store, in records and in bytes.** Each payer's records, and the bytes they
//! take, are counted in a *ledger* ([`ledger`]): a fixed set of ledger cells beside the record
//! cells, the payer's tag choosing its cell, changed by compare-and-set like every cell. A payer below its share is never refused — the count is of
//! the whole store, not of the cell its key happens to hash to — and one at its share (in records
//! or in bytes) gets 429 with the moment its first records free their space. Bytes are what a
//! record takes in memory (`Space::of`): a stored answer's body and headers and the record's
//! own overhead, so a client whose answers are large reaches its share with fewer records.
//!
//! **For as long as the record holds space**: a claim until its lease ends (after that a retry may
//! take it over), a stored answer or a token use until it expires. A released claim gives its
//! space back at once.

pub(crate) mod fill;
pub mod ledger;
mod room;
mod space;

pub(crate) use crate::client::payer::Billed;
pub(crate) use crate::client::payer::PayerTag;
pub(crate) use crate::client::payer::Payers;
pub(crate) use crate::client::payer::Share;
pub(crate) use crate::client::payer::ShareReason;
pub(crate) use crate::client::payer::ShareRefusal;
pub(crate) use crate::client::payer::Shares;
pub use fill::Fill;
pub use fill::FillShard;
pub(crate) use room::shift_answer;
pub(crate) use space::Space;

use crate::client::scope::StorageKey;
use crate::store::protocol::{ProtocolError, MAX_ATTEMPTS};
use crate::store::{Expect, Layout, Store, WriteOutcome};
use crate::time::{Span, UnixMillis};
use alloc::string::String;
use alloc::vec::Vec;
use ledger::{Ledger, Usage};

impl Layout {
    /// Ledger cells: one for every 128 records the store holds (at least one), whatever the
    /// records per cell, so a ledger cell holds about as many payers at any layout. A payer's
    /// usage lives in the one its tag chooses.
    pub fn ledger_cells(&self) -> u32 {
        let cells = self.capacity.records().div_ceil(128).max(1);
        u32::try_from(cells).unwrap_or(u32::MAX)
    }

    pub(crate) fn ledger_cell_name(&self, tag: PayerTag) -> String {
        let head = u32::from_be_bytes([tag.0[0], tag.0[1], tag.0[2], tag.0[3]]);
        self.ledger_cell_name_at(head % self.ledger_cells())
    }

    /// The name of ledger cell `index` (`0..ledger_cells`).
    pub(crate) fn ledger_cell_name_at(&self, index: u32) -> String {
        crate::store::numbered("idemgate/s/", index)
    }
}

/// A charge that was made: given back with [`refund`] if its record is not written after all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a charge whose record is not written must be refunded"]
pub(crate) struct Charge {
    pub(crate) bill: Bill,
    pub(crate) space: Space,
}

/// Who one record is charged to: its payers, and the fill shard its cell is counted in (none
/// when no share is counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bill {
    pub(crate) payers: Payers,
    pub(crate) shard: Option<FillShard>,
}

impl Bill {
    /// The bill of a record under `key` charged to `payers`. Its shard is counted when a share
    /// is (the shard's records tell the pressure) or when the shard's bytes are what bounds the
    /// store's memory ([`Shares::memory_counted`]).
    pub(crate) fn of(layout: &Layout, shares: &Shares, payers: Payers, key: &StorageKey) -> Bill {
        Bill {
            payers,
            shard: (shares.counted() || shares.memory_counted).then(|| layout.fill_shard(key)),
        }
    }

    fn tags(&self) -> impl Iterator<Item = PayerTag> + '_ {
        self.payers.tags().chain(self.shard.map(|shard| shard.tag))
    }
}

/// Why a payer was refused: how long until it holds less than its share, and which share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OverShare {
    pub(crate) retry_after: Span,
    pub(crate) refusal: ShareRefusal,
}

impl OverShare {
    pub fn new(retry_after: Span, refusal: ShareRefusal) -> OverShare {
        OverShare {
            retry_after,
            refusal,
        }
    }
}

/// Charges one record that takes `space` to each of `bill`'s payers, each within its share
/// while the record's fill shard is under pressure ([`fill`]) and without a limit otherwise, and
/// counts it in the shard. If one payer is over its share under pressure, nothing stays charged
/// and the answer says when it has room. The shard is read only then: a payer within its share
/// costs no read of it.
pub(crate) fn charge<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    shares: &Shares,
    bill: Bill,
    space: Space,
    now: UnixMillis,
) -> Result<Result<Charge, OverShare>, ProtocolError> {
    let within = |tag: PayerTag| shares.limit_of(&bill.payers, tag);
    if let Err(over) = charge_each(store, layout, bill.payers.tags(), &within, space, now)? {
        if fill::under_pressure(store, layout, bill.shard, shares.pressure_of_memory(), now)? {
            return Ok(Err(over));
        }
        // Not under pressure: the payers are charged all the same, to be counted once it is.
        if let Err(over) = charge_each(store, layout, bill.payers.tags(), &|_| None, space, now)? {
            return Ok(Err(over));
        }
    }
    if let Some(shard) = bill.shard {
        if let Err(e) = change(store, layout, shard.tag, now, |usage| {
            usage.add(space);
            None::<()>
        }) {
            undo(store, layout, bill.payers.tags(), space, now);
            return Err(e);
        }
    }
    Ok(Ok(Charge { bill, space }))
}

/// Charges one record that takes `space` to each of `tags`, within `limit`: all, or (if one is
/// refused) none.
fn charge_each<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    tags: impl Iterator<Item = PayerTag> + Clone,
    limit: &dyn Fn(PayerTag) -> Option<Share>,
    space: Space,
    now: UnixMillis,
) -> Result<Result<(), OverShare>, ProtocolError> {
    // The payers charged so far are the first `charged` of `tags`: no list of them is kept.
    for (charged, tag) in tags.clone().enumerate() {
        let limit = limit(tag);
        let result = change(store, layout, tag, now, |usage| {
            let refusal = limit.map(|limit| ShareRefusal::of(tag, usage.records(), limit));
            let retry_after = usage.charge(limit, space, now).err()?;
            refusal.map(|refusal| OverShare {
                retry_after,
                refusal,
            })
        });
        let refused = match result {
            Ok(refused) => refused,
            Err(e) => {
                undo(store, layout, tags.take(charged), space, now);
                return Err(e);
            }
        };
        if let Some(over) = refused {
            undo(store, layout, tags.take(charged), space, now);
            return Ok(Err(over));
        }
    }
    Ok(Ok(()))
}

/// Moves `bill`'s charge for one record from `from` to `to` (moment and bytes) in one
/// compare-and-set per payer and for its shard:
/// a claim's lease charge becomes its stored answer's, where adding one and refunding the other
/// took two. A hold that has already lapsed is not taken from a later one, and none is added for a
/// moment already past.
pub(crate) fn shift<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    bill: Bill,
    (from, to): (Space, Space),
    now: UnixMillis,
) -> Result<(), ProtocolError> {
    shift_tags(store, layout, bill.tags(), (from, to), now)
}

/// [`shift`] for each of `tags`, one compare-and-set each.
fn shift_tags<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    tags: impl Iterator<Item = PayerTag>,
    (from, to): (Space, Space),
    now: UnixMillis,
) -> Result<(), ProtocolError> {
    for tag in tags {
        change(store, layout, tag, now, |usage| {
            usage.shift((from, to), now);
            None::<()>
        })?;
    }
    Ok(())
}

/// Gives a charge back: its record was not written, or was released. A hold that has already
/// lapsed is not taken from a later one.
pub(crate) fn refund<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    charge: Charge,
    now: UnixMillis,
) -> Result<(), ProtocolError> {
    if now >= charge.space.until {
        return Ok(());
    }
    for tag in charge.bill.tags() {
        change(store, layout, tag, now, |usage| {
            usage.refund(charge.space, now);
            None::<()>
        })?;
    }
    Ok(())
}

/// Best-effort refund of the payers charged so far, when a later one refused or failed: an error
/// here leaves an over-count until the space's end, never an under-count.
fn undo<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    charged: impl Iterator<Item = PayerTag>,
    space: Space,
    now: UnixMillis,
) {
    for tag in charged {
        let bill = Bill {
            payers: Payers::from_tags(Some(tag), None),
            shard: None,
        };
        let _ = refund(store, layout, Charge { bill, space }, now);
    }
}

/// One compare-and-set change to `tag`'s usage: `decide` may modify it and returns `Some` to
/// refuse (nothing written).
fn change<S: Store + ?Sized, R>(
    store: &mut S,
    layout: &Layout,
    tag: PayerTag,
    now: UnixMillis,
    mut decide: impl FnMut(&mut Usage) -> Option<R>,
) -> Result<Option<R>, ProtocolError> {
    let cell = layout.ledger_cell_name(tag);
    for _ in 0..MAX_ATTEMPTS {
        let snapshot = store.read(&cell).map_err(ProtocolError::Store)?;
        // The bytes read are decoded, then rewritten in place: one buffer per change.
        let (mut ledger, expect, buffer) = match snapshot {
            None => (Ledger::default(), Expect::Absent, Vec::new()),
            Some(snap) => (
                Ledger::decode(&snap.bytes).map_err(ProtocolError::Corrupt)?,
                Expect::Version(snap.version),
                snap.bytes,
            ),
        };
        ledger.prune(now);
        if let Some(refused) = decide(ledger.usage_mut(tag)) {
            return Ok(Some(refused));
        }
        match store
            .write(&cell, &ledger.encode_into(buffer), expect)
            .map_err(ProtocolError::Store)?
        {
            WriteOutcome::Written => return Ok(None),
            WriteOutcome::Conflict => continue,
        }
    }
    Err(ProtocolError::Contention)
}

/// What `tag` holds in the store now (for tests, stats and logs): records and bytes.
pub(crate) fn held<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    tag: PayerTag,
    now: UnixMillis,
) -> Result<Held, ProtocolError> {
    let usage = usage(store, layout, tag, now)?;
    Ok(Held {
        records: usage.records(),
        bytes: usage.bytes(),
    })
}

/// `tag`'s usage at `now`, as its ledger cell holds it.
fn usage<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    tag: PayerTag,
    now: UnixMillis,
) -> Result<Usage, ProtocolError> {
    let cell = layout.ledger_cell_name(tag);
    let Some(snapshot) = store.read(&cell).map_err(ProtocolError::Store)? else {
        return Ok(Usage::default());
    };
    let mut ledger = Ledger::decode(&snapshot.bytes).map_err(ProtocolError::Corrupt)?;
    ledger.prune(now);
    Ok(ledger.usage(tag).cloned().unwrap_or_default())
}

/// What [`charge`] would refuse `bill` for, read without charging anything: a payer over its
/// share while the record's fill shard is under pressure — and not full: a full shard is a full
/// store, everyone's `store_full`. A record that has no room in its cell asks, so that a flooder
/// whose key falls in a cell full by chance is told it is over its share, not that the store is
/// full.
pub(crate) fn refusal<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    shares: &Shares,
    bill: Bill,
    now: UnixMillis,
) -> Result<Option<OverShare>, ProtocolError> {
    let mut over = None;
    for tag in bill.payers.tags() {
        if let Some(limit) = shares.limit_of(&bill.payers, tag) {
            let usage = usage(store, layout, tag, now)?;
            if let Some(retry_after) = usage.room_after(limit, now) {
                let refusal = ShareRefusal::of(tag, usage.records(), limit);
                over = Some(OverShare {
                    retry_after,
                    refusal,
                });
                break;
            }
        }
    }
    let pressed = match (over, bill.shard) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(_), Some(shard)) => {
            let fill = held(store, layout, shard.tag, now)?;
            fill.records < shard.capacity && shard.under(fill, layout, shares.pressure_of_memory())
        }
    };
    Ok(over.filter(|_| pressed))
}

/// What a payer holds: [`held`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Held {
    pub(crate) records: u64,
    pub(crate) bytes: u64,
}

#[cfg(test)]
mod tests;
