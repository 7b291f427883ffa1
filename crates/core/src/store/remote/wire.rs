//! The bytes between a filter and the store service: one request, one response, per operation.
//!
//! Compact and versioned, big-endian, no self-description (both ends are this crate):
//!
//! ```text
//! request  = "IQ" version(1) op(1) body
//!   op 1 claim   : key(32) fingerprint(32) owner(16) lease_ms(8) ttl_ms(8) [bill]
//!   op 2 finish  : key(32) owner(16) ttl_ms(8) end(1) [shard]
//!                  end 0 = release, 1 = store + response
//!   op 3 consume : key(32) token_expires_at_ms(8) [bill]
//!   op 6 replay  : key(32) fingerprint(32)     a late delivery's look-up: never a write
//!   (op 4 order begin: `order` module, ending with a [bill] like a claim's)
//!   (op 7 finishes: several op 2 requests in one, answered one by one: `batch` module)
//! bill     = count(1, 0 to 2) { tag(8) share_records(8) share_bytes(8) }* [ shard pressure(1) ]
//!            (absent: nobody is charged, nothing counted; a count of 0 only before a shard)
//! shard    = tag(8) records(8)   the fill shard the record is counted in (`bill` module)
//! response = "IA" version(1) tag(1) body      (tags: `Tag`, `response` module)
//! response body of a refusal for a share: retry_after_ms(8) refusal (`bill` module)
//! response body of a replay or a stored answer:
//!   status(2) header_count(2) { name_len(2) name value_len(2) value }* kept(1) [ body_len(4) body ]
//!   sealed(1) [ seal(32) ]  (the filter's MAC over the answer and its key: `crate::record::seal`)
//! ```
//!
//! Decoders take untrusted bytes (a garbage reply from a broken service, a hostile client of the
//! service) and return a typed [`WireError`], never panic, and never allocate more than the input
//! holds. Replayed headers are checked by the same rules as stored records.

use crate::client::scope::StorageKey;
use crate::codec::{Reader, Writer};
use crate::decision::{safe_header, MAX_STORED_HEADERS};
use crate::record::seal::Seal;
use crate::record::{is_storable_status, DecodeError, OwnerToken, StoredBody, StoredResponse};
use crate::request::fingerprint::Fingerprint;
use crate::store::protocol::{ClaimOutcome, ConsumeOutcome, FinishOutcome, ProtocolError};
use crate::store::share::{Billed, Fill, FillShard};
use crate::store::StoreError;
use crate::time::{Span, UnixMillis};
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

mod batch;
mod bill;
mod order;
mod response;

pub use batch::Incoming;
pub(crate) use batch::{encode_finishes, MAX_FINISHES};
use bill::{get_bill, get_shard, put_bill, put_shard};
pub use response::Failure;
pub use response::Response;

/// The HTTP media type of both bodies.
pub const CONTENT_TYPE: &str = "application/x-idemgate-store";
/// The wire format's version; a peer speaking another one gets `UnsupportedVersion`. 2: stored
/// answers carry their seal; 3: a payer's share carries its bytes. So a
/// filter and a service of different versions refuse each other's messages by version instead of
/// misreading them. 4: a resource's state travels with its seal (a begin's answer, a settle).
/// 5: a record's fill shard travels with its payers (shares bind under pressure only).
/// 6: a refusal for a share names the share and its payer; an ordering begin carries its bill.
pub(crate) const WIRE_VERSION: u8 = 6;
const REQUEST_MAGIC: [u8; 2] = *b"IQ";
const RESPONSE_MAGIC: [u8; 2] = *b"IA";

const OP_CLAIM: u8 = 1;
const OP_FINISH: u8 = 2;
const OP_CONSUME: u8 = 3;
const OP_REPLAY: u8 = 6;

const END_RELEASE: u8 = 0;
const END_STORE: u8 = 1;

/// One operation, as the filter asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Request {
    /// Claim `key` for a request (`docs/semantics.md` §4); `owner` is the filter's fresh fencing
    /// token.
    Claim {
        key: StorageKey,
        fingerprint: Fingerprint,
        owner: OwnerToken,
        lease: Span,
        ttl: Span,
        /// Who pays for the claim's space, each within its share of the store (empty: nobody).
        payers: Vec<Billed>,
        /// The fill shard the record is counted in, and the pressure from which shares bind
        /// there (`None`: nothing counted; a payer at its share is refused).
        fill: Option<Fill>,
    },
    /// End the claim `owner` holds (`docs/semantics.md` §5), as the filter's policy decided
    /// (`crate::decision::verdict`); a kept-in-flight outcome writes nothing and is never sent.
    Finish {
        key: StorageKey,
        owner: OwnerToken,
        /// The record's life from completion.
        ttl: Span,
        end: End,
        /// The fill shard the claim was counted in, whose count moves with its payers' charge.
        shard: Option<FillShard>,
    },
    /// Look `key` up for a late delivery: its stored answer if completed with `fingerprint`,
    /// else [`ClaimOutcome::NotReplayed`]; nothing is written or charged
    /// (`crate::decision::decide_late`).
    Replay {
        key: StorageKey,
        fingerprint: Fingerprint,
    },
    /// Mark a one-time token used, once across the fleet (`docs/semantics.md` §7).
    Consume {
        key: StorageKey,
        /// The token's own expiry, from its signed claims.
        expires_at: UnixMillis,
        /// Who pays for the use's space while it is remembered (empty: nobody).
        payers: Vec<Billed>,
        /// As a claim's.
        fill: Option<Fill>,
    },
    /// Decide an event's arrival at the resource under `key`, and claim the resource for an event
    /// that applies ([`crate::order::begin`]).
    OrderBegin {
        key: StorageKey,
        owner: OwnerToken,
        lease: Span,
        ttl: Span,
        retry_after: Span,
        forward_after: Option<Span>,
        event: String,
        table: crate::order::transition::DeclaredTable,
        /// Who pays for a new resource record (the delivery claim's payers), each within its
        /// share, as a claim's (empty: nobody).
        payers: Vec<Billed>,
        /// As a claim's.
        fill: Option<Fill>,
    },
    /// End `owner`'s claim on the resource: advance to `to` if `applied`, else release
    /// ([`crate::order::settle`]). `seal`: the filter's seal of the advanced state, which the
    /// record keeps.
    OrderSettle {
        key: StorageKey,
        owner: OwnerToken,
        ttl: Span,
        to: String,
        applied: bool,
        seal: Option<Seal>,
    },
}

/// What a finish does with the claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    Release,
    Store(StoredResponse),
}

impl Request {
    /// The storage key the operation touches (every operation touches exactly one).
    pub fn key(&self) -> &StorageKey {
        match self {
            Request::Claim { key, .. }
            | Request::Replay { key, .. }
            | Request::Finish { key, .. }
            | Request::Consume { key, .. }
            | Request::OrderBegin { key, .. }
            | Request::OrderSettle { key, .. } => key,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.bytes(&REQUEST_MAGIC);
        w.u8(WIRE_VERSION);
        match self {
            Request::Claim {
                key,
                fingerprint,
                owner,
                lease,
                ttl,
                payers,
                fill,
            } => {
                w.u8(OP_CLAIM);
                w.bytes(&key.0);
                w.bytes(&fingerprint.0);
                w.bytes(&owner.0);
                w.u64(lease.0);
                w.u64(ttl.0);
                put_bill(&mut w, payers, fill);
            }
            Request::Replay { key, fingerprint } => {
                w.u8(OP_REPLAY);
                w.bytes(&key.0);
                w.bytes(&fingerprint.0);
            }
            Request::Finish {
                key,
                owner,
                ttl,
                end,
                shard,
            } => {
                w.u8(OP_FINISH);
                w.bytes(&key.0);
                w.bytes(&owner.0);
                w.u64(ttl.0);
                match end {
                    End::Release => w.u8(END_RELEASE),
                    End::Store(response) => {
                        w.u8(END_STORE);
                        put_response(&mut w, response);
                    }
                }
                if let Some(shard) = shard {
                    put_shard(&mut w, shard);
                }
            }
            Request::Consume {
                key,
                expires_at,
                payers,
                fill,
            } => {
                w.u8(OP_CONSUME);
                w.bytes(&key.0);
                w.u64(expires_at.0);
                put_bill(&mut w, payers, fill);
            }
            Request::OrderBegin { .. } | Request::OrderSettle { .. } => {
                order::put_request(&mut w, self)
            }
        }
        w.finish()
    }

    pub fn decode(bytes: &[u8]) -> Result<Request, WireError> {
        let mut r = Reader::new(bytes);
        header(&mut r, REQUEST_MAGIC)?;
        let request = match r.u8()? {
            OP_CLAIM => {
                let key = StorageKey(r.array()?);
                let fingerprint = Fingerprint(r.array()?);
                let owner = OwnerToken(r.array()?);
                let lease = span(&mut r)?;
                let ttl = ttl(&mut r)?;
                let (payers, fill) = get_bill(&mut r)?;
                Request::Claim {
                    key,
                    fingerprint,
                    owner,
                    lease,
                    ttl,
                    payers,
                    fill,
                }
            }
            OP_REPLAY => Request::Replay {
                key: StorageKey(r.array()?),
                fingerprint: Fingerprint(r.array()?),
            },
            OP_FINISH => Request::Finish {
                key: StorageKey(r.array()?),
                owner: OwnerToken(r.array()?),
                ttl: ttl(&mut r)?,
                end: match r.u8()? {
                    END_RELEASE => End::Release,
                    END_STORE => End::Store(get_response(&mut r)?),
                    tag => return Err(WireError::UnknownTag(tag)),
                },
                shard: match r.is_empty() {
                    true => None,
                    false => Some(get_shard(&mut r)?),
                },
            },
            OP_CONSUME => {
                let key = StorageKey(r.array()?);
                let expires_at = match r.u64()? {
                    ms if ms <= MAX_INSTANT_MS => UnixMillis(ms),
                    _ => return Err(WireError::OutOfRange),
                };
                let (payers, fill) = get_bill(&mut r)?;
                Request::Consume {
                    key,
                    expires_at,
                    payers,
                    fill,
                }
            }
            op @ (order::OP_BEGIN | order::OP_SETTLE) => order::get_request(op, &mut r)?,
            op => return Err(WireError::UnknownOp(op)),
        };
        end(&r)?;
        Ok(request)
    }
}

/// Longest lease or TTL a request may carry: 100 years. Engines bound expiry times (Redis refuses
/// a `PXAT` past 2^63 ms), so an absurd value is refused here instead of failing there.
pub(crate) const MAX_SPAN_MS: u64 = 100 * 366 * 86_400_000;
/// Latest instant a request may carry: the last millisecond of the year 9999.
pub(crate) const MAX_INSTANT_MS: u64 = 253_402_300_799_999;

fn span(r: &mut Reader<'_>) -> Result<Span, WireError> {
    match r.u64()? {
        ms if ms <= MAX_SPAN_MS => Ok(Span(ms)),
        _ => Err(WireError::OutOfRange),
    }
}

/// A TTL of zero would write a record that is expired as it lands: refused as malformed.
fn ttl(r: &mut Reader<'_>) -> Result<Span, WireError> {
    match span(r)? {
        Span(0) => Err(WireError::ZeroTtl),
        ttl => Ok(ttl),
    }
}

fn header(r: &mut Reader<'_>, magic: [u8; 2]) -> Result<(), WireError> {
    if r.array::<2>()? != magic {
        return Err(WireError::BadMagic);
    }
    match r.u8()? {
        WIRE_VERSION => Ok(()),
        version => Err(WireError::UnsupportedVersion(version)),
    }
}

fn end(r: &Reader<'_>) -> Result<(), WireError> {
    if r.is_empty() {
        Ok(())
    } else {
        Err(WireError::TrailingBytes)
    }
}

pub(crate) fn put_response(w: &mut Writer, response: &StoredResponse) {
    w.u16(response.status);
    let headers = &response.headers[..response.headers.len().min(MAX_STORED_HEADERS)];
    w.u16(headers.len() as u16);
    for (name, value) in headers {
        w.short_bytes(name.as_bytes());
        w.short_bytes(value.as_bytes());
    }
    match &response.body {
        StoredBody::NotKept => w.u8(0),
        StoredBody::Kept(body) => {
            w.u8(1);
            w.u32(body.len() as u32);
            w.bytes(body);
        }
    }
    match &response.seal {
        None => w.u8(0),
        Some(seal) => {
            w.u8(1);
            w.bytes(&seal.0);
        }
    }
}

pub(crate) fn get_response(r: &mut Reader<'_>) -> Result<StoredResponse, WireError> {
    let status = r.u16()?;
    if !is_storable_status(status) {
        return Err(WireError::InvalidStatus(status));
    }
    let count = usize::from(r.u16()?);
    if count > MAX_STORED_HEADERS {
        return Err(WireError::InvalidHeader);
    }
    let mut headers = Vec::new();
    for _ in 0..count {
        let name = header_text(r.short_bytes()?)?;
        let value = header_text(r.short_bytes()?)?;
        // What completion would never store, a replay never emits, whoever wrote these bytes.
        if !safe_header(&name, &value) || crate::policy::never_replayed(&name) {
            return Err(WireError::InvalidHeader);
        }
        headers.push((name, value));
    }
    let body = match r.u8()? {
        0 => StoredBody::NotKept,
        1 => {
            let len = r.u32()? as usize;
            StoredBody::Kept(r.take(len)?.to_vec())
        }
        tag => return Err(WireError::UnknownTag(tag)),
    };
    let seal = match r.u8()? {
        0 => None,
        1 => Some(Seal(r.array()?)),
        tag => return Err(WireError::UnknownTag(tag)),
    };
    Ok(StoredResponse {
        status,
        headers,
        body,
        seal,
    })
}

fn header_text(bytes: &[u8]) -> Result<String, WireError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| WireError::InvalidHeader)
}

/// Why bytes are not a request or a response.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    BadMagic,
    UnsupportedVersion(u8),
    Truncated,
    UnknownOp(u8),
    UnknownTag(u8),
    InvalidStatus(u16),
    InvalidHeader,
    ZeroTtl,
    /// A lease, TTL or expiry beyond `MAX_SPAN_MS` / `MAX_INSTANT_MS`.
    OutOfRange,
    TrailingBytes,
    /// A stored value names another storage key than the one it is stored under.
    KeyMismatch,
    /// A stored value's record is unreadable.
    Record(DecodeError),
    /// An ordering request's state table is not a valid table.
    Table(crate::order::transition::TableError),
    /// A batch of finishes that is empty, longer than `MAX_FINISHES` (64), or holds another
    /// operation (or its answer another answer than a finish's or a failure).
    Batch,
}

impl From<DecodeError> for WireError {
    fn from(e: DecodeError) -> Self {
        match e {
            DecodeError::Truncated => WireError::Truncated,
            other => WireError::Record(other),
        }
    }
}

impl WireError {
    pub fn code(&self) -> &'static str {
        match self {
            WireError::BadMagic => "wire_bad_magic",
            WireError::UnsupportedVersion(_) => "wire_unsupported_version",
            WireError::Truncated => "wire_truncated",
            WireError::UnknownOp(_) => "wire_unknown_op",
            WireError::UnknownTag(_) => "wire_unknown_tag",
            WireError::InvalidStatus(_) => "wire_invalid_status",
            WireError::InvalidHeader => "wire_invalid_header",
            WireError::ZeroTtl => "wire_zero_ttl",
            WireError::OutOfRange => "wire_out_of_range",
            WireError::TrailingBytes => "wire_trailing_bytes",
            WireError::KeyMismatch => "wire_key_mismatch",
            WireError::Record(e) => e.code(),
            WireError::Table(e) => e.code(),
            WireError::Batch => "wire_bad_batch",
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::BadMagic => f.write_str("not an idemgate store message"),
            WireError::UnsupportedVersion(v) => write!(f, "unsupported store wire version {v}"),
            WireError::Truncated => f.write_str("store message is truncated"),
            WireError::UnknownOp(op) => write!(f, "unknown store operation {op}"),
            WireError::UnknownTag(tag) => write!(f, "unknown tag {tag} in store message"),
            WireError::InvalidStatus(s) => write!(f, "invalid status {s} in store message"),
            WireError::InvalidHeader => f.write_str("unsafe or malformed header in store message"),
            WireError::ZeroTtl => f.write_str("a record TTL of zero"),
            WireError::OutOfRange => f.write_str("a time beyond what a record can hold"),
            WireError::TrailingBytes => f.write_str("store message has trailing bytes"),
            WireError::KeyMismatch => f.write_str("stored value belongs to another key"),
            WireError::Record(e) => write!(f, "{e}"),
            WireError::Table(e) => write!(f, "{e}"),
            WireError::Batch => f.write_str("a batch of finishes that is empty, too long or mixed"),
        }
    }
}
