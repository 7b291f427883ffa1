//! How full the store is, where a share's refusal needs to know: shares bind only while the
//! store is under pressure (`super::Shares::pressure`), so a busy honest client or a provider's
//! callback route is served however much it holds while the store has room.
//!
//! **Counted in shards, not in one cell.** One counter of the whole store's records would be a
//! cell every request of every worker writes. The record cells are grouped instead into *fill
//! shards* of `CELLS_PER_SHARD` consecutive cells, and each shard's records are counted like a
//! payer's (`super::ledger::Usage`, with the moment each frees its space), under a tag of its
//! own in the ledger cells: a record is charged to the shard of the cell it lives in, whoever
//! pays for it. A shard sees one request in `Layout::fill_shards`, so its ledger cell is no
//! hotter than a busy client's.
//!
//! **The shard a key falls in stands for the store.** Storage keys are SHA-256, so an honest
//! client's records spread evenly over the shards, and a shard of 1,024 records (the default
//! layout) is within a few percent of the whole store's fill: a shard crosses the threshold by
//! chance only when the store is close to it (a store 15 % full puts a shard at 20 % about once
//! in 300,000).
//!
//! **Safe against a client that grinds keys.** A client can try keys until one falls in the shard
//! it likes (the least full). That buys nothing: the rule holds *per shard* — a payer over its
//! share adds a record to a shard only while that shard is below the threshold — so every shard,
//! and therefore the store, keeps at least `100% - pressure` of its records for payers within
//! their shares, whichever shards a flooder aims at. A flooder holds at most its share plus the
//! part below the threshold that nobody else took.
//!
//! **Bytes as well as records.** A shard's records also count their bytes, and each shard keeps
//! the part of the store's byte bound (`max_memory`) its records are of the store's: an answer
//! that would take a shard past its part is kept without its body (the honest no-body replay:
//! the client was answered, the retry must still not run again), and the pressure threshold
//! applies to a shard's bytes as to its records.

use super::{held, Held, PayerTag};
use crate::client::scope::StorageKey;
use crate::store::protocol::ProtocolError;
use crate::store::{Layout, Store};
use crate::time::UnixMillis;

/// Record cells per fill shard: 1,024 records at the default 8 per cell, so that a shard's fill
/// is within a few percent of the store's (the default store has ten shards).
pub(crate) const CELLS_PER_SHARD: u32 = 128;

/// Which [`PayerTag`] kind a fill shard's tag is (an identity is 0, an address group 1, a
/// callback route 3).
const SHARD_KIND: u8 = 2;

/// The fill shard a record is counted in, and how many records its cells hold at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FillShard {
    pub tag: PayerTag,
    pub capacity: u64,
}

impl Layout {
    /// Fill shards: one for every [`CELLS_PER_SHARD`] record cells, at least one.
    #[cfg(test)]
    pub(crate) fn fill_shards(&self) -> u32 {
        self.capacity.cells.div_ceil(CELLS_PER_SHARD).max(1)
    }

    /// The shard of the cell `key` lives in. Its tag leads with the shard's index, so the shards
    /// fall in distinct ledger cells; it ends in a kind no scope's tag has, and a scope whose
    /// hash begins with the other six bytes would have to be found by a SHA-256 preimage search.
    pub(crate) fn fill_shard(&self, key: &StorageKey) -> FillShard {
        let index = self.cell_index(key) / CELLS_PER_SHARD;
        let first = index * CELLS_PER_SHARD;
        let cells = self
            .capacity
            .cells
            .saturating_sub(first)
            .min(CELLS_PER_SHARD);
        let mut tag = [0; 8];
        tag[..4].copy_from_slice(&index.to_be_bytes());
        tag[4..7].copy_from_slice(b"ful");
        tag[7] = SHARD_KIND;
        FillShard {
            tag: PayerTag(tag),
            capacity: u64::from(cells) * u64::from(self.capacity.per_cell),
        }
    }

    /// The smallest part of `max_memory` a fill shard of this layout keeps: the last shard's,
    /// which may have fewer cells than the others.
    pub fn smallest_fill_part(&self, max_memory: u64) -> u64 {
        byte_part(self.smallest_shard(), self.capacity.records(), max_memory)
    }

    /// The least `max_memory` whose smallest fill shard's part holds `bytes`.
    pub fn max_memory_for(&self, bytes: u64) -> u64 {
        let all = u128::from(self.capacity.records());
        let smallest = u128::from(self.smallest_shard().max(1));
        let least = (u128::from(bytes) * all).div_ceil(smallest);
        u64::try_from(least).unwrap_or(u64::MAX)
    }

    /// Records of the smallest fill shard: the last one, which may have fewer cells.
    fn smallest_shard(&self) -> u64 {
        let last = match self.capacity.cells % CELLS_PER_SHARD {
            0 => CELLS_PER_SHARD.min(self.capacity.cells),
            rest => rest,
        };
        u64::from(last) * u64::from(self.capacity.per_cell)
    }
}

/// The part of `max_memory` a shard of `records` records keeps in a store of `all` records (and
/// likewise what any `records` of `all` are of it).
pub(crate) fn byte_part(records: u64, all: u64, max_memory: u64) -> u64 {
    let part = u128::from(max_memory) * u128::from(records) / u128::from(all.max(1));
    u64::try_from(part).unwrap_or(u64::MAX)
}

/// Whether `shard` is under pressure at `now` ([`FillShard::under`]): then a payer over its share
/// is refused. No shard, or a pressure of `0`, binds always (the shares are fixed caps), without
/// a read.
pub(crate) fn under_pressure<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    shard: Option<FillShard>,
    (pressure, memory): (u8, Option<u64>),
    now: UnixMillis,
) -> Result<bool, ProtocolError> {
    match Fill::gauge(shard, pressure) {
        None => Ok(true),
        Some(fill) => {
            let held = held(store, layout, fill.shard.tag, now)?;
            Ok(fill.shard.under(held, layout, (pressure, memory)))
        }
    }
}

impl FillShard {
    /// Whether this shard, holding `held`, is under pressure: at least `pressure` percent of its
    /// records, or of its part of the store's bytes (`memory`, where they are counted).
    pub(crate) fn under(
        &self,
        held: Held,
        layout: &Layout,
        (pressure, memory): (u8, Option<u64>),
    ) -> bool {
        let bytes = |memory| self.bytes_pressed(held.bytes, layout, (pressure, memory));
        self.pressed(held.records, pressure) || memory.is_some_and(bytes)
    }

    /// Whether `records` in this shard are at least `pressure` percent of what it holds.
    pub(crate) fn pressed(&self, records: u64, pressure: u8) -> bool {
        u128::from(records) * 100 >= u128::from(self.capacity) * u128::from(pressure)
    }

    /// The part of the store's byte bound `memory` this shard keeps: its records' part of it.
    pub(crate) fn byte_part(&self, layout: &Layout, memory: u64) -> u64 {
        byte_part(self.capacity, layout.capacity.records(), memory)
    }

    /// Whether `bytes` in this shard are at least `pressure` percent of its part of `memory`.
    pub(crate) fn bytes_pressed(
        &self,
        bytes: u64,
        layout: &Layout,
        (pressure, memory): (u8, u64),
    ) -> bool {
        let part = self.byte_part(layout, memory);
        u128::from(bytes) * 100 >= u128::from(part) * u128::from(pressure)
    }
}

/// The fill shard a record is counted in and the pressure from which shares bind there: the rule
/// both stores apply to a payer over its share. The local store reads the shard in its ledger
/// cells; the remote store's requests carry it (the filter's `capacity` and `records_per_cell`
/// place the key, as they would locally) and the shard's usage lives under a ledger key of its
/// own, like a payer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fill {
    pub shard: FillShard,
    /// Percent of the shard's records (`0..=100`).
    pub pressure: u8,
}

impl Fill {
    /// The fill to read before refusing a payer over its share: `None` when it is refused
    /// without a read — no shard counted (nothing to tell pressure by), or a pressure of `0`
    /// (the shares are fixed caps).
    pub(crate) fn gauge(shard: Option<FillShard>, pressure: u8) -> Option<Fill> {
        shard
            .filter(|_| pressure > 0)
            .map(|shard| Fill { shard, pressure })
    }

    /// Whether a payer over its share is refused, the shard holding `records`: only under
    /// pressure. Otherwise it is charged all the same, beyond its share, to be counted once the
    /// shard is under pressure.
    pub(crate) fn binds(&self, records: u64) -> bool {
        self.shard.pressed(records, self.pressure)
    }
}
