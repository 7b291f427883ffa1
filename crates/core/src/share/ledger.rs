//! A ledger cell: what each payer holds in the whole store, as a few *holds* (records that free
//! their space at the same moment), and its compact encoding.
//!
//! A payer's usage has to fall by itself as its records lapse — the store has no listing, and
//! nobody tells the ledger when a completed record expires — so the ledger keeps, per payer, how
//! many records free their space at which moment. At most `MAX_HOLDS` moments are kept per
//! payer: past that, the two closest are merged into the later one. A merged record is counted a
//! little longer than it really holds space (never shorter), so the count is never below the
//! truth, and above it only by the records whose moment was moved, by at most the gap between the
//! two moments merged.

use super::PayerTag;
use crate::codec::{Reader, Writer};
use crate::record::DecodeError;
use crate::time::{Span, UnixMillis};
use alloc::vec::Vec;

/// Moments kept per payer (see the module docs).
pub(crate) const MAX_HOLDS: usize = 16;

/// Records of one payer that free their space at `until`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    pub until: UnixMillis,
    pub records: u32,
}

/// What one payer holds: its holds, sorted by `until`, none lapsed once pruned.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Usage {
    pub holds: Vec<Hold>,
}

impl Usage {
    /// Records held at `now` (after [`Ledger::prune`], every hold counts).
    pub fn records(&self) -> u64 {
        self.holds.iter().map(|h| u64::from(h.records)).sum()
    }

    /// How long until fewer than `limit` records are held: the first moment after which what is
    /// left is below the limit. `None` when already below it.
    pub fn room_after(&self, limit: u64, now: UnixMillis) -> Option<Span> {
        let mut held = self.records();
        if held < limit {
            return None;
        }
        for hold in &self.holds {
            held = held.saturating_sub(u64::from(hold.records));
            if held < limit {
                return Some(now.until(hold.until));
            }
        }
        // Unreachable with `limit ≥ 1` (all holds gone leaves 0 < limit); a limit of 0 means
        // no room ever comes back while the configuration stands.
        Some(now.until(self.holds.last().map_or(now, |h| h.until)))
    }

    /// Adds one record that frees its space at `until`.
    pub fn add(&mut self, until: UnixMillis) {
        match self.holds.binary_search_by(|h| h.until.cmp(&until)) {
            Ok(i) => self.holds[i].records = self.holds[i].records.saturating_add(1),
            Err(i) => self.holds.insert(i, Hold { until, records: 1 }),
        }
        if self.holds.len() > MAX_HOLDS {
            self.merge_closest();
        }
    }

    /// Takes one record that frees its space at `until` off the usage: from the hold at that
    /// moment, or the first later one (where a merge moved it). Nothing when none is left.
    pub fn remove(&mut self, until: UnixMillis) {
        let Some(i) = self.holds.iter().position(|h| h.until >= until) else {
            return;
        };
        self.holds[i].records = self.holds[i].records.saturating_sub(1);
        if self.holds[i].records == 0 {
            self.holds.remove(i);
        }
    }

    /// Drops the holds that have lapsed at `now`.
    pub(crate) fn prune(&mut self, now: UnixMillis) {
        self.holds.retain(|h| now < h.until);
    }

    /// Charges one record that holds space until `until`, within `limit` (`None`: not counted):
    /// refused, with nothing changed, by how long until there is room. The rule of a charge for
    /// both stores: the local ledger cells and the remote store's ledger keys.
    pub(crate) fn charge(
        &mut self,
        limit: Option<u64>,
        until: UnixMillis,
        now: UnixMillis,
    ) -> Result<(), Span> {
        match limit.and_then(|limit| self.room_after(limit, now)) {
            Some(retry_after) => Err(retry_after),
            None => {
                self.add(until);
                Ok(())
            }
        }
    }

    /// Moves one record's charge from `from` to `to` (a claim's lease charge becomes its stored
    /// answer's). A hold that has already lapsed is not taken from a later one, and none is added
    /// for a moment already past.
    pub(crate) fn shift(&mut self, (from, to): (UnixMillis, UnixMillis), now: UnixMillis) {
        if now < from {
            self.remove(from);
        }
        if now < to {
            self.add(to);
        }
    }

    /// Gives one record's charge until `until` back (its record was not written, or released).
    pub(crate) fn refund(&mut self, until: UnixMillis, now: UnixMillis) {
        if now < until {
            self.remove(until);
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
        self.holds[i].records = self.holds[i].records.saturating_add(earlier.records);
    }
}

/// One ledger cell: the usage of every payer whose tag maps to it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ledger {
    pub entries: Vec<(PayerTag, Usage)>,
}

const MAGIC: &[u8; 2] = b"IL";
const VERSION: u8 = 1;

impl Ledger {
    /// Drops lapsed holds and payers that hold nothing: the moment a ledger cell is rewritten is
    /// when it forgets, which keeps it as small as the records it counts.
    pub fn prune(&mut self, now: UnixMillis) {
        for (_, usage) in &mut self.entries {
            usage.prune(now);
        }
        self.entries.retain(|(_, usage)| !usage.holds.is_empty());
    }

    pub fn usage(&self, tag: PayerTag) -> Option<&Usage> {
        self.entries.iter().find(|(t, _)| *t == tag).map(|(_, u)| u)
    }

    pub fn usage_mut(&mut self, tag: PayerTag) -> &mut Usage {
        let at = match self.entries.iter().position(|(t, _)| *t == tag) {
            Some(at) => at,
            None => {
                self.entries.push((tag, Usage::default()));
                self.entries.len() - 1
            }
        };
        &mut self.entries[at].1
    }

    /// Empty is the empty byte string, as for a bucket.
    pub fn encode(&self) -> Vec<u8> {
        let entries: Vec<&(PayerTag, Usage)> = self
            .entries
            .iter()
            .filter(|(_, usage)| !usage.holds.is_empty())
            .collect();
        if entries.is_empty() {
            return Vec::new();
        }
        let mut w = Writer::default();
        w.bytes(MAGIC);
        w.u8(VERSION);
        w.u32(entries.len() as u32);
        for (tag, usage) in entries {
            w.bytes(&tag.0);
            w.u8(usage.holds.len() as u8);
            for hold in &usage.holds {
                w.u64(hold.until.0);
                w.u32(hold.records);
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
        r.header(MAGIC, VERSION)?;
        let count = r.u32()?;
        if count == 0 {
            // An empty ledger is the empty byte string.
            return Err(DecodeError::InvalidLedger);
        }
        let mut entries = Vec::new();
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
            let mut usage = Usage::default();
            for _ in 0..holds {
                let until = UnixMillis(r.u64()?);
                let records = r.u32()?;
                if usage.holds.last().is_some_and(|h| h.until >= until) || records == 0 {
                    return Err(DecodeError::InvalidLedger);
                }
                usage.holds.push(Hold { until, records });
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

    #[test]
    fn usage_counts_until_each_hold_lapses() {
        let mut ledger = Ledger::default();
        let usage = ledger.usage_mut(T);
        usage.add(UnixMillis(300));
        usage.add(UnixMillis(100));
        usage.add(UnixMillis(100));
        assert_eq!(usage.records(), 3);
        // Below 2 once the two that end at 100 are gone; below 3 already.
        assert_eq!(usage.room_after(2, UnixMillis(50)), Some(Span(50)));
        assert_eq!(usage.room_after(1, UnixMillis(50)), Some(Span(250)));
        assert_eq!(usage.room_after(4, UnixMillis(50)), None);
        ledger.prune(UnixMillis(100));
        assert_eq!(ledger.usage(T).map(Usage::records), Some(1));
        ledger.prune(UnixMillis(300));
        assert_eq!(ledger.usage(T), None);
        assert!(ledger.encode().is_empty());
    }

    #[test]
    fn merging_never_counts_a_record_shorter() {
        let mut usage = Usage::default();
        for i in 0..(MAX_HOLDS as u64 + 10) {
            usage.add(UnixMillis(1_000 + i * i));
        }
        assert_eq!(usage.holds.len(), MAX_HOLDS);
        assert_eq!(usage.records(), MAX_HOLDS as u64 + 10);
        // Every record is still counted at its own moment: the last moment survives merges.
        assert_eq!(
            usage.holds.last().map(|h| h.until),
            Some(UnixMillis(1_000 + (MAX_HOLDS as u64 + 9).pow(2)))
        );
        // Removing at a merged-away moment takes the record from the later hold it went to.
        usage.remove(UnixMillis(1_001));
        assert_eq!(usage.records(), MAX_HOLDS as u64 + 9);
    }

    #[test]
    fn the_encoding_round_trips_and_refuses_garbage() {
        let mut ledger = Ledger::default();
        ledger.usage_mut(T).add(UnixMillis(5));
        ledger
            .usage_mut(PayerTag([9, 9, 9, 9, 9, 9, 9, 1]))
            .add(UnixMillis(7));
        let bytes = ledger.encode();
        assert_eq!(Ledger::decode(&bytes), Ok(ledger));
        assert!(Ledger::decode(b"IG\x01").is_err());
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
}
