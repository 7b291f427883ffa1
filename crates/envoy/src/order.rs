//! The ordering guard, carried out. The rules are the core's
//! (`idemgate_core::order`; a route's precondition and the `Probe` that reads the request's
//! facts are the core's request machine's): this module runs the core's begin and settle on the
//! store, counts each outcome, and hands the machine the core's decision. The filter calls it when
//! the machine asks ([`begin`], once the delivery id's claim is won) and when the upstream's answer
//! settles the resource ([`settle`]).

use crate::abi::{LogLevel, MapType};
use crate::backend::{self, Backend, NoClock};
use crate::host;
use crate::metrics::Counter;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::remote_store::Reply;
use crate::shared::{BeginCall, Claimed, OrderClaim, Shared, StoreCall};
use alloc::rc::Rc;
use idemgate_core::answer::{answer, EdgeAnswer};
use idemgate_core::client::payer::Payers;
use idemgate_core::client::scope::StorageKey;
pub use idemgate_core::guard::ordering::applies;
use idemgate_core::guard::ordering::{decide, Applies, Ordered};
use idemgate_core::guard::Decision;
use idemgate_core::order::{Begin, BeginOutcome, SettleOutcome};
use idemgate_core::policy::StoreKind;
use idemgate_core::record::OwnerToken;
use idemgate_core::request::json::Quoted;
use idemgate_core::store::ordering::{self as local, SettleEvent};
use idemgate_core::store::protocol::run;
use idemgate_core::store::protocol::ProtocolError;
use idemgate_core::store::remote::client;
use idemgate_core::store::Layout;

pub use crate::access_log::ORDER_FIELD;

/// What asking the ordering guard about an event whose delivery id the request has claimed gave.
pub enum Begun {
    /// Its decision, at once: the local store's, or a remote call that could not be made.
    Now(Decision<OrderClaim>),
    /// Asked of the remote store by this callout: the request waits, paused, for [`began`].
    Later(u32),
}

/// Decides the event's arrival by the core's rules — on the local store at once, a new resource
/// record charged to `payers` (the delivery claim's), or asked of the remote store
/// ([`Begun::Later`], its answer for `stream`) — and counts the outcome.
pub fn begin(shared: &Rc<Shared>, ordered: Ordered, payers: Payers, stream: u32) -> Begun {
    let policy = &shared.policy;
    let owner = shared.owners.next();
    let Ordered { rule, key, event } = ordered;
    let (mut store, now) = match backend::of(shared) {
        Ok(Backend::Local { store, now }) => (store, now),
        // No clock, no decision: nothing was forwarded or claimed here.
        Err(NoClock) => return Begun::Now(Decision::Answer(answer(&EdgeAnswer::ClockUnavailable))),
        Ok(Backend::Remote) => {
            let request = client::order_begin(key, owner, &event, &rule, payers, policy);
            let call = BeginCall {
                shared: Rc::clone(shared),
                stream,
                key,
                owner,
                event,
                rule,
            };
            let pending = |_| StoreCall::OrderBegin(Box::new(call));
            return match crate::remote_store::call(shared, &request, pending) {
                Ok(token) => Begun::Later(token),
                // A store failure names no state: the event's name is not logged with it.
                Err(e) => Begun::Now(decided(shared, Err(e), (key, owner, 0), "")),
            };
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
    let outcome = local::begin(&mut store, policy, key, begin, payers, now);
    // The local store needs no seal: the claim's version is not used.
    Begun::Now(decided(shared, outcome, (key, owner, 0), &event))
}

/// The remote store answered a begin: decided as a local one would be, once the state it was
/// decided on checks out against the record secrets.
pub fn began(call: &BeginCall, reply: &Reply) -> Decision<OrderClaim> {
    let checked = match &call.shared.policy.store {
        StoreKind::Remote { secrets, .. } => {
            let initial = call.rule.table.initial();
            client::begin_outcome(reply.answer(), &call.key, initial, secrets)
        }
        // A begin is asked of the remote store only when the store is remote.
        _ => Err(ProtocolError::UnexpectedReply),
    };
    let (outcome, version) = match checked {
        Ok((outcome, version)) => (Ok(outcome), version),
        Err(e) => (Err(e), 0),
    };
    let claim = (call.key, call.owner, version);
    decided(&call.shared, outcome, claim, &call.event)
}

/// The core's decision for the ordering guard's outcome ([`idemgate_core::guard::ordering::decide`]),
/// counted and logged; an event that applies carries its resource's claim (`key`, `owner`, the
/// version claimed at), settled when the upstream answers.
fn decided(
    shared: &Shared,
    outcome: Result<BeginOutcome, ProtocolError>,
    (key, owner, version): (StorageKey, OwnerToken, u64),
    event: &str,
) -> Decision<OrderClaim> {
    let policy = &shared.policy;
    let (decision, events) = match outcome {
        Ok(outcome) => {
            log_outcome(outcome.name());
            // Which share refused a new resource record, and whose (its hashed tag), in the
            // core's words: the line a claim's refusal logs.
            if let BeginOutcome::QuotaExceeded {
                share: Some(share), ..
            } = &outcome
            {
                host::log(LogLevel::Warn, &share.to_string());
            }
            if let BeginOutcome::Illegal { state, .. } = &outcome {
                host::log(
                    LogLevel::Info,
                    &format!(
                        "order: event {} is illegal in state {}: acknowledged, not forwarded",
                        Quoted(event),
                        Quoted(state)
                    ),
                );
            }
            decide(policy, Ok(outcome))
        }
        Err(e @ ProtocolError::Tampered(_)) => {
            host::log(
                LogLevel::Warn,
                &format!(
                    "order: resource {}: {e}; event not decided (503 order_record_corrupt)",
                    key.log_label()
                ),
            );
            decide(policy, Err(&e))
        }
        Err(e) => {
            host::log(LogLevel::Warn, &format!("order: store failed: {e}"));
            decide(policy, Err(&e))
        }
    };
    for event in events.iter() {
        shared.metrics.bump(Counter::from(event));
    }
    match decision {
        Decision::Forward(Some(Applies { to })) => {
            Decision::Forward(Some(OrderClaim(Box::new(Claimed {
                key,
                owner,
                to,
                version,
            }))))
        }
        Decision::Forward(None) => Decision::Forward(None),
        Decision::Answer(http) => Decision::Answer(http),
    }
}

/// Ends the claim on the resource: `applied` when the upstream answered 2xx (the state advances),
/// otherwise released (state unchanged). `on_stream`: the stream's context is current, so its
/// access-log field can be written.
pub fn settle(shared: &Rc<Shared>, claim: OrderClaim, applied: bool, on_stream: bool) {
    let policy = &shared.policy;
    let Claimed {
        key,
        owner,
        to,
        version,
    } = *claim.0;
    let (mut store, now) = match backend::of(shared) {
        Ok(Backend::Local { store, now }) => (store, now),
        Ok(Backend::Remote) => {
            let StoreKind::Remote { secrets, .. } = &policy.store else {
                // The backend is remote only when the store is: a host bug, counted as one.
                count_settled(shared, Err(ProtocolError::UnexpectedReply));
                return;
            };
            let request = client::order_settle(key, owner, &to, applied, version, policy, secrets);
            let pending = |_| StoreCall::OrderSettle(Rc::clone(shared));
            if let Err(e) = crate::remote_store::call(shared, &request, pending) {
                // Not landed: the resource stays claimed until its lease ends, then is free again.
                count_settled(shared, Err(e));
            }
            return;
        }
        Err(NoClock) => {
            // Nothing can be written without knowing when: the resource's claim holds until its
            // lease ends, as when the store fails.
            shared.metrics.bump(Counter::StoreError);
            host::log(LogLevel::Warn, "order: could not settle without a clock");
            return;
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
    let settled = run(&mut store, cell, mutation, now);
    if let (Ok(SettleOutcome::Released), true) = (&settled, on_stream) {
        log_outcome("not_applied");
    }
    count_settled(shared, settled);
}

/// The remote store answered a settle.
pub fn settle_answered(shared: &Rc<Shared>, reply: &Reply) {
    count_settled(shared, client::settle_outcome(reply.answer()));
}

fn count_settled(shared: &Shared, settled: Result<SettleOutcome, ProtocolError>) {
    match settled {
        Ok(SettleOutcome::Advanced { .. }) => shared.metrics.bump(Counter::OrderApplied),
        Ok(SettleOutcome::Released) => shared.metrics.bump(Counter::OrderNotApplied),
        Ok(_) => host::log(
            LogLevel::Warn,
            "order: the resource's claim had lapsed and was taken: nothing written",
        ),
        Err(e) => {
            shared.metrics.bump(Counter::StoreError);
            host::log(
                LogLevel::Warn,
                &format!("order: store failed settling: {e}"),
            );
        }
    }
}

/// Marks an upstream answer that applied an event (`idemgate-order: applied`), on the router
/// path's response headers.
pub fn mark_response() {
    let (name, value) = idemgate_core::answer::order::applied_header();
    if crate::abi::add_header(MapType::HttpResponseHeaders, &name, &value).is_err() {
        host::log(
            LogLevel::Warn,
            "order: could not add the idemgate-order header",
        );
    }
}

fn log_outcome(name: &str) {
    // Fails only outside a stream: the log field is lost.
    let _ = crate::abi::set_property(&[ORDER_FIELD], name.as_bytes());
}
