//! What happened to a request, for metrics and logs: the events every machine of the core gives
//! out beside its actions, and every host counts.

/// Something that happened to the request, for metrics and logs: each is one counter. Exhaustive
/// on purpose: a new event must be given its counter by every host, not fall into a catch-all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Claimed,
    /// The claim replaced one whose lease had ended (its owner gone).
    TakenOver,
    Conflict,
    Replayed,
    Mismatch,
    QuotaExceeded,
    /// Beside `QuotaExceeded`: the share that refused was an identity's records.
    QuotaIdentity,
    /// Beside `QuotaExceeded`: an address group's records.
    QuotaAddress,
    /// Beside `QuotaExceeded`: a callback route's own records (`routes[].share`).
    QuotaRoute,
    /// Beside `QuotaExceeded`: a payer's bytes.
    QuotaBytes,
    StoreFull,
    /// The store could not decide (unreachable, failed, contended, unreadable cell).
    StoreError,
    /// A stored answer failed its seal: never replayed, never run again.
    RecordCorrupt,
    /// Forwarded without idempotency by a failure mode.
    Passthrough,
    /// No configured scope source identified the client.
    ScopeUnavailable,
    /// The issuing endpoint gave a client a one-time token.
    TokenIssued,
    /// A one-time token was used (once, now).
    TokenConsumed,
    /// A one-time token was refused: missing, not valid here, or used before.
    TokenRejected,
    /// Refused before its claim: a webhook signature that does not verify.
    SignatureRejected,
    /// Refused before its claim: the route requires a key and none was found.
    MissingKey,
    /// Refused before its claim: a key that is not valid, or a key source that cannot be read.
    InvalidKey,
    /// Refused before its claim: a body over `max_request_body`.
    BodyTooLarge,
    /// Refused before its claim: the hashing budget (or the peer's part) could not take its body.
    HashingBudgetExceeded,
    /// Claimed, then released unsent: the relay budget (or the peer's part) could not take the
    /// detached exchange's answer.
    RelayBudgetExceeded,
    /// A detached exchange's answer came after its client had gone: settled all the same.
    DetachedClientGone,
    /// A detached exchange's answer was over `upstream.max_body`: relayed without its body.
    RelayTooLarge,
    /// Refused before its claim: a body the fingerprint mode cannot read.
    InvalidBody,
    /// Refused before its claim: a tracked event without its resource id (400).
    OrderResourceMissing,
    /// Refused by the route's precondition: an update without `If-Match` (428).
    PreconditionRequired,
    /// Refused by the route's precondition: a malformed `If-Match` (400).
    PreconditionMalformed,
    /// The sequencer let an event on that applies: its resource is claimed.
    OrderForwarded,
    /// Early, but its patience (`forward_after`) was over: let on without claiming its resource.
    OrderForwardedEarly,
    /// Acknowledged without forwarding: applied before, or stale.
    OrderAlreadyApplied,
    /// Acknowledged without forwarding: no state from here on accepts it.
    OrderIllegal,
    /// 409: deliver it again later.
    OrderEarly,
    /// 409: another event for its resource is being forwarded.
    OrderBusy,
    /// 409: the resource's state is not in the table.
    OrderStateUnknown,
    /// A forwarded event's 2xx answer advanced its resource's state.
    OrderApplied,
    /// A forwarded event was not applied (no 2xx): its resource's claim was released unchanged.
    OrderNotApplied,
    /// A finish stored the answer (in the store service: the local store's finish is counted by
    /// its host as it writes).
    Stored,
    /// A finish released the claim (in the store service).
    Released,
    /// A duplicate of a request in flight was parked to wait for the first's answer
    /// (`in_flight.wait`); how it ends is counted as any request's (replayed, claimed, conflict).
    Waited,
    /// Beside `Conflict`: a parked duplicate reached its wait bound with the first still in flight.
    WaitExpired,
    /// Beside `Conflict`: the host had no room for another waiter (on the key, or in its VM).
    WaitFull,
}

/// At most three events per step (a claim taken over: claimed and taken over; a full store passed
/// through: store full and passthrough).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Events([Option<Event>; 3]);

impl Events {
    pub(crate) fn of(events: &[Event]) -> Events {
        let mut out = Events::default();
        for (slot, event) in out.0.iter_mut().zip(events) {
            *slot = Some(*event);
        }
        out
    }

    /// These events and `event` after them; `None` if all three places are taken (no step gives
    /// more than three).
    pub(crate) fn with(mut self, event: Event) -> Option<Events> {
        let slot = self.0.iter_mut().find(|slot| slot.is_none())?;
        *slot = Some(event);
        Some(self)
    }

    pub fn iter(&self) -> impl Iterator<Item = Event> + '_ {
        self.0.iter().flatten().copied()
    }
}
