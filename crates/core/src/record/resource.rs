//! A resource's state record, as every store keeps it: the data the ordering rules
//! ([`crate::order::resource`]) read and write.

use crate::record::seal::Seal;
use crate::record::OwnerToken;
use crate::time::UnixMillis;
use alloc::string::String;
use alloc::vec::Vec;

/// The state a resource is in, as the edge keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    pub state: String,
    /// Bumped by every transition; a settle lands only on the version its claim was made at.
    pub version: u64,
    /// The event being forwarded for this resource, if any.
    pub claim: Option<ResourceClaim>,
    /// Early events (by type) and when the edge first saw each: what `forward_after` counts from.
    pub(crate) early: Vec<(String, UnixMillis)>,
    /// The record's end (the route's `ttl` after its last change).
    pub(crate) expires_at: UnixMillis,
    /// The remote store's MAC over the key, state and version, made by the filter that advanced
    /// the state ([`crate::record::seal`]); `None` on the local store and before the first
    /// transition.
    pub(crate) seal: Option<Seal>,
}

/// A resource's state as the remote store read it for a begin, with its seal: the filter checks
/// it (`crate::record::seal::RecordSecrets::check_state`) before it acts on the store's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadState {
    pub(crate) state: String,
    pub(crate) version: u64,
    pub(crate) seal: Option<Seal>,
}

/// An event in flight for a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceClaim {
    pub owner: OwnerToken,
    /// After this the claim is free (its host is gone or its upstream never answered).
    pub(crate) lease_until: UnixMillis,
    /// The resource's version when it was claimed: the settle's compare-and-set.
    pub(crate) version: u64,
}

impl Resource {
    /// The state, version and seal, as a begin's answer carries them.
    pub(crate) fn read_state(&self) -> ReadState {
        ReadState {
            state: self.state.clone(),
            version: self.version,
            seal: self.seal,
        }
    }

    /// The claim that still holds the resource at `now`.
    pub fn live_claim(&self, now: UnixMillis) -> Option<&ResourceClaim> {
        self.claim.as_ref().filter(|c| now < c.lease_until)
    }

    /// How many early events a record remembers (a table names few event types; this bounds a
    /// record whatever the table).
    pub(crate) const MAX_EARLY: usize = 32;
}
