//! The sequencer's last step, decided whole here: a resource's claim ended once the upstream
//! answered — on the local store at once ([`crate::store::ordering::SettleEvent`]), or as the
//! request the store service is sent ([`client::order_settle`]) and what its answer means — with
//! the events to count and the line to log. Nobody waits for a settle: a claim that is not
//! settled holds until its lease ends, then the resource is free again.

use super::begin::{Claimed, OrderStore};
use super::note::OrderNote;
use crate::events::{Event, Events};
use crate::order::SettleOutcome;
use crate::policy::{Policy, StoreKind};
use crate::store::ordering::SettleEvent;
use crate::store::protocol::{run, ProtocolError};
use crate::store::remote::client::{self, CalloutReply};
use crate::store::remote::Request;
use crate::store::{Layout, Store};

/// What a settle came to: what the host counts and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "the events are counted"]
pub struct Settled {
    pub events: Events,
    /// The outcome's name for the access log, when the request's stream is still there to take
    /// it (`None`: nothing to add).
    pub outcome: Option<&'static str>,
    pub note: Option<OrderNote>,
}

/// The settle's first step.
#[derive(Debug)]
#[must_use = "a request is sent; the events are counted"]
pub enum SettleStep {
    /// Done now.
    Done(Settled),
    /// Send `request` to the store service; what comes back goes to [`settle_answered`] (or,
    /// if the host could not send it, [`settle_unsent`]).
    Send(Request),
}

/// Ends `claim` on the resource: `applied` when the upstream answered 2xx (the state advances to
/// the claim's `to`), otherwise released (the state unchanged).
pub fn settle<S: Store + ?Sized>(
    policy: &Policy,
    claim: Claimed,
    applied: bool,
    at: OrderStore<'_, S>,
) -> SettleStep {
    let Claimed {
        key,
        owner,
        to,
        version,
    } = claim;
    let (store, now) = match at {
        OrderStore::Local { store, now } => (store, now),
        OrderStore::Remote => {
            let StoreKind::Remote { secrets, .. } = &policy.store else {
                // Remote only when the policy's store is: a host bug, counted as one.
                return SettleStep::Done(settled(Err(ProtocolError::UnexpectedReply)));
            };
            return SettleStep::Send(client::order_settle(
                key, owner, &to, applied, version, policy, secrets,
            ));
        }
        // Nothing can be written without knowing when: the resource's claim holds until its
        // lease ends, as when the store fails.
        OrderStore::NoClock => {
            return SettleStep::Done(Settled {
                events: Events::of(&[Event::StoreError]),
                outcome: None,
                note: Some(OrderNote::NoClock),
            })
        }
    };
    let cell = Layout {
        capacity: policy.capacity,
    }
    .cell_name(&key);
    let mutation = SettleEvent {
        key,
        owner,
        to,
        applied,
        ttl: policy.ttl,
    };
    let result = run(store, cell, mutation, now);
    let released = matches!(result, Ok(SettleOutcome::Released));
    SettleStep::Done(Settled {
        outcome: released.then_some("not_applied"),
        ..settled(result)
    })
}

/// The store service answered a settle.
pub fn settle_answered(reply: CalloutReply<'_>) -> Settled {
    settled(client::settle_outcome(reply))
}

/// The host could not send a settle (`error`): not landed, the resource stays claimed until its
/// lease ends, then is free again.
pub fn settle_unsent(error: ProtocolError) -> Settled {
    settled(Err(error))
}

fn settled(result: Result<SettleOutcome, ProtocolError>) -> Settled {
    let (events, note) = match result {
        Ok(SettleOutcome::Advanced { .. }) => (Events::of(&[Event::OrderApplied]), None),
        Ok(SettleOutcome::Released) => (Events::of(&[Event::OrderNotApplied]), None),
        Ok(_) => (Events::default(), Some(OrderNote::Lapsed)),
        Err(e) => (
            Events::of(&[Event::StoreError]),
            Some(OrderNote::SettleFailed(e)),
        ),
    };
    Settled {
        events,
        outcome: None,
        note,
    }
}
