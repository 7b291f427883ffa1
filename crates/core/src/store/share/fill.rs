//! How full the store is, where a share's refusal needs to know: shares bind only while the
//! store is under pressure ([`super::Shares::pressure`]), so a busy honest client or a provider's
//! callback route is served however much it holds while the store has room.
//!
//! **Counted in shards, not in one cell.** One counter of the whole store's records would be a
//! cell every request of every worker writes. The record cells are grouped instead into *fill
//! shards* of [`CELLS_PER_SHARD`] consecutive cells, and each shard's records are counted like a
//! payer's ([`super::ledger::Usage`], with the moment each frees its space), under a tag of its
//! own in the ledger cells: a record is charged to the shard of the cell it lives in, whoever
//! pays for it. A shard sees one request in [`Layout::fill_shards`], so its ledger cell is no
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

use super::{held, PayerTag};
use crate::client::scope::StorageKey;
use crate::store::protocol::ProtocolError;
use crate::store::{Layout, Store};
use crate::time::UnixMillis;

/// Record cells per fill shard: 1,024 records at the default 8 per cell, so that a shard's fill
/// is within a few percent of the store's (the default store has ten shards).
pub const CELLS_PER_SHARD: u32 = 128;

/// Which [`PayerTag`] kind a fill shard's tag is (an identity is 0, an address group 1).
const SHARD_KIND: u8 = 2;

/// The fill shard a record is counted in, and how many records its cells hold at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FillShard {
    pub tag: PayerTag,
    pub capacity: u64,
}

impl Layout {
    /// Fill shards: one for every [`CELLS_PER_SHARD`] record cells, at least one.
    pub fn fill_shards(&self) -> u32 {
        self.capacity.cells.div_ceil(CELLS_PER_SHARD).max(1)
    }

    /// The shard of the cell `key` lives in. Its tag leads with the shard's index, so the shards
    /// fall in distinct ledger cells; it ends in a kind no scope's tag has, and a scope whose
    /// hash begins with the other six bytes would have to be found by a SHA-256 preimage search.
    pub fn fill_shard(&self, key: &StorageKey) -> FillShard {
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
}

/// Whether `shard` holds at least `pressure` percent of its records at `now`: then a payer over
/// its share is refused. `0` binds always (the shares are fixed caps), without a read.
pub(crate) fn under_pressure<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    shard: FillShard,
    pressure: u8,
    now: UnixMillis,
) -> Result<bool, ProtocolError> {
    if pressure == 0 {
        return Ok(true);
    }
    let records = held(store, layout, shard.tag, now)?.records;
    Ok(shard.pressed(records, pressure))
}

impl FillShard {
    /// Whether `records` in this shard are at least `pressure` percent of what it holds.
    pub(crate) fn pressed(&self, records: u64, pressure: u8) -> bool {
        u128::from(records) * 100 >= u128::from(self.capacity) * u128::from(pressure)
    }
}
