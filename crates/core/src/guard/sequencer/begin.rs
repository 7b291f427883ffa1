//! The sequencer's first step on a store, decided whole here: on the local store at once
//! ([`crate::store::ordering::begin`]), or as the request the store service is sent and what its
//! answer means ([`client::order_begin`], [`client::begin_outcome`]) — both ending in [`decide`],
//! with the events to count, the access log's outcome and the line to log. A host only says
//! where the record is ([`OrderStore`]), moves the bytes, and carries out what [`Begun`] says.

use super::note::OrderNote;
use super::{decide, Applies, Ordered};
use crate::answer::{answer_for, EdgeAnswer};
use crate::client::payer::Payers;
use crate::client::scope::StorageKey;
use crate::events::Events;
use crate::guard::Ruling;
use crate::order::{Begin, BeginOutcome, OrderRule};
use crate::policy::{Policy, StoreKind};
use crate::record::OwnerToken;
use crate::store::ordering as local;
use crate::store::protocol::ProtocolError;
use crate::store::remote::client::{self, CalloutReply};
use crate::store::remote::Request;
use crate::store::Store;
use crate::time::UnixMillis;
use alloc::string::String;
use alloc::sync::Arc;

/// Where the resource's record is, for one step of the sequencer.
pub enum OrderStore<'s, S: ?Sized> {
    /// The host's local store, asked at once at `now`.
    Local { store: &'s mut S, now: UnixMillis },
    /// The store service, asked by callout.
    Remote,
    /// The local store, but the host could not read its clock: nothing can be decided on it.
    NoClock,
}

/// A resource claimed for an event being let on: settled ([`super::settle`]) when the upstream
/// answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    pub(crate) key: StorageKey,
    pub(crate) owner: OwnerToken,
    /// The state the resource moves to once the upstream answers 2xx.
    pub(crate) to: String,
    /// The resource's version when claimed: the remote store's settle seals `to` at the next
    /// (the local store needs no seal: 0).
    pub(crate) version: u64,
}

/// What the sequencer decided for an event: the decision the request machine is handed, and
/// what the host counts and logs beside it.
#[derive(Debug)]
#[must_use = "the decision goes to the request's machine; the events are counted"]
pub struct Begun {
    pub decision: Ruling<Claimed>,
    pub events: Events,
    /// The outcome's name for the access log (`None`: the store decided nothing).
    pub outcome: Option<&'static str>,
    pub note: Option<OrderNote>,
}

/// The begin's first step.
#[derive(Debug)]
#[must_use = "a decision is carried out, a request is sent"]
pub enum BeginStep {
    /// Decided now.
    Decided(Begun),
    /// Send `request` to the store service; what comes back goes to [`AskedBegin::answered`]
    /// (or, if the host could not send it, [`AskedBegin::unsent`]).
    Send { request: Request, asked: AskedBegin },
}

/// A begin asked of the store service: what its answer is decided with.
#[derive(Debug, Clone)]
pub struct AskedBegin {
    key: StorageKey,
    owner: OwnerToken,
    event: String,
    /// The route's rule: its table's initial state is the one a record needs no seal for.
    rule: Arc<OrderRule>,
}

/// The sequencer's begin for `ordered`, by `owner`, a new resource record charged to
/// `payers` (the delivery claim's).
pub fn begin<S: Store + ?Sized>(
    policy: &Policy,
    ordered: Ordered,
    owner: OwnerToken,
    payers: Payers,
    at: OrderStore<'_, S>,
) -> BeginStep {
    let Ordered { rule, key, event } = ordered;
    let (store, now) = match at {
        OrderStore::Local { store, now } => (store, now),
        // No clock, no decision: nothing was forwarded or claimed here.
        OrderStore::NoClock => {
            return BeginStep::Decided(Begun {
                decision: Ruling::Answer(answer_for(&EdgeAnswer::ClockUnavailable, policy)),
                events: Events::default(),
                outcome: None,
                note: None,
            })
        }
        OrderStore::Remote => {
            let request = client::order_begin(key, owner, &event, &rule, payers, policy);
            let asked = AskedBegin {
                key,
                owner,
                event,
                rule,
            };
            return BeginStep::Send { request, asked };
        }
    };
    let begin = Begin {
        table: &rule.table,
        event: &event,
        owner,
        lease: policy.lease,
        ttl: policy.ttl,
        retry_after: rule.retry_after,
        forward_after: rule.forward_after,
    };
    let outcome = local::begin(store, policy, key, begin, payers, now);
    // The local store needs no seal: the claim's version is not used.
    BeginStep::Decided(decided(policy, outcome, (key, owner, 0), &event))
}

impl AskedBegin {
    /// The store service answered: decided as a local begin would be, once the state it was
    /// decided on checks out against the record secrets.
    pub fn answered(self, policy: &Policy, reply: CalloutReply<'_>) -> Begun {
        let checked = match &policy.store {
            StoreKind::Remote { secrets, .. } => {
                client::begin_outcome(reply, &self.key, self.rule.table.initial(), secrets)
            }
            // A begin is asked of the store service only when the store is remote.
            _ => Err(ProtocolError::UnexpectedReply),
        };
        let (outcome, version) = match checked {
            Ok((outcome, version)) => (Ok(outcome), version),
            Err(e) => (Err(e), 0),
        };
        decided(
            policy,
            outcome,
            (self.key, self.owner, version),
            &self.event,
        )
    }

    /// The host could not send the begin (`error`): a store failure, for the failure mode.
    pub fn unsent(self, policy: &Policy, error: ProtocolError) -> Begun {
        decided(policy, Err(error), (self.key, self.owner, 0), &self.event)
    }
}

/// [`decide`] for `outcome`, with what to log; an event that applies carries its resource's claim
/// (`key`, `owner`, the version claimed at).
fn decided(
    policy: &Policy,
    outcome: Result<BeginOutcome, ProtocolError>,
    (key, owner, version): (StorageKey, OwnerToken, u64),
    event: &str,
) -> Begun {
    let (decision, events, name, note) = match outcome {
        Ok(outcome) => {
            let name = outcome.name();
            let note = match &outcome {
                // Which share refused a new resource record, and whose (its hashed tag).
                BeginOutcome::QuotaExceeded {
                    share: Some(share), ..
                } => Some(OrderNote::OverShare(*share)),
                BeginOutcome::Illegal { state, .. } => Some(OrderNote::Illegal {
                    event: String::from(event),
                    state: state.clone(),
                }),
                _ => None,
            };
            let (decision, events) = decide(policy, Ok(outcome));
            (decision, events, Some(name), note)
        }
        Err(error) => {
            let (decision, events) = decide(policy, Err(&error));
            // A store failure names no state: the event's name is not logged with it.
            let note = match error {
                ProtocolError::Tampered(_) => OrderNote::RecordCorrupt { key, error },
                error => OrderNote::StoreFailed(error),
            };
            (decision, events, None, Some(note))
        }
    };
    let decision = match decision {
        Ruling::Forward(Some(Applies { to })) => Ruling::Forward(Some(Claimed {
            key,
            owner,
            to,
            version,
        })),
        Ruling::Forward(None) => Ruling::Forward(None),
        Ruling::Answer(http) => Ruling::Answer(http),
    };
    Begun {
        decision,
        events,
        outcome: name,
        note,
    }
}
