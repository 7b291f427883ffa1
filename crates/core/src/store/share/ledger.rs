//! A ledger cell: what each payer holds in the whole store, as a few *holds* (records that free
//! their space at the same moment, and their bytes), and its compact encoding.
//!
//! A payer's usage has to fall by itself as its records lapse — the store has no listing, and
//! nobody tells the ledger when a completed record expires — so the ledger keeps, per payer, how
//! many records and bytes free their space at which moment. At most `MAX_HOLDS` moments are kept
//! per payer: past that, the two closest are merged into the later one. A merged record is
//! counted a little longer than it really holds space (never shorter), so the count is never below
//! the truth, and above it only by the records whose moment was moved, by at most the gap between
//! the two moments merged.

use super::{PayerTag, Share, Space};
use crate::codec::{Reader, Writer};
use crate::policy::RECORD_OVERHEAD;
use crate::record::DecodeError;
use crate::time::{Span, UnixMillis};
use alloc::vec::Vec;

/// Moments kept per payer (see the module docs).
pub(crate) const MAX_HOLDS: usize = 16;

/// Records of one payer that free their space at `until`, and the bytes they take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hold {
    pub(crate) until: UnixMillis,
    pub(crate) records: u32,
    pub(crate) bytes: u64,
}

/// What one payer holds: its holds, sorted by `until`, none lapsed once pruned.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Usage {
    pub(crate) holds: Vec<Hold>,
}

impl Usage {
    /// Records held at `now` (after `Ledger::prune`, every hold counts).
    pub(crate) fn records(&self) -> u64 {
        self.holds.iter().map(|h| u64::from(h.records)).sum()
    }

    /// Bytes held at `now` (after `Ledger::prune`).
    pub(crate) fn bytes(&self) -> u64 {
        self.holds
            .iter()
            .fold(0u64, |sum, h| sum.saturating_add(h.bytes))
    }

    /// How long until the payer holds less than `limit` in records *and* in bytes: the first
    /// moment after which what is left is below both. `None` when it already is.
    pub(crate) fn room_after(&self, limit: Share, now: UnixMillis) -> Option<Span> {
        let (mut records, mut bytes) = (self.records(), self.bytes());
        let below = |records: u64, bytes: u64| records < limit.records && bytes < limit.bytes;
        if below(records, bytes) {
            return None;
        }
        for hold in &self.holds {
            records = records.saturating_sub(u64::from(hold.records));
            bytes = bytes.saturating_sub(hold.bytes);
            if below(records, bytes) {
                return Some(now.until(hold.until));
            }
        }
        // Unreachable with limits ≥ 1 (all holds gone leaves 0 < limit); a limit of 0 means
        // no room ever comes back while the configuration stands.
        Some(now.until(self.holds.last().map_or(now, |h| h.until)))
    }

    /// Adds one record that takes `space`.
    pub(crate) fn add(&mut self, space: Space) {
        match self.holds.binary_search_by(|h| h.until.cmp(&space.until)) {
            Ok(i) => {
                let hold = &mut self.holds[i];
                hold.records = hold.records.saturating_add(1);
                hold.bytes = hold.bytes.saturating_add(space.bytes);
            }
            Err(i) => self.holds.insert(
                i,
                Hold {
                    until: space.until,
                    records: 1,
                    bytes: space.bytes,
                },
            ),
        }
        if self.holds.len() > MAX_HOLDS {
            self.merge_closest();
        }
    }

    /// Takes one record that took `space` off the usage: from the hold at its moment, or the
    /// first later one (where a merge moved it). Nothing when none is left.
    pub(crate) fn remove(&mut self, space: Space) {
        let Some(i) = self.holds.iter().position(|h| h.until >= space.until) else {
            return;
        };
        let hold = &mut self.holds[i];
        hold.records = hold.records.saturating_sub(1);
        hold.bytes = hold.bytes.saturating_sub(space.bytes);
        if hold.records == 0 {
            self.holds.remove(i);
        }
    }

    /// Drops the holds that have lapsed at `now`.
    pub(crate) fn prune(&mut self, now: UnixMillis) {
        self.holds.retain(|h| now < h.until);
    }

    /// Charges one record that takes `space`, within `limit` (`None`: not counted): refused,
    /// with nothing changed, by how long until there is room. The payer must be below its share
    /// in records and in bytes *before* the record: a claim's answer is not known yet, and once
    /// stored it is never refused ([`Usage::shift`]), so a payer goes over its byte share by at
    /// most the answers of its claims in flight, and then gets no new claim until it is below
    /// again. The rule of a charge for both stores: the local ledger cells and the remote store's
    /// ledger keys.
    pub(crate) fn charge(
        &mut self,
        limit: Option<Share>,
        space: Space,
        now: UnixMillis,
    ) -> Result<(), Span> {
        match limit.and_then(|limit| self.room_after(limit, now)) {
            Some(retry_after) => Err(retry_after),
            None => {
                self.add(space);
                Ok(())
            }
        }
    }

    /// Moves one record's charge from `from` to `to` (a claim's lease charge becomes its stored
    /// answer's, bytes and all). A hold that has already lapsed is not taken from a later one, and
    /// none is added for a moment already past.
    pub(crate) fn shift(&mut self, (from, to): (Space, Space), now: UnixMillis) {
        if now < from.until {
            self.remove(from);
        }
        if now < to.until {
            self.add(to);
        }
    }

    /// Gives one record's charge back (its record was not written, or released).
    pub(crate) fn refund(&mut self, space: Space, now: UnixMillis) {
        if now < space.until {
            self.remove(space);
        }
    }

    /// Merges the two neighbouring holds whose moments are closest, into the later moment.
    fn merge_closest(&mut self) {
        let Some(i) = (0..self.holds.len().saturating_sub(1))
            .min_by_key(|&i| self.holds[i].until.until(self.holds[i + 1].until))
        else {
            return;
        };
        let earlier = self.holds.remove(i);
        let later = &mut self.holds[i];
        later.records = later.records.saturating_add(earlier.records);
        later.bytes = later.bytes.saturating_add(earlier.bytes);
    }
}

/// One ledger cell: the usage of every payer whose tag maps to it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ledger {
    pub(crate) entries: Vec<(PayerTag, Usage)>,
}

const MAGIC: &[u8; 2] = b"IL";
/// 2: each hold carries its bytes. A version-1 cell (written before bytes were counted, still
/// in an engine's keyspace after an upgrade) is read with [`RECORD_OVERHEAD`] bytes per record:
/// its answers' bytes are not known, so for at most one TTL they are under-counted.
const VERSION: u8 = 2;
const VERSION_RECORDS_ONLY: u8 = 1;
/// Encoded lengths: magic, version and count; a payer's tag and hold count; one hold (version 2).
const HEAD_LEN: usize = 2 + 1 + 4;
const ENTRY_LEN: usize = 8 + 1;
const HOLD_LEN: usize = 8 + 4 + 8;
/// A version-1 hold (no bytes): the shortest a hold is, to bound what a count may reserve.
const HOLD_LEN_RECORDS_ONLY: usize = 8 + 4;

impl Ledger {
    /// Drops lapsed holds and payers that hold nothing: the moment a ledger cell is rewritten is
    /// when it forgets, which keeps it as small as the records it counts.
    pub(crate) fn prune(&mut self, now: UnixMillis) {
        for (_, usage) in &mut self.entries {
            usage.prune(now);
        }
        self.entries.retain(|(_, usage)| !usage.holds.is_empty());
    }

    pub(crate) fn usage(&self, tag: PayerTag) -> Option<&Usage> {
        self.entries.iter().find(|(t, _)| *t == tag).map(|(_, u)| u)
    }

    pub(crate) fn usage_mut(&mut self, tag: PayerTag) -> &mut Usage {
        let at = match self.entries.iter().position(|(t, _)| *t == tag) {
            Some(at) => at,
            None => {
                self.entries.push((tag, Usage::default()));
                self.entries.len() - 1
            }
        };
        &mut self.entries[at].1
    }

    /// Empty is the empty byte string, as for a bucket. Written into one buffer of the exact
    /// length: a cell is rewritten several times per request, and growing the buffer by doubling
    /// cost more than the encoding itself (`make bench-work`'s profile).
    pub fn encode(&self) -> Vec<u8> {
        self.encode_into(Vec::new())
    }

    /// [`Ledger::encode`] into `buffer`, whatever it held: a change rewrites the bytes it read.
    pub(crate) fn encode_into(&self, buffer: Vec<u8>) -> Vec<u8> {
        let held = || {
            self.entries
                .iter()
                .filter(|(_, usage)| !usage.holds.is_empty())
        };
        let (count, len) = held().fold((0usize, HEAD_LEN), |(count, len), (_, usage)| {
            (count + 1, len + ENTRY_LEN + usage.holds.len() * HOLD_LEN)
        });
        let mut w = Writer::reusing(buffer, len);
        if count == 0 {
            return w.finish();
        }
        w.bytes(MAGIC);
        w.u8(VERSION);
        w.u32(count as u32);
        for (tag, usage) in held() {
            w.bytes(&tag.0);
            w.u8(usage.holds.len() as u8);
            for hold in &usage.holds {
                w.u64(hold.until.0);
                w.u32(hold.records);
                w.u64(hold.bytes);
            }
        }
        w.finish()
    }

    /// Arbitrary bytes give a typed error, never a panic.
    pub fn decode(bytes: &[u8]) -> Result<Ledger, DecodeError> {
        if bytes.is_empty() {
            return Ok(Ledger::default());
        }
        let mut r = Reader::new(bytes);
        if r.array::<2>()? != *MAGIC {
            return Err(DecodeError::BadMagic);
        }
        let with_bytes = match r.u8()? {
            VERSION => true,
            VERSION_RECORDS_ONLY => false,
            other => return Err(DecodeError::UnsupportedVersion(other)),
        };
        let count = r.u32()?;
        if count == 0 {
            // An empty ledger is the empty byte string.
            return Err(DecodeError::InvalidLedger);
        }
        // Reserved up front, never more than the remaining bytes can hold (`count` is untrusted),
        // and one more: the payer a request charges may be new to the cell.
        let fits = r.remaining() / (ENTRY_LEN + HOLD_LEN_RECORDS_ONLY);
        let mut entries = Vec::with_capacity((count as usize).min(fits) + 1);
        for _ in 0..count {
            let tag = PayerTag(r.array::<8>()?);
            let holds = r.u8()?;
            // One spelling per ledger: no empty usage (it is not written), no payer twice.
            if holds == 0
                || usize::from(holds) > MAX_HOLDS
                || entries.iter().any(|(t, _)| *t == tag)
            {
                return Err(DecodeError::InvalidLedger);
            }
            // Room for one more hold: the usage a request decodes is the one it adds to.
            let mut usage = Usage {
                holds: Vec::with_capacity(usize::from(holds) + 1),
            };
            for _ in 0..holds {
                let until = UnixMillis(r.u64()?);
                let records = r.u32()?;
                let bytes = if with_bytes {
                    r.u64()?
                } else {
                    u64::from(records).saturating_mul(RECORD_OVERHEAD)
                };
                if usage.holds.last().is_some_and(|h| h.until >= until) || records == 0 {
                    return Err(DecodeError::InvalidLedger);
                }
                usage.holds.push(Hold {
                    until,
                    records,
                    bytes,
                });
            }
            entries.push((tag, usage));
        }
        if !r.is_empty() {
            return Err(DecodeError::TrailingBytes);
        }
        Ok(Ledger { entries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: PayerTag = PayerTag([1, 2, 3, 4, 5, 6, 7, 0]);

    fn at(until: u64, bytes: u64) -> Space {
        Space {
            until: UnixMillis(until),
            bytes,
        }
    }

    fn records(records: u64) -> Share {
        Share {
            records,
            bytes: u64::MAX,
        }
    }

    #[test]
    fn usage_counts_until_each_hold_lapses() {
        let mut ledger = Ledger::default();
        let usage = ledger.usage_mut(T);
        usage.add(at(300, 10));
        usage.add(at(100, 10));
        usage.add(at(100, 10));
        assert_eq!(usage.records(), 3);
        assert_eq!(usage.bytes(), 30);
        // Below 2 once the two that end at 100 are gone; below 3 already.
        assert_eq!(usage.room_after(records(2), UnixMillis(50)), Some(Span(50)));
        assert_eq!(
            usage.room_after(records(1), UnixMillis(50)),
            Some(Span(250))
        );
        assert_eq!(usage.room_after(records(4), UnixMillis(50)), None);
        ledger.prune(UnixMillis(100));
        assert_eq!(ledger.usage(T).map(Usage::records), Some(1));
        assert_eq!(ledger.usage(T).map(Usage::bytes), Some(10));
        ledger.prune(UnixMillis(300));
        assert_eq!(ledger.usage(T), None);
        assert!(ledger.encode().is_empty());
    }

    #[test]
    fn bytes_bind_as_well_as_records() {
        let mut usage = Usage::default();
        let share = Share {
            records: 100,
            bytes: 1_000,
        };
        let now = UnixMillis(0);
        // Claims take little; their answers are never refused, however large.
        assert_eq!(usage.charge(Some(share), at(50, 100), now), Ok(()));
        assert_eq!(usage.charge(Some(share), at(60, 100), now), Ok(()));
        usage.shift((at(50, 100), at(500, 900)), now);
        usage.shift((at(60, 100), at(700, 400)), now);
        assert_eq!((usage.records(), usage.bytes()), (2, 1_300));
        // Far below the record share, at the byte share: refused until the first answer lapses
        // (400 bytes left is below 1,000), and nothing charged.
        assert_eq!(usage.charge(Some(share), at(80, 100), now), Err(Span(500)));
        assert_eq!((usage.records(), usage.bytes()), (2, 1_300));
        // A refund of a claim takes its bytes back too.
        assert_eq!(usage.charge(Some(records(5)), at(80, 100), now), Ok(()));
        usage.refund(at(80, 100), now);
        assert_eq!((usage.records(), usage.bytes()), (2, 1_300));
    }

    #[test]
    fn merging_never_counts_a_record_shorter() {
        let mut usage = Usage::default();
        for i in 0..(MAX_HOLDS as u64 + 10) {
            usage.add(at(1_000 + i * i, 7));
        }
        assert_eq!(usage.holds.len(), MAX_HOLDS);
        assert_eq!(usage.records(), MAX_HOLDS as u64 + 10);
        assert_eq!(usage.bytes(), 7 * (MAX_HOLDS as u64 + 10));
        // Every record is still counted at its own moment: the last moment survives merges.
        assert_eq!(
            usage.holds.last().map(|h| h.until),
            Some(UnixMillis(1_000 + (MAX_HOLDS as u64 + 9).pow(2)))
        );
        // Removing at a merged-away moment takes the record from the later hold it went to.
        usage.remove(at(1_001, 7));
        assert_eq!(usage.records(), MAX_HOLDS as u64 + 9);
        assert_eq!(usage.bytes(), 7 * (MAX_HOLDS as u64 + 9));
    }

    #[test]
    fn the_encoding_round_trips_and_refuses_garbage() {
        let mut ledger = Ledger::default();
        ledger.usage_mut(T).add(at(5, 160));
        ledger
            .usage_mut(PayerTag([9, 9, 9, 9, 9, 9, 9, 1]))
            .add(at(7, 70_000));
        let bytes = ledger.encode();
        assert_eq!(Ledger::decode(&bytes), Ok(ledger));
        assert!(Ledger::decode(b"IG\x01").is_err());
        assert_eq!(
            Ledger::decode(b"IL\x03"),
            Err(DecodeError::UnsupportedVersion(3))
        );
        for cut in 0..bytes.len() {
            assert!(Ledger::decode(&bytes[..cut]).is_err() || cut == 0);
        }
        let mut out_of_order = bytes.clone();
        out_of_order.push(0);
        assert_eq!(
            Ledger::decode(&out_of_order),
            Err(DecodeError::TrailingBytes)
        );
    }

    #[test]
    fn a_cell_from_before_bytes_were_counted_is_read_with_the_overhead_per_record() {
        // Version 1: one payer, one hold of 3 records until 9.
        let mut old = b"IL\x01".to_vec();
        old.extend_from_slice(&1u32.to_be_bytes());
        old.extend_from_slice(&T.0);
        old.push(1);
        old.extend_from_slice(&9u64.to_be_bytes());
        old.extend_from_slice(&3u32.to_be_bytes());
        let ledger = Ledger::decode(&old).unwrap();
        assert_eq!(
            ledger.usage(T).map(|u| (u.records(), u.bytes())),
            Some((3, 3 * RECORD_OVERHEAD))
        );
        // It is written back in the current version.
        assert_eq!(ledger.encode()[2], VERSION);
    }
}
