//! Big-endian binary reading and writing for stored records. Reads are bounds-checked and return
//! `Truncated` instead of panicking: stored bytes are treated as untrusted input.

use alloc::vec::Vec;
use core::fmt;

#[derive(Default)]
pub(crate) struct Writer {
    out: Vec<u8>,
}

impl Writer {
    /// A writer whose output has room for `capacity` bytes: an encoder that knows about how
    /// long its output is grows it once, not once per doubling.
    pub(crate) fn with_capacity(capacity: usize) -> Writer {
        Writer {
            out: Vec::with_capacity(capacity),
        }
    }
    /// A writer into `buffer`, emptied, when it has room for `capacity` bytes (else a new one):
    /// an encoder whose caller has a buffer to spare (the bytes it just decoded) allocates none.
    /// A buffer too small is not grown: that would copy bytes that are no longer wanted.
    pub(crate) fn reusing(mut buffer: Vec<u8>, capacity: usize) -> Writer {
        if buffer.capacity() < capacity {
            return Writer::with_capacity(capacity);
        }
        buffer.clear();
        Writer { out: buffer }
    }
    pub(crate) fn u8(&mut self, v: u8) {
        self.out.push(v);
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn bytes(&mut self, v: &[u8]) {
        self.out.extend_from_slice(v);
    }
    /// A byte string of at most 65535 bytes, u16 length first (longer input is cut; callers only
    /// pass header names and values, which are validated shorter).
    pub(crate) fn short_bytes(&mut self, v: &[u8]) {
        let len = v.len().min(usize::from(u16::MAX));
        self.u16(len as u16);
        self.bytes(&v[..len]);
    }
    pub fn finish(self) -> Vec<u8> {
        self.out
    }
}

pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }
    /// Bytes not read yet: what bounds the room a decoder reserves for an untrusted count.
    pub(crate) fn remaining(&self) -> usize {
        self.rest.len()
    }
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.rest.len() < n {
            return Err(DecodeError::Truncated);
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    pub(crate) fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }
    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }
    /// The two-byte magic and the version every stored format starts with.
    pub(crate) fn header(&mut self, magic: &[u8; 2], version: u8) -> Result<(), DecodeError> {
        if self.array::<2>()? != *magic {
            return Err(DecodeError::BadMagic);
        }
        match self.u8()? {
            v if v == version => Ok(()),
            other => Err(DecodeError::UnsupportedVersion(other)),
        }
    }
    pub(crate) fn short_bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = usize::from(self.u16()?);
        self.take(len)
    }
}

/// Why a cell's bytes are not a bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    BadMagic,
    UnsupportedVersion(u8),
    Truncated,
    UnknownTag(u8),
    InvalidStatus(u16),
    InvalidHeader,
    TrailingBytes,
    /// A resource record with a state that is not UTF-8 or too many early events.
    InvalidResource,
    /// A ledger cell ([`crate::store::share::ledger`]) with holds out of order, empty or too many.
    InvalidLedger,
    /// An in-flight claim charged to no payer or to more than two.
    InvalidPayers,
}

impl DecodeError {
    pub fn code(&self) -> &'static str {
        match self {
            DecodeError::BadMagic => "record_bad_magic",
            DecodeError::UnsupportedVersion(_) => "record_unsupported_version",
            DecodeError::Truncated => "record_truncated",
            DecodeError::UnknownTag(_) => "record_unknown_tag",
            DecodeError::InvalidStatus(_) => "record_invalid_status",
            DecodeError::InvalidHeader => "record_invalid_header",
            DecodeError::TrailingBytes => "record_trailing_bytes",
            DecodeError::InvalidResource => "record_invalid_resource",
            DecodeError::InvalidLedger => "ledger_invalid",
            DecodeError::InvalidPayers => "record_invalid_payers",
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::BadMagic => f.write_str("stored record has no idemgate header"),
            DecodeError::UnsupportedVersion(v) => {
                write!(f, "stored record has unknown version {v}")
            }
            DecodeError::Truncated => f.write_str("stored record is truncated"),
            DecodeError::UnknownTag(t) => write!(f, "stored record has unknown tag {t}"),
            DecodeError::InvalidStatus(s) => write!(f, "stored record has invalid status {s}"),
            DecodeError::InvalidHeader => f.write_str("stored record has an unsafe header"),
            DecodeError::TrailingBytes => f.write_str("stored record has trailing bytes"),
            DecodeError::InvalidResource => f.write_str("stored resource record is not valid"),
            DecodeError::InvalidLedger => f.write_str("ledger cell is not valid"),
            DecodeError::InvalidPayers => f.write_str("stored claim's payers are not valid"),
        }
    }
}
