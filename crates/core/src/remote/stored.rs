//! The value one engine key holds: a version, then the record.
//!
//! ```text
//! value = version(16) bucket            bucket = the record codec of `crate::record`, one entry
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
use crate::record::{Bucket, Record};
use crate::scope::StorageKey;
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

/// Whether `bytes`, the value stored under `key`, holds a record that nothing can change any more
/// except its expiry: a completed answer (every later claim replays it or is refused as a
/// mismatch, every finish is not the owner's) or a token's use (every later use is refused). A
/// cache in front of the engine may keep such a value until it expires and answer from it; an
/// in-flight claim, or bytes this protocol cannot read, are never settled.
pub fn is_settled(key: &StorageKey, bytes: &[u8]) -> bool {
    matches!(
        StoredValue::decode(key, bytes),
        Ok(StoredValue {
            record: Record::Completed(_) | Record::TokenUsed { .. },
            ..
        })
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::Fingerprint;
    use crate::record::{Completed, InFlight, OwnerToken, StoredBody, StoredResponse};
    use crate::time::UnixMillis;

    fn value(key: &StorageKey, record: Record) -> Vec<u8> {
        StoredValue {
            version: ValueVersion([9; VERSION_LEN]),
            record,
        }
        .encode(key)
    }

    #[test]
    fn only_completed_answers_and_token_uses_are_settled() {
        let key = StorageKey([1; 32]);
        let completed = Record::Completed(Completed {
            fingerprint: Fingerprint([2; 32]),
            response: StoredResponse {
                status: 201,
                headers: alloc::vec![],
                body: StoredBody::Kept(alloc::vec![0, 255, 7]),
            },
            expires_at: UnixMillis(5_000),
        });
        let in_flight = Record::InFlight(InFlight {
            fingerprint: Fingerprint([2; 32]),
            owner: OwnerToken([3; 16]),
            lease_until: UnixMillis(4_000),
            expires_at: UnixMillis(5_000),
        });
        let used = Record::TokenUsed {
            expires_at: UnixMillis(5_000),
        };
        assert!(is_settled(&key, &value(&key, completed.clone())));
        assert!(is_settled(&key, &value(&key, used)));
        assert!(!is_settled(&key, &value(&key, in_flight)));
        // Another key's value, and bytes that are no value at all, are not settled.
        assert!(!is_settled(&StorageKey([4; 32]), &value(&key, completed)));
        assert!(!is_settled(&key, &[0; VERSION_LEN]));
        assert!(!is_settled(&key, b""));
    }
}
