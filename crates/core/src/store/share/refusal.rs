//! Why a payer was refused for its share, as the hosts count and log it.

use super::ledger::Usage;
use super::{PayerTag, Share};

/// Which share refused a record, as it is counted and logged, so that an operator can tell an
/// attack (one payer at its share) from a store sized too small (everyone at theirs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShareReason {
    /// An identity's records (`shares.identity`).
    Identity,
    /// An address group's records (`shares.peer`).
    Address,
    /// A callback route's own records (`routes[].share`).
    Route,
    /// A payer's bytes (`shares.identity_bytes`, `shares.peer_bytes`), its records within their
    /// share.
    Bytes,
}

impl ShareReason {
    pub fn name(self) -> &'static str {
        match self {
            ShareReason::Identity => "identity",
            ShareReason::Address => "address",
            ShareReason::Route => "route",
            ShareReason::Bytes => "bytes",
        }
    }
}

/// A payer refused for its share: which share, and whose — the payer's tag, a hash of its scope
/// (never the identity itself) that names it in a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareRefusal {
    pub reason: ShareReason,
    pub payer: PayerTag,
}

impl ShareRefusal {
    /// Why `tag`, holding `usage`, has no room within `limit`: its bytes when its records are
    /// below their share, its kind's records otherwise.
    pub(crate) fn of(tag: PayerTag, usage: &Usage, limit: Share) -> ShareRefusal {
        let reason = if usage.records() < limit.records {
            ShareReason::Bytes
        } else if tag.is_route() {
            ShareReason::Route
        } else if tag.is_address_group() {
            ShareReason::Address
        } else {
            ShareReason::Identity
        };
        ShareRefusal { reason, payer: tag }
    }
}

impl core::fmt::Display for ShareRefusal {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("429 scope_quota_exceeded: payer ")?;
        for byte in self.payer.0 {
            write!(f, "{byte:02x}")?;
        }
        write!(f, " holds its {} share", self.reason.name())
    }
}
