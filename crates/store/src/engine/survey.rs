//! What `stats` reports: how many records the engine holds, their bytes, and which
//! scopes hold the most. A record's scope is the quota tag in bytes 4..8 of its storage key (a
//! hash of the scope, never the scope or a client's key in clear), so every engine can group by
//! it without reading a record. Payers' ledgers share the keyspace; their keys carry
//! [`QuotaTag::LEDGER`] and are not counted.

use idemgate_core::client::scope::{QuotaTag, StorageKey};
use std::collections::HashMap;

/// How many scopes `stats` lists by default.
pub const DEFAULT_TOP: usize = 10;
/// A Redis survey stops after this many keys (the answer then says it is not complete), so
/// `stats` on a huge keyspace stays bounded.
pub const DEFAULT_SCAN_LIMIT: u64 = 1_000_000;
/// The bound of a PostgreSQL survey (aggregates over the table; each Redis command of a survey
/// is bounded by the operation timeout instead).
pub const SURVEY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// One scope's use of the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageOfScope {
    pub tag: QuotaTag,
    pub records: u64,
    /// Bytes of the stored values (what the engine holds for the records, without its overhead).
    pub bytes: u64,
}

/// The store's use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Survey {
    pub records: u64,
    pub bytes: u64,
    /// The scopes with the most records, most first (ties: most bytes, then tag).
    pub top: Vec<UsageOfScope>,
    /// False when the survey stopped at its bound before seeing every key.
    pub complete: bool,
}

/// Adds up records one by one (the Redis survey).
#[derive(Debug, Default)]
pub struct Tally {
    records: u64,
    bytes: u64,
    scopes: HashMap<[u8; 4], (u64, u64)>,
}

impl Tally {
    /// Counts `key` if it is a record (a payer's ledger is not: it holds a share's usage, no
    /// client's answer).
    pub fn add(&mut self, key: &StorageKey, bytes: u64) {
        if key.is_ledger() {
            return;
        }
        self.records += 1;
        self.bytes = self.bytes.saturating_add(bytes);
        let entry = self.scopes.entry(key.quota_tag().0).or_default();
        entry.0 += 1;
        entry.1 = entry.1.saturating_add(bytes);
    }

    pub fn finish(self, top: usize, complete: bool) -> Survey {
        let scopes = self
            .scopes
            .into_iter()
            .map(|(tag, (records, bytes))| UsageOfScope {
                tag: QuotaTag(tag),
                records,
                bytes,
            })
            .collect();
        Survey {
            records: self.records,
            bytes: self.bytes,
            top: top_of(scopes, top),
            complete,
        }
    }
}

/// The `top` scopes with the most records.
pub fn top_of(mut scopes: Vec<UsageOfScope>, top: usize) -> Vec<UsageOfScope> {
    scopes.sort_by(|a, b| {
        b.records
            .cmp(&a.records)
            .then(b.bytes.cmp(&a.bytes))
            .then(a.tag.0.cmp(&b.tag.0))
    });
    scopes.truncate(top);
    scopes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tally_groups_by_the_keys_quota_tag() {
        let key = |tag: u8, n: u8| {
            let mut bytes = [n; 32];
            bytes[4..8].copy_from_slice(&[tag, tag, tag, 0]);
            StorageKey::from_stored(bytes)
        };
        let mut tally = Tally::default();
        tally.add(&key(1, 1), 10);
        tally.add(&key(2, 2), 5);
        tally.add(&key(2, 3), 5);
        tally.add(&key(3, 4), 100);
        // A payer's ledger is not a record.
        tally.add(&key(0, 5), 7);
        let mut ledger = [5; 32];
        ledger[4..8].copy_from_slice(&QuotaTag::LEDGER.0);
        tally.add(&StorageKey::from_stored(ledger), 7);
        let survey = tally.finish(2, true);
        assert_eq!((survey.records, survey.bytes), (5, 127));
        let top: Vec<_> = survey.top.iter().map(|s| (s.tag.0[0], s.records)).collect();
        assert_eq!(top, vec![(2, 2), (3, 1)]);
    }
}
