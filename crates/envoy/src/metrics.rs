//! Envoy stats counters, one per outcome, named `idemgate.<outcome>` (Envoy lists proxy-wasm
//! metrics under the `wasmcustom.` prefix at the admin `/stats`). Defined once per VM in
//! `on_configure`; a counter Envoy refused to define is skipped, never a panic.

use crate::abi;
#[allow(unused_imports)]
use crate::prelude::*;
use idemgate_core::answer::Degraded;
use idemgate_core::decision::DoubtCause;
use idemgate_core::events::Event;

/// Each event of the core's guard is one counter.
/// An outcome in doubt is counted once more by its cause.
impl From<DoubtCause> for Counter {
    fn from(cause: DoubtCause) -> Counter {
        match cause {
            DoubtCause::UpstreamReset => Counter::InDoubtUpstreamReset,
            DoubtCause::UpstreamTimeout => Counter::InDoubtUpstreamTimeout,
            DoubtCause::ClientGone => Counter::InDoubtClientGone,
            DoubtCause::Other => Counter::InDoubtOther,
        }
    }
}

/// A request let on unprotected because the store could not decide is counted once more by
/// why (besides `Degraded`, and the `passthrough` every unprotected request counts).
impl From<Degraded> for Counter {
    fn from(why: Degraded) -> Counter {
        match why {
            Degraded::StoreFull => Counter::DegradedStoreFull,
            Degraded::StoreUnavailable => Counter::DegradedStoreUnavailable,
            // A reason this filter does not know yet is still counted in `Degraded`.
            _ => Counter::Degraded,
        }
    }
}

impl From<Event> for Counter {
    fn from(event: Event) -> Counter {
        match event {
            Event::Claimed => Counter::Claimed,
            Event::TakenOver => Counter::TakenOver,
            Event::Conflict => Counter::Conflict,
            Event::Replayed => Counter::Replayed,
            Event::Mismatch => Counter::Mismatch,
            Event::QuotaExceeded => Counter::QuotaExceeded,
            Event::QuotaIdentity => Counter::QuotaIdentity,
            Event::QuotaAddress => Counter::QuotaAddress,
            Event::QuotaRoute => Counter::QuotaRoute,
            Event::QuotaBytes => Counter::QuotaBytes,
            Event::StoreFull => Counter::StoreFull,
            Event::StoreError => Counter::StoreError,
            Event::RecordCorrupt => Counter::RecordCorrupt,
            Event::Passthrough => Counter::Passthrough,
            Event::ScopeUnavailable => Counter::ScopeUnavailable,
            Event::TokenIssued => Counter::TokenIssued,
            Event::TokenConsumed => Counter::TokenConsumed,
            Event::TokenRejected => Counter::TokenRejected,
            Event::SignatureRejected => Counter::SignatureRejected,
            Event::MissingKey => Counter::MissingKey,
            Event::InvalidKey => Counter::InvalidKey,
            Event::BodyTooLarge => Counter::BodyTooLarge,
            Event::HashingBudgetExceeded => Counter::HashingBudgetExceeded,
            Event::RelayBudgetExceeded => Counter::RelayBudgetExceeded,
            Event::DetachedClientGone => Counter::DetachedClientGone,
            Event::RelayTooLarge => Counter::RelayTooLarge,
            Event::InvalidBody => Counter::InvalidBody,
            Event::OrderResourceMissing => Counter::OrderResourceMissing,
            Event::PreconditionRequired => Counter::PreconditionRequired,
            Event::PreconditionMalformed => Counter::PreconditionMalformed,
            Event::OrderForwarded => Counter::OrderForwarded,
            Event::OrderForwardedEarly => Counter::OrderForwardedEarly,
            Event::OrderAlreadyApplied => Counter::OrderAlreadyApplied,
            Event::OrderIllegal => Counter::OrderIllegal,
            Event::OrderEarly => Counter::OrderEarly,
            Event::OrderBusy => Counter::OrderBusy,
            Event::OrderApplied => Counter::OrderApplied,
            Event::OrderNotApplied => Counter::OrderNotApplied,
            Event::Stored => Counter::Stored,
            Event::Released => Counter::Released,
            Event::OrderStateUnknown => Counter::OrderStateUnknown,
            Event::Waited => Counter::Waited,
            Event::WaitExpired => Counter::WaitExpired,
            Event::WaitFull => Counter::WaitFull,
        }
    }
}

/// Every counter the filter keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    /// A request claimed its key and was forwarded (take-overs included).
    Claimed,
    /// A completed request's answer was replayed.
    Replayed,
    /// 409: the first request with the key is still in flight.
    Conflict,
    /// 422: the key was reused for another payload.
    Mismatch,
    /// 400: the key header broke a rule.
    InvalidKey,
    /// 400: a route that requires a key got none.
    MissingKey,
    /// An upstream answer was stored as the idempotent result.
    Stored,
    /// A claim was dropped (the upstream said "not done", or the request never reached it).
    Released,
    /// An expired lease was taken over by a retry.
    TakenOver,
    /// The outcome was in doubt: the claim stays in flight until its lease ends (every cause).
    InDoubt,
    /// In doubt because the upstream reset or closed the exchange after the request was sent.
    InDoubtUpstreamReset,
    /// In doubt because the upstream timeout fired.
    InDoubtUpstreamTimeout,
    /// In doubt because the client went away (router path only: a detached exchange outlives it).
    InDoubtClientGone,
    /// In doubt for another or an unknown reason.
    InDoubtOther,
    /// A claimed request was sent on a detached exchange (the edge's own call to the cluster).
    Detached,
    /// A detached exchange answered after its client had gone: settled all the same.
    DetachedClientGone,
    /// A detached exchange's answer was over `upstream.max_body`: recorded, and relayed without
    /// its body (the upstream's status, `Idempotent-Body-Omitted: true`).
    RelayTooLarge,
    /// An answer from the re-entry cluster without the re-entry mark: the internal listener lacks
    /// its marking filter (misconfigured); the outcome was taken as in doubt.
    ReentryUnmarked,
    /// The store had no room: the configured failure mode applied.
    StoreFull,
    /// 429: a payer of the request already held its share of the store (`shares`).
    QuotaExceeded,
    /// Of `QuotaExceeded`: an identity held its share of records.
    QuotaIdentity,
    /// Of `QuotaExceeded`: an address group held its share of records.
    QuotaAddress,
    /// Of `QuotaExceeded`: a callback route held its own share (`routes[].share`).
    QuotaRoute,
    /// Of `QuotaExceeded`: a payer held its share of bytes.
    QuotaBytes,
    /// 503: the VM's `hashing_budget` for bodies in progress, or the peer's part of it, was used up.
    HashingBudgetExceeded,
    /// 503: a detached exchange's answer did not fit the VM's `relay_budget`, or the peer's part
    /// of it; its claim was released unsent.
    RelayBudgetExceeded,
    /// The store failed (or was contended past the retry bound): the failure mode applied.
    StoreError,
    /// No scope source identified the client: the failure mode applied (never a shared namespace).
    ScopeUnavailable,
    TokenIssued,
    TokenConsumed,
    TokenRejected,
    /// A guarded request forwarded without protection: no key on an optional route, or a store
    /// problem under `pass_through`.
    Passthrough,
    /// Of `Passthrough`: the store could not decide (full, or failing) and the failure mode let
    /// the request on; its answer carries `Idempotent-Degraded`.
    Degraded,
    /// Of `Degraded`: the key's store cell was full (`on_store_full: "pass_through"`).
    DegradedStoreFull,
    /// Of `Degraded`: the store failed or was unreachable (`on_store_error: "pass_through"`).
    DegradedStoreUnavailable,
    /// 413: the request body was over `max_request_body`.
    BodyTooLarge,
    /// 400: the body could not be fingerprinted (e.g. invalid JSON in `json` mode).
    InvalidBody,
    /// 403: a callback delivery without a valid provider signature (never forwarded).
    SignatureRejected,
    /// 502: the remote store's answer for the key failed its seal (planted or altered in the
    /// store): never replayed, never forwarded.
    RecordCorrupt,
    /// An ordered event applies: forwarded, its resource claimed until the upstream answers.
    OrderForwarded,
    /// The upstream answered 2xx: the resource's state advanced.
    OrderApplied,
    /// The upstream did not answer 2xx (or the client went away): the resource's claim was released, its state unchanged.
    OrderNotApplied,
    /// 200 from the edge: the event was applied before, or is stale.
    OrderAlreadyApplied,
    /// 200 from the edge: no state from the resource's accepts the event (also logged).
    OrderIllegal,
    /// 409: the event is early; the sender delivers it again later.
    OrderEarly,
    /// An early event forwarded after `early.forward_after` (the state is not advanced by the edge).
    OrderForwardedEarly,
    /// 409: another event for the resource was in flight.
    OrderBusy,
    /// 400: a tracked event without a resource id.
    OrderResourceMissing,
    /// 500: the stored state is not in the route's table.
    OrderStateUnknown,
    /// 428: an update without `If-Match` on a route that requires it.
    PreconditionRequired,
    /// 400: a malformed `If-Match`.
    PreconditionMalformed,
    /// A duplicate of a request in flight was parked to wait for the first's answer.
    Waited,
    /// Of `Conflict`: a parked duplicate reached its wait bound, the first still in flight.
    WaitExpired,
    /// Of `Conflict`: no room for another waiter (on the key, or in the VM).
    WaitFull,
    /// Batches of finishes sent to the store service (one callout each).
    FinishBatches,
    /// Finishes sent in them, resends included (`/ finish_batches`: finishes per batch).
    FinishesBatched,
    /// A batch refused whole (400: a service that predates batches): its claims stay in flight.
    FinishBatchRefused,
}

impl Counter {
    pub const ALL: [Counter; 57] = [
        Counter::Claimed,
        Counter::Replayed,
        Counter::Conflict,
        Counter::Mismatch,
        Counter::InvalidKey,
        Counter::MissingKey,
        Counter::Stored,
        Counter::Released,
        Counter::TakenOver,
        Counter::InDoubt,
        Counter::InDoubtUpstreamReset,
        Counter::InDoubtUpstreamTimeout,
        Counter::InDoubtClientGone,
        Counter::InDoubtOther,
        Counter::Detached,
        Counter::DetachedClientGone,
        Counter::RelayTooLarge,
        Counter::ReentryUnmarked,
        Counter::StoreFull,
        Counter::QuotaExceeded,
        Counter::QuotaIdentity,
        Counter::QuotaAddress,
        Counter::QuotaRoute,
        Counter::QuotaBytes,
        Counter::HashingBudgetExceeded,
        Counter::RelayBudgetExceeded,
        Counter::StoreError,
        Counter::ScopeUnavailable,
        Counter::TokenIssued,
        Counter::TokenConsumed,
        Counter::TokenRejected,
        Counter::Passthrough,
        Counter::Degraded,
        Counter::DegradedStoreFull,
        Counter::DegradedStoreUnavailable,
        Counter::BodyTooLarge,
        Counter::InvalidBody,
        Counter::SignatureRejected,
        Counter::RecordCorrupt,
        Counter::OrderForwarded,
        Counter::OrderApplied,
        Counter::OrderNotApplied,
        Counter::OrderAlreadyApplied,
        Counter::OrderIllegal,
        Counter::OrderEarly,
        Counter::OrderForwardedEarly,
        Counter::OrderBusy,
        Counter::OrderResourceMissing,
        Counter::OrderStateUnknown,
        Counter::PreconditionRequired,
        Counter::PreconditionMalformed,
        Counter::Waited,
        Counter::WaitExpired,
        Counter::WaitFull,
        Counter::FinishBatches,
        Counter::FinishesBatched,
        Counter::FinishBatchRefused,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Counter::Claimed => "idemgate.claimed",
            Counter::Replayed => "idemgate.replayed",
            Counter::Conflict => "idemgate.conflict",
            Counter::Mismatch => "idemgate.mismatch",
            Counter::InvalidKey => "idemgate.invalid_key",
            Counter::MissingKey => "idemgate.missing_key",
            Counter::Stored => "idemgate.stored",
            Counter::Released => "idemgate.released",
            Counter::TakenOver => "idemgate.taken_over",
            Counter::InDoubt => "idemgate.in_doubt",
            Counter::InDoubtUpstreamReset => "idemgate.in_doubt.upstream_reset",
            Counter::InDoubtUpstreamTimeout => "idemgate.in_doubt.upstream_timeout",
            Counter::InDoubtClientGone => "idemgate.in_doubt.client_gone",
            Counter::InDoubtOther => "idemgate.in_doubt.other",
            Counter::Detached => "idemgate.detached",
            Counter::DetachedClientGone => "idemgate.detached_client_gone",
            Counter::RelayTooLarge => "idemgate.relay_too_large",
            Counter::ReentryUnmarked => "idemgate.reentry_unmarked",
            Counter::StoreFull => "idemgate.store_full",
            Counter::QuotaExceeded => "idemgate.quota_exceeded",
            Counter::QuotaIdentity => "idemgate.quota_exceeded.identity",
            Counter::QuotaAddress => "idemgate.quota_exceeded.address",
            Counter::QuotaRoute => "idemgate.quota_exceeded.route",
            Counter::QuotaBytes => "idemgate.quota_exceeded.bytes",
            Counter::HashingBudgetExceeded => "idemgate.hashing_budget_exceeded",
            Counter::RelayBudgetExceeded => "idemgate.relay_budget_exceeded",
            Counter::StoreError => "idemgate.store_error",
            Counter::ScopeUnavailable => "idemgate.scope_unavailable",
            Counter::TokenIssued => "idemgate.token_issued",
            Counter::TokenConsumed => "idemgate.token_consumed",
            Counter::TokenRejected => "idemgate.token_rejected",
            Counter::Passthrough => "idemgate.passthrough",
            Counter::Degraded => "idemgate.degraded",
            Counter::DegradedStoreFull => "idemgate.degraded.store_full",
            Counter::DegradedStoreUnavailable => "idemgate.degraded.store_unavailable",
            Counter::BodyTooLarge => "idemgate.body_too_large",
            Counter::InvalidBody => "idemgate.invalid_body",
            Counter::SignatureRejected => "idemgate.signature_rejected",
            Counter::RecordCorrupt => "idemgate.record_corrupt",
            Counter::OrderForwarded => "idemgate.order.forwarded",
            Counter::OrderApplied => "idemgate.order.applied",
            Counter::OrderNotApplied => "idemgate.order.not_applied",
            Counter::OrderAlreadyApplied => "idemgate.order.already_applied",
            Counter::OrderIllegal => "idemgate.order.illegal",
            Counter::OrderEarly => "idemgate.order.early",
            Counter::OrderForwardedEarly => "idemgate.order.forwarded_early",
            Counter::OrderBusy => "idemgate.order.busy",
            Counter::OrderResourceMissing => "idemgate.order.resource_missing",
            Counter::OrderStateUnknown => "idemgate.order.state_unknown",
            Counter::PreconditionRequired => "idemgate.precondition_required",
            Counter::PreconditionMalformed => "idemgate.precondition_malformed",
            Counter::Waited => "idemgate.waited",
            Counter::WaitExpired => "idemgate.wait_expired",
            Counter::WaitFull => "idemgate.wait_full",
            Counter::FinishBatches => "idemgate.store.finish_batches",
            Counter::FinishesBatched => "idemgate.store.finishes_batched",
            Counter::FinishBatchRefused => "idemgate.store.finish_batch_refused",
        }
    }
}

/// The metric ids of one VM.
#[derive(Debug)]
pub struct Metrics {
    ids: [Option<u32>; Counter::ALL.len()],
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            ids: [None; Counter::ALL.len()],
        }
    }
}

impl Metrics {
    /// Defines every counter (Envoy returns the existing stat for a name defined before).
    pub fn define() -> Metrics {
        let mut metrics = Metrics::default();
        for (slot, counter) in metrics.ids.iter_mut().zip(Counter::ALL) {
            *slot = abi::define_counter(counter.name()).ok();
        }
        metrics
    }

    pub fn bump(&self, counter: Counter) {
        self.add(counter, 1);
    }

    pub fn add(&self, counter: Counter, n: i64) {
        let index = Counter::ALL.iter().position(|c| *c == counter);
        if let Some(id) = index.and_then(|i| self.ids.get(i).copied().flatten()) {
            // A failed increment only loses a count.
            let _ = abi::increment_metric(id, n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_prefixed() {
        let mut names: Vec<&str> = Counter::ALL.iter().map(|c| c.name()).collect();
        assert!(names.iter().all(|n| n.starts_with("idemgate.")));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Counter::ALL.len());
    }
}
