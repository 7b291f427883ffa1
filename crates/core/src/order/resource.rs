//! A resource's state record and the two rules over it, written once for every store: [`begin`]
//! decides an event's arrival and claims the resource for an event that applies; [`settle`] ends
//! that claim when the upstream has answered — advancing the state on a 2xx, by compare-and-set on
//! the version the claim was made at, and only releasing it otherwise.
//!
//! Both are pure: the record as the store holds it (`None` when absent), the time, and the
//! change to write. A claim whose lease has ended is free: a host that died between `begin` and
//! `settle` holds the resource for one lease at most.

use crate::client::payer::ShareRefusal;
use crate::order::transition::{Arrival, DeclaredTable, TransitionError};
use crate::record::resource::{Resource, ResourceClaim};
use crate::record::OwnerToken;
use crate::time::{Span, UnixMillis};
use alloc::string::String;
use alloc::vec::Vec;

/// What [`begin`] needs besides the record.
#[derive(Debug, Clone, Copy)]
pub struct Begin<'a> {
    pub(crate) table: &'a DeclaredTable,
    pub(crate) event: &'a str,
    pub(crate) owner: OwnerToken,
    pub(crate) lease: Span,
    pub(crate) ttl: Span,
    pub(crate) retry_after: Span,
    pub(crate) forward_after: Option<Span>,
}

/// An event's fate at the edge.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BeginOutcome {
    /// Forward it: the resource is claimed by `owner` until the upstream answers.
    Apply { to: String },
    /// Acknowledge without forwarding: applied before, or stale.
    AlreadyApplied { state: String },
    /// Acknowledge without forwarding: no state from here on accepts it.
    Illegal { state: String, terminal: bool },
    /// 409: deliver it again later.
    Early { retry_after: Span },
    /// Early, but the patience (`forward_after`) since it was first seen is over: forward it,
    /// without claiming the resource or advancing its state.
    ForwardEarly,
    /// Another event for this resource is being forwarded: 409 until its lease ends.
    Busy { retry_after: Span },
    /// No room in the store for a new resource record (the failure mode `on_store_full` applies).
    StoreFull { retry_after: Span },
    /// A payer of a new resource record (the route, or an unsigned route's sender) holds its
    /// share of the store under pressure: 429, as for a claim, naming the share that refused.
    QuotaExceeded {
        retry_after: Span,
        share: Option<ShareRefusal>,
    },
    /// The table does not name the event: handled as without `order`.
    NotOrdered,
    /// The record's state is not in the table (the table changed under it): refused, never
    /// forwarded, until the record expires or an operator removes it.
    UnknownState { state: String },
}

impl BeginOutcome {
    /// The name a log line and the metrics use.
    pub fn name(&self) -> &'static str {
        match self {
            BeginOutcome::Apply { .. } => "apply",
            BeginOutcome::AlreadyApplied { .. } => "already_applied",
            BeginOutcome::Illegal { .. } => "illegal",
            BeginOutcome::Early { .. } => "early",
            BeginOutcome::ForwardEarly => "forward_early",
            BeginOutcome::Busy { .. } => "busy",
            BeginOutcome::UnknownState { .. } => "unknown_state",
            BeginOutcome::NotOrdered => "not_ordered",
            BeginOutcome::StoreFull { .. } => "store_full",
            BeginOutcome::QuotaExceeded { .. } => "quota_exceeded",
        }
    }
}

/// Whether a begin on `current` that writes `written` makes a new record: the one a begin charges
/// to its payers' shares (a live record was charged when it was made).
pub(crate) fn creates(
    current: Option<&Resource>,
    written: Option<&Resource>,
    now: UnixMillis,
) -> bool {
    written.is_some() && current.filter(|r| now < r.expires_at).is_none()
}

/// Decides `begin.event`'s arrival at the resource whose record is `current`, at `now`. Returns
/// the outcome and the record to write (`None`: nothing changes).
#[must_use = "the outcome says what to do with the event, and the record must be written"]
pub fn begin(
    current: Option<&Resource>,
    begin: &Begin<'_>,
    now: UnixMillis,
) -> (BeginOutcome, Option<Resource>) {
    let live = current.filter(|r| now < r.expires_at);
    if let Some(claim) = live.and_then(|r| r.live_claim(now)) {
        if claim.owner != begin.owner {
            let retry_after = Span(now.until(claim.lease_until).0.max(1000));
            return (BeginOutcome::Busy { retry_after }, None);
        }
    }
    let mut record = match live {
        Some(r) => r.clone(),
        None => Resource {
            state: String::from(begin.table.initial()),
            version: 0,
            claim: None,
            early: Vec::new(),
            expires_at: now,
            seal: None,
        },
    };
    let table = begin.table.table();
    match table.arrival(&record.state, begin.event) {
        Arrival::Apply { to } => {
            let to = String::from(to);
            record.claim = Some(ResourceClaim {
                owner: begin.owner,
                lease_until: now.after(begin.lease),
                version: record.version,
            });
            record.expires_at = now.after(begin.ttl);
            // No longer early: its patience is not counted any more.
            record.early.retain(|(event, _)| event != begin.event);
            (BeginOutcome::Apply { to }, Some(record))
        }
        Arrival::AlreadyApplied => (
            BeginOutcome::AlreadyApplied {
                state: record.state,
            },
            None,
        ),
        Arrival::Illegal { terminal } => (
            BeginOutcome::Illegal {
                state: record.state,
                terminal,
            },
            None,
        ),
        Arrival::Early => {
            let early = BeginOutcome::Early {
                retry_after: begin.retry_after,
            };
            let Some(patience) = begin.forward_after else {
                return (early, None);
            };
            match record.early.iter().find(|(e, _)| e == begin.event) {
                Some((_, first)) if now >= first.after(patience) => {
                    (BeginOutcome::ForwardEarly, None)
                }
                Some(_) => (early, None),
                None if record.early.len() >= Resource::MAX_EARLY => (early, None),
                None => {
                    record.early.push((String::from(begin.event), now));
                    // Kept at least until the patience is over, or it could never end.
                    let keep = Span(
                        begin
                            .ttl
                            .0
                            .max(patience.0.saturating_add(begin.retry_after.0)),
                    );
                    record.expires_at = record.expires_at.max(now.after(keep));
                    (early, Some(record))
                }
            }
        }
        // The host checks `OrderRule::tracks` first; an untracked event changes nothing.
        Arrival::Reject(TransitionError::UnknownEvent) => (BeginOutcome::NotOrdered, None),
        Arrival::Reject(_) => (
            BeginOutcome::UnknownState {
                state: record.state,
            },
            None,
        ),
    }
}

/// What ending an applied event's claim did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SettleOutcome {
    /// The state moved to the claim's target; `version` is the new version.
    Advanced { version: u64 },
    /// The claim was released; the state is unchanged.
    Released,
    /// The claim is no longer `owner`'s (its lease ended and another event took the resource, or
    /// the record expired): nothing written.
    NotOwner,
}

/// Ends `owner`'s claim on the resource: on `applied` (the upstream answered 2xx) the state moves
/// to `to` and the version is bumped; otherwise the claim is released and the state stays.
#[must_use = "the record must be written"]
pub fn settle(
    current: Option<&Resource>,
    owner: OwnerToken,
    to: &str,
    applied: bool,
    ttl: Span,
    now: UnixMillis,
) -> (SettleOutcome, Option<Resource>) {
    let Some(record) = current.filter(|r| now < r.expires_at) else {
        return (SettleOutcome::NotOwner, None);
    };
    let fenced = |c: &ResourceClaim| c.owner == owner && c.version == record.version;
    if !record.claim.as_ref().is_some_and(fenced) {
        return (SettleOutcome::NotOwner, None);
    }
    let mut record = record.clone();
    record.claim = None;
    if !applied {
        return (SettleOutcome::Released, Some(record));
    }
    record.state = String::from(to);
    record.version = record.version.wrapping_add(1);
    // The old seal does not cover the new state: the remote store writes the settling filter's.
    record.seal = None;
    record.expires_at = record.expires_at.max(now.after(ttl));
    (
        SettleOutcome::Advanced {
            version: record.version,
        },
        Some(record),
    )
}
