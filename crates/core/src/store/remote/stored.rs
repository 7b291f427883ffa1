//! The value one engine key holds: a version, then the record.
//!
//! ```text
//! value = version(16) bucket        bucket = the record codec of `crate::record`, one entry
//! ```
//!
//! The version is what the compare-and-set compares (the service's script checks the first
//! [`VERSION_LEN`] bytes), so it must never repeat at a key: a key deleted and re-created must not
//! come back at a version an old reader still holds (the ABA problem). A counter would restart at
//! the re-creation; the service draws a fresh random version for every write instead.
//!
//! The record is stored with its own storage key (a one-entry [`Bucket`]), so a value copied or
//! renamed to another key is refused ([`WireError::KeyMismatch`]) instead of replayed to the wrong
//! client.

use super::wire::WireError;
use crate::client::scope::StorageKey;
use crate::record::{Bucket, Record};
use crate::time::UnixMillis;
use alloc::vec::Vec;

/// Bytes of the version prefix.
pub const VERSION_LEN: usize = 16;

/// A value's version: random, drawn by the service for every write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ValueVersion(pub [u8; VERSION_LEN]);

/// A decoded value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredValue {
    pub version: ValueVersion,
    pub record: Record,
}

impl StoredValue {
    pub fn encode(&self, key: &StorageKey) -> Vec<u8> {
        let bucket = Bucket {
            entries: alloc::vec![(*key, self.record.clone())],
        };
        let mut out = Vec::with_capacity(VERSION_LEN + 128);
        out.extend_from_slice(&self.version.0);
        out.extend_from_slice(&bucket.encode());
        out
    }

    /// Decodes the value stored under `key`. Untrusted bytes: a typed error, never a panic.
    pub fn decode(key: &StorageKey, bytes: &[u8]) -> Result<StoredValue, WireError> {
        let (version, rest) = bytes
            .split_first_chunk::<VERSION_LEN>()
            .ok_or(WireError::Truncated)?;
        let mut bucket = Bucket::decode(rest)?;
        match bucket.entries.pop() {
            Some((stored_key, record)) if bucket.entries.is_empty() => {
                if stored_key != *key {
                    return Err(WireError::KeyMismatch);
                }
                Ok(StoredValue {
                    version: ValueVersion(*version),
                    record,
                })
            }
            // Empty, or more than one record: not what this protocol writes.
            _ => Err(WireError::Record(crate::record::DecodeError::BadMagic)),
        }
    }
}

/// How long a cache in front of the engine may answer from a value the engine holds (the store
/// service's `redis+postgres` engine). It decides nothing: it says what kind of record the value
/// holds and until when that record can answer unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheHold {
    /// Nothing can change the record any more but its expiry: a completed answer (every later
    /// claim replays it or is refused as a mismatch, every finish is not the owner's) or a token's
    /// use (every later use is refused). A cache may keep it until `until`, also filled from a read.
    Settled { until: UnixMillis },
    /// A claim in flight: its owner's finish or release changes it, and once its lease ends a
    /// retry may take it over, which must be decided on the engine's own record and clock. A cache
    /// may keep it only as written through after the engine accepted it, and only until
    /// `lease_until`.
    InFlight { lease_until: UnixMillis },
}

/// What `bytes`, the value stored under `key`, allows a cache: `None` for bytes this protocol
/// cannot read (or another key's value), which a cache never keeps.
pub fn cache_hold(key: &StorageKey, bytes: &[u8]) -> Option<CacheHold> {
    match StoredValue::decode(key, bytes).ok()?.record {
        Record::InFlight(claim) => Some(CacheHold::InFlight {
            lease_until: claim.holds_space_until(),
        }),
        // A resource's state changes with every event: never answered from a cache.
        Record::Resource(_) => None,
        settled => Some(CacheHold::Settled {
            until: settled.expires_at(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Completed, InFlight, OwnerToken, StoredBody, StoredResponse};
    use crate::request::fingerprint::Fingerprint;

    fn value(key: &StorageKey, record: Record) -> Vec<u8> {
        StoredValue {
            version: ValueVersion([9; VERSION_LEN]),
            record,
        }
        .encode(key)
    }

    #[test]
    fn completed_answers_and_token_uses_are_settled_claims_only_until_their_lease() {
        let key = StorageKey([1; 32]);
        let completed = Record::Completed(Completed {
            fingerprint: Fingerprint([2; 32]),
            response: StoredResponse {
                status: 201,
                headers: alloc::vec![],
                body: StoredBody::Kept(alloc::vec![0, 255, 7]),
                seal: None,
            },
            expires_at: UnixMillis(5_000),
        });
        let in_flight = Record::InFlight(InFlight {
            fingerprint: Fingerprint([2; 32]),
            owner: OwnerToken([3; 16]),
            lease_until: UnixMillis(4_000),
            expires_at: UnixMillis(5_000),
            payers: crate::client::payer::Payers::NONE,
        });
        let used = Record::TokenUsed {
            expires_at: UnixMillis(5_000),
        };
        let settled = Some(CacheHold::Settled {
            until: UnixMillis(5_000),
        });
        assert_eq!(cache_hold(&key, &value(&key, completed.clone())), settled);
        assert_eq!(cache_hold(&key, &value(&key, used)), settled);
        assert_eq!(
            cache_hold(&key, &value(&key, in_flight)),
            Some(CacheHold::InFlight {
                lease_until: UnixMillis(4_000)
            })
        );
        // Another key's value, and bytes that are no value at all, are never kept.
        assert_eq!(
            cache_hold(&StorageKey([4; 32]), &value(&key, completed)),
            None
        );
        assert_eq!(cache_hold(&key, &[0; VERSION_LEN]), None);
        assert_eq!(cache_hold(&key, b""), None);
    }
}
