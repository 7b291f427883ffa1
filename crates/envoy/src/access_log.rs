//! Each request's decision, written where Envoy's access logs can print it.
//!
//! Counters say how often; an access log line says what happened to *this* request. Every
//! decision already goes through one counter ([`Counter`]), so the filter hands each counted
//! decision here too, and it is written with `set_property` to two properties of the stream:
//!
//! - `idemgate.decision` — what the filter did with the request: `claimed`, `taken_over`,
//!   `replayed`, `conflict`, `mismatch`, `invalid_key`, `missing_key`, `body_too_large`,
//!   `invalid_body`, `store_full`, `store_error`, `scope_unavailable`, `passthrough`,
//!   `token_issued`, `token_rejected`, `signature_rejected`, `record_corrupt`;
//! - `idemgate.outcome` — what became of a claim when the exchange ended: `stored`, `released`,
//!   `in_doubt`.
//!
//! Envoy keeps a property set by a Wasm filter as filter state under `wasm.<name>`, so an access
//! log prints them with `%FILTER_STATE(wasm.idemgate.decision:PLAIN)%` and
//! `%FILTER_STATE(wasm.idemgate.outcome:PLAIN)%` (`-` when unset: an unguarded request).
//! The last write wins: a take-over is `taken_over` (not `claimed`), a store problem answered
//! by forwarding anyway is `passthrough`. A failed write only loses a log field.

use crate::metrics::Counter;
#[allow(unused_imports)]
use crate::prelude::*;
use idemgate_core::FinishOutcome;

/// The property (and, prefixed with `wasm.`, the filter-state key) of the request's decision.
pub const DECISION: &str = "idemgate.decision";
/// The property (and, prefixed with `wasm.`, the filter-state key) of a claim's outcome.
pub const OUTCOME: &str = "idemgate.outcome";
/// The stream property an access log prints as `%FILTER_STATE(wasm.idemgate.order:PLAIN)%`: the
/// sequencer's outcome for this request (`apply`, `already_applied`, `illegal`, `early`,
/// `busy`, `resource_missing`, ...).
pub const ORDER_FIELD: &str = "idemgate.order";

/// Where a counted event is logged, and as what (`None`: not logged; it adds nothing to the
/// decision already written).
pub fn field(counter: Counter) -> Option<(&'static str, &'static str)> {
    let slot = match counter {
        Counter::Stored | Counter::Released | Counter::InDoubt => OUTCOME,
        // Follow a `claimed`: the decision stays `claimed` (the cause of an in-doubt outcome is
        // in its own counter; `in_doubt` is the outcome).
        Counter::TokenConsumed
        | Counter::Detached
        | Counter::DetachedClientGone
        | Counter::RelayTooLarge
        | Counter::InDoubtUpstreamReset
        | Counter::InDoubtUpstreamTimeout
        | Counter::InDoubtClientGone
        | Counter::InDoubtOther => return None,
        // A parked duplicate's decision is how it ended (`replayed`, `claimed`, `conflict`);
        // that it waited, and why a wait ended in a 409, are in their own counters.
        Counter::Waited | Counter::WaitExpired | Counter::WaitFull => return None,
        // Follow a `passthrough`: the decision stays `passthrough`; why it was degraded is in its
        // own counters and the answer's header.
        Counter::Degraded | Counter::DegradedStoreFull | Counter::DegradedStoreUnavailable => {
            return None
        }
        // Follow a `quota_exceeded`: the share that refused is in its own counter.
        Counter::QuotaIdentity
        | Counter::QuotaAddress
        | Counter::QuotaRoute
        | Counter::QuotaBytes => return None,
        // A tracked event without its resource is refused by the core's request machine before
        // the sequencer is asked, so its outcome is written here.
        Counter::OrderResourceMissing => return Some((ORDER_FIELD, "resource_missing")),
        // The sequencer writes its own field (`crate::sequencer`).
        Counter::OrderForwarded
        | Counter::OrderApplied
        | Counter::OrderNotApplied
        | Counter::OrderAlreadyApplied
        | Counter::OrderIllegal
        | Counter::OrderEarly
        | Counter::OrderForwardedEarly
        | Counter::OrderBusy
        | Counter::OrderStateUnknown => return None,
        _ => DECISION,
    };
    let label = counter.name().strip_prefix("idemgate.")?;
    Some((slot, label))
}

/// Writes the decision behind `counter` to the current stream's filter state.
pub fn record(counter: Counter) {
    if let Some((slot, label)) = field(counter) {
        // Fails only outside a stream (e.g. after it was destroyed): the log field is lost.
        let _ = crate::abi::set_property(&[slot], label.as_bytes());
    }
}

/// Writes what became of a claim. [`crate::settle`] calls it where it settles, which on the
/// router path is the stream's own context; a detached exchange settles on the root context
/// (where the write fails), so the relay writes it again once the stream is effective.
pub fn record_outcome(outcome: FinishOutcome) {
    let counter = match outcome {
        FinishOutcome::Stored => Counter::Stored,
        FinishOutcome::Released => Counter::Released,
        FinishOutcome::KeptInFlight => Counter::InDoubt,
        FinishOutcome::NotOwner => return,
    };
    record(counter);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_decision_counter_is_logged_under_its_own_name() {
        let follows_claimed = [
            Counter::TokenConsumed,
            Counter::Detached,
            Counter::DetachedClientGone,
            Counter::RelayTooLarge,
            Counter::InDoubtUpstreamReset,
            Counter::InDoubtUpstreamTimeout,
            Counter::InDoubtClientGone,
            Counter::InDoubtOther,
            Counter::QuotaIdentity,
            Counter::QuotaAddress,
            Counter::QuotaRoute,
            Counter::QuotaBytes,
            Counter::Waited,
            Counter::WaitExpired,
            Counter::WaitFull,
            Counter::Degraded,
            Counter::DegradedStoreFull,
            Counter::DegradedStoreUnavailable,
        ];
        // The sequencer's outcomes go to their own field (`ORDER_FIELD`).
        let ordering = |c: Counter| c.name().starts_with("idemgate.order.");
        for counter in Counter::ALL {
            match field(counter) {
                None => assert!(
                    follows_claimed.contains(&counter) || ordering(counter),
                    "{counter:?}"
                ),
                Some((ORDER_FIELD, label)) => {
                    assert!(ordering(counter), "{counter:?}");
                    assert_eq!(format!("idemgate.order.{label}"), counter.name());
                }
                Some((slot, label)) => {
                    assert_eq!(format!("idemgate.{label}"), counter.name());
                    let outcome = matches!(
                        counter,
                        Counter::Stored | Counter::Released | Counter::InDoubt
                    );
                    assert_eq!(slot, if outcome { OUTCOME } else { DECISION });
                }
            }
        }
    }
}
