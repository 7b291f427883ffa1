//! The record lifecycle (absent → in flight → completed / released / expired) and its compact,
//! versioned encoding. Records live in *cells* of a store; a cell holds a small bucket of records
//! whose storage keys hash to it, which is how a store with no delete and no listing (Envoy shared
//! data) keeps its memory bounded: the number of cells and the records per cell are both fixed.

pub mod resource;
pub mod seal;

use crate::client::payer::{PayerTag, Payers};
use crate::client::scope::StorageKey;
pub use crate::codec::DecodeError;
use crate::codec::{Reader, Writer};
use crate::request::fingerprint::Fingerprint;
use crate::time::UnixMillis;
use alloc::string::String;
use alloc::vec::Vec;
use resource::{Resource, ResourceClaim};
use seal::{Seal, SEAL_LEN};

pub(crate) use crate::headers::never_replayed;

/// At most this many headers are stored per answer (the allow-list is short; this bounds a hostile
/// upstream that repeats one allowed header).
pub const MAX_STORED_HEADERS: usize = 64;

/// A header is safe to store if replaying it cannot split the response or smuggle a header.
pub(crate) fn safe_header(name: &str, value: &str) -> bool {
    !name.is_empty()
        && name.len() <= 256
        && value.len() <= 8192
        && name.bytes().all(|b| b.is_ascii_graphic() && b != b':')
        && !value.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0))
}

/// Identifies one claim. Completion and release must present it, so a request whose lease was
/// taken over (a *stale owner*) can never overwrite the new owner's record: a fencing token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OwnerToken(pub [u8; 16]);

/// A key whose first request is being executed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InFlight {
    pub fingerprint: Fingerprint,
    pub owner: OwnerToken,
    /// Until then retries get 409; after it a retry may take the claim over.
    pub lease_until: UnixMillis,
    /// The record's hard end: no lease outlives it.
    pub expires_at: UnixMillis,
    /// Whose shares the claim is charged to ([`crate::store::share`]), so its finish can move or
    /// give back the charge whichever host settles it. [`Payers::NONE`] where no share applies.
    pub payers: Payers,
}

/// A key whose first request has a final, stored answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed {
    pub fingerprint: Fingerprint,
    pub response: StoredResponse,
    pub expires_at: UnixMillis,
}

/// The upstream's answer as it will be replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    pub status: u16,
    /// Allow-listed headers only, lowercase names, values validated (no CR, LF or NUL).
    pub headers: Vec<(String, String)>,
    pub body: StoredBody,
    /// The filter's MAC over the answer and its key ([`crate::record::seal`]): set on answers kept
    /// in the remote store, checked before they are replayed; `None` in the local store.
    pub seal: Option<Seal>,
}

/// Whether the response body was kept for replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredBody {
    Kept(Vec<u8>),
    /// Over the configured limit: status and headers are replayed, the body is not, and the replay
    /// says so. The retry still never reaches the upstream.
    NotKept,
}

/// One record.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Record {
    InFlight(InFlight),
    Completed(Completed),
    /// A one-time token's single use, kept until the token itself would have expired.
    TokenUsed {
        expires_at: UnixMillis,
    },
    /// A resource's state on an order-guarded callback route ([`crate::order`]).
    Resource(Resource),
}

impl InFlight {
    /// Until when the claim takes space: its lease, which never outlives the record.
    pub(crate) fn holds_space_until(&self) -> UnixMillis {
        self.lease_until.min(self.expires_at)
    }
}

impl Record {
    pub fn expires_at(&self) -> UnixMillis {
        match self {
            Record::InFlight(r) => r.expires_at,
            Record::Completed(r) => r.expires_at,
            Record::TokenUsed { expires_at } => *expires_at,
            Record::Resource(r) => r.expires_at,
        }
    }

    /// Expired records are as good as absent and their space may be reused.
    pub fn is_expired(&self, now: UnixMillis) -> bool {
        now >= self.expires_at()
    }

    /// Until when the record takes space another record cannot have: a claim only
    /// until its lease ends — after that a retry may take it over anyway, so under pressure its
    /// space is given to a new claim — anything else until it expires.
    pub(crate) fn holds_space_until(&self) -> UnixMillis {
        match self {
            Record::InFlight(r) => r.holds_space_until(),
            other => other.expires_at(),
        }
    }
}

/// The records that share one store cell.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Bucket {
    pub entries: Vec<(StorageKey, Record)>,
}

const MAGIC: &[u8; 2] = b"IG";
const VERSION: u8 = 1;
const TAG_IN_FLIGHT: u8 = 1;
const TAG_COMPLETED: u8 = 2;
const TAG_TOKEN_USED: u8 = 3;
/// A completed record whose answer carries a seal: as [`TAG_COMPLETED`], with the seal after the
/// fingerprint. Unsealed records keep their tag, so their bytes are what they always were.
const TAG_COMPLETED_SEALED: u8 = 4;
const TAG_RESOURCE: u8 = 5;
/// An in-flight claim charged to payers: as [`TAG_IN_FLIGHT`], then a count (1 or 2) and their
/// quota tags. A claim no share applies to keeps [`TAG_IN_FLIGHT`] and its old bytes.
const TAG_IN_FLIGHT_PAID: u8 = 6;
/// A resource record whose state carries a seal: the seal, then as [`TAG_RESOURCE`].
const TAG_RESOURCE_SEALED: u8 = 7;

impl Bucket {
    pub fn get(&self, key: &StorageKey) -> Option<&Record> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, r)| r)
    }

    /// Drops expired records: the moment a cell is rewritten is when its space is reclaimed.
    pub(crate) fn reclaim(&mut self, now: UnixMillis) {
        self.entries.retain(|(_, record)| !record.is_expired(now));
    }

    /// Drops claims whose lease has ended, to make room (see [`Record::holds_space_until`]).
    pub(crate) fn evict_lapsed_claims(&mut self, now: UnixMillis) {
        self.entries
            .retain(|(_, record)| now < record.holds_space_until());
    }

    /// When the first record here frees its space.
    pub(crate) fn first_free_at(&self) -> Option<UnixMillis> {
        self.entries
            .iter()
            .map(|(_, r)| r.holds_space_until())
            .min()
    }

    pub(crate) fn remove(&mut self, key: &StorageKey) {
        self.entries.retain(|(k, _)| k != key);
    }

    /// Puts `record` under `key`, replacing any record it had.
    pub fn put(&mut self, key: StorageKey, record: Record) {
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = record,
            None => self.entries.push((key, record)),
        }
    }

    /// Encodes the bucket; an empty bucket is the empty byte string (what a "deleted" Envoy
    /// shared-data value reads as).
    pub fn encode(&self) -> Vec<u8> {
        if self.entries.is_empty() {
            return Vec::new();
        }
        let size = self
            .entries
            .iter()
            .map(|(_, record)| 32 + encoded_size(record))
            .sum::<usize>();
        let mut w = Writer::with_capacity(MAGIC.len() + 3 + size);
        w.bytes(MAGIC);
        w.u8(VERSION);
        w.u16(self.entries.len() as u16);
        for (key, record) in &self.entries {
            w.bytes(&key.0);
            encode_record(&mut w, record);
        }
        w.finish()
    }

    /// Decodes a cell. Arbitrary bytes give a typed error, never a panic.
    pub fn decode(bytes: &[u8]) -> Result<Bucket, DecodeError> {
        if bytes.is_empty() {
            return Ok(Bucket::default());
        }
        let mut r = Reader::new(bytes);
        r.header(MAGIC, VERSION)?;
        let count = r.u16()?;
        let mut entries = Vec::new();
        for _ in 0..count {
            let key = StorageKey(r.array::<32>()?);
            entries.push((key, decode_record(&mut r)?));
        }
        if !r.is_empty() {
            return Err(DecodeError::TrailingBytes);
        }
        Ok(Bucket { entries })
    }
}

/// About how many bytes [`encode_record`] writes for `record` (exact but for a resource's
/// optional parts): what the bucket's output is sized to.
fn encoded_size(record: &Record) -> usize {
    match record {
        // Tag, fingerprint, owner, lease end, expiry, payer count and up to two tags.
        Record::InFlight(_) => 1 + 32 + 16 + 8 + 8 + 1 + 2 * 8,
        Record::Completed(r) => {
            let headers: usize = r
                .response
                .headers
                .iter()
                .map(|(name, value)| 4 + name.len() + value.len())
                .sum();
            let body = match &r.response.body {
                StoredBody::NotKept => 0,
                StoredBody::Kept(body) => 4 + body.len(),
            };
            // Tag, fingerprint, seal, expiry, status, header count, body flag.
            1 + 32 + 32 + 8 + 2 + 2 + headers + 1 + body
        }
        Record::TokenUsed { .. } => 1 + 8,
        Record::Resource(r) => 128 + r.state.len(),
    }
}

fn encode_record(w: &mut Writer, record: &Record) {
    match record {
        Record::InFlight(r) => {
            w.u8(if r.payers.is_empty() {
                TAG_IN_FLIGHT
            } else {
                TAG_IN_FLIGHT_PAID
            });
            w.bytes(&r.fingerprint.0);
            w.bytes(&r.owner.0);
            w.u64(r.lease_until.0);
            w.u64(r.expires_at.0);
            if !r.payers.is_empty() {
                w.u8(r.payers.tags().count() as u8);
                for tag in r.payers.tags() {
                    w.bytes(&tag.0);
                }
            }
        }
        Record::Completed(r) => {
            match &r.response.seal {
                None => {
                    w.u8(TAG_COMPLETED);
                    w.bytes(&r.fingerprint.0);
                }
                Some(seal) => {
                    w.u8(TAG_COMPLETED_SEALED);
                    w.bytes(&r.fingerprint.0);
                    w.bytes(&seal.0);
                }
            }
            w.u64(r.expires_at.0);
            w.u16(r.response.status);
            w.u16(r.response.headers.len() as u16);
            for (name, value) in &r.response.headers {
                w.short_bytes(name.as_bytes());
                w.short_bytes(value.as_bytes());
            }
            match &r.response.body {
                StoredBody::NotKept => w.u8(0),
                StoredBody::Kept(body) => {
                    w.u8(1);
                    w.u32(body.len() as u32);
                    w.bytes(body);
                }
            }
        }
        Record::TokenUsed { expires_at } => {
            w.u8(TAG_TOKEN_USED);
            w.u64(expires_at.0);
        }
        Record::Resource(r) => encode_resource(w, r),
    }
}

fn decode_record(r: &mut Reader<'_>) -> Result<Record, DecodeError> {
    match r.u8()? {
        tag @ (TAG_IN_FLIGHT | TAG_IN_FLIGHT_PAID) => {
            let mut claim = InFlight {
                fingerprint: Fingerprint(r.array::<32>()?),
                owner: OwnerToken(r.array::<16>()?),
                lease_until: UnixMillis(r.u64()?),
                expires_at: UnixMillis(r.u64()?),
                payers: Payers::NONE,
            };
            if tag == TAG_IN_FLIGHT_PAID {
                claim.payers = match r.u8()? {
                    1 => Payers::from_tags(Some(PayerTag(r.array::<8>()?)), None),
                    2 => {
                        let (first, second) =
                            (PayerTag(r.array::<8>()?), PayerTag(r.array::<8>()?));
                        // One spelling per record: a payer named twice is written once.
                        if first == second {
                            return Err(DecodeError::InvalidPayers);
                        }
                        Payers::from_tags(Some(first), Some(second))
                    }
                    _ => return Err(DecodeError::InvalidPayers),
                };
            }
            Ok(Record::InFlight(claim))
        }
        tag @ (TAG_COMPLETED | TAG_COMPLETED_SEALED) => {
            let fingerprint = Fingerprint(r.array::<32>()?);
            let seal = match tag {
                TAG_COMPLETED_SEALED => Some(Seal(r.array::<SEAL_LEN>()?)),
                _ => None,
            };
            let expires_at = UnixMillis(r.u64()?);
            let status = r.u16()?;
            if !is_storable_status(status) {
                return Err(DecodeError::InvalidStatus(status));
            }
            let count = r.u16()?;
            let mut headers = Vec::new();
            for _ in 0..count {
                let name = header_text(r.short_bytes()?)?;
                let value = header_text(r.short_bytes()?)?;
                // The same rules as at store time: a tampered cell cannot make a replay carry a
                // header that completion would never have stored.
                if !safe_header(&name, &value) || never_replayed(&name) {
                    return Err(DecodeError::InvalidHeader);
                }
                headers.push((name, value));
            }
            let body = match r.u8()? {
                0 => StoredBody::NotKept,
                1 => {
                    let len = r.u32()? as usize;
                    StoredBody::Kept(r.take(len)?.to_vec())
                }
                tag => return Err(DecodeError::UnknownTag(tag)),
            };
            Ok(Record::Completed(Completed {
                fingerprint,
                response: StoredResponse {
                    status,
                    headers,
                    body,
                    seal,
                },
                expires_at,
            }))
        }
        TAG_TOKEN_USED => Ok(Record::TokenUsed {
            expires_at: UnixMillis(r.u64()?),
        }),
        TAG_RESOURCE => decode_resource(r).map(Record::Resource),
        TAG_RESOURCE_SEALED => {
            let seal = Seal(r.array::<SEAL_LEN>()?);
            let mut resource = decode_resource(r)?;
            resource.seal = Some(seal);
            Ok(Record::Resource(resource))
        }
        tag => Err(DecodeError::UnknownTag(tag)),
    }
}

/// A resource record: state, version, expiry, the claim (flag, owner, lease end, version), the
/// early events (count, then each type and when it was first seen). A sealed one has its own tag
/// and its seal first, so records written before seals existed read as unsealed.
fn encode_resource(w: &mut Writer, r: &Resource) {
    match &r.seal {
        None => w.u8(TAG_RESOURCE),
        Some(seal) => {
            w.u8(TAG_RESOURCE_SEALED);
            w.bytes(&seal.0);
        }
    }
    w.short_bytes(r.state.as_bytes());
    w.u64(r.version);
    w.u64(r.expires_at.0);
    match &r.claim {
        None => w.u8(0),
        Some(claim) => {
            w.u8(1);
            w.bytes(&claim.owner.0);
            w.u64(claim.lease_until.0);
            w.u64(claim.version);
        }
    }
    let early = &r.early[..r.early.len().min(Resource::MAX_EARLY)];
    w.u8(early.len() as u8);
    for (event, first_seen) in early {
        w.short_bytes(event.as_bytes());
        w.u64(first_seen.0);
    }
}

fn decode_resource(r: &mut Reader<'_>) -> Result<Resource, DecodeError> {
    let text =
        |bytes: &[u8]| String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::InvalidResource);
    let state = text(r.short_bytes()?)?;
    let version = r.u64()?;
    let expires_at = UnixMillis(r.u64()?);
    let claim = match r.u8()? {
        0 => None,
        1 => Some(ResourceClaim {
            owner: OwnerToken(r.array::<16>()?),
            lease_until: UnixMillis(r.u64()?),
            version: r.u64()?,
        }),
        tag => return Err(DecodeError::UnknownTag(tag)),
    };
    let count = r.u8()?;
    if usize::from(count) > Resource::MAX_EARLY {
        return Err(DecodeError::InvalidResource);
    }
    let mut early = Vec::new();
    for _ in 0..count {
        let event = text(r.short_bytes()?)?;
        early.push((event, UnixMillis(r.u64()?)));
    }
    Ok(Resource {
        state,
        version,
        claim,
        early,
        expires_at,
        seal: None,
    })
}

/// Statuses a completed record can hold: three-digit HTTP statuses.
pub(crate) fn is_storable_status(status: u16) -> bool {
    (100..=999).contains(&status)
}

/// Stored header names and values must be safe to emit again: no CR, LF or NUL can smuggle a
/// second header or split the response, even if the cell's bytes were tampered with.
fn header_text(bytes: &[u8]) -> Result<String, DecodeError> {
    if bytes.iter().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
        return Err(DecodeError::InvalidHeader);
    }
    String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::InvalidHeader)
}
