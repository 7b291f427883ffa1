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
