//! The sequencer, carried out. The rules and every step's decision are the core's
//! (`idemgate_core::guard::sequencer`: [`begin`](idemgate_core::guard::sequencer::begin) and
//! [`settle`](idemgate_core::guard::sequencer::settle) on either store, with what to count and
//! log): this module only says where the record is, sends the store service's requests, counts
//! and logs what the core says, and hands the machine the core's decision. The filter calls it
//! when the machine asks ([`begin`], once the delivery id's claim is won) and when the upstream's
//! answer settles the resource ([`settle`]).

use crate::abi::{LogLevel, MapType};
use crate::backend::{self, Backend, NoClock};
use crate::host;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::remote_store::Reply;
use crate::shared::{BeginCall, OrderClaim, Shared, StoreCall};
use crate::shared_store::{HostSharedData, SharedStore};
use alloc::rc::Rc;
use idemgate_core::client::payer::Payers;
use idemgate_core::events::Events;
pub use idemgate_core::guard::sequencer::applies;
use idemgate_core::guard::sequencer::{
    self as sequencer, BeginStep, Begun as Decided, OrderNote, OrderStore, Ordered, SettleStep,
    Settled,
};
use idemgate_core::guard::Ruling;

pub use crate::access_log::ORDER_FIELD;

/// What asking the sequencer about an event whose delivery id the request has claimed gave.
pub enum Sequenced {
    /// Its decision, at once: the local store's, or a remote call that could not be made.
    Now(Ruling<OrderClaim>),
    /// Sequenced of the remote store by this callout: the request waits, paused, for [`began`].
    Later(u32),
}

/// Where the policy keeps the resource's record, for one step: the core's [`OrderStore`].
fn at(backend: &mut Result<Backend, NoClock>) -> OrderStore<'_, SharedStore<HostSharedData>> {
    match backend {
        Ok(Backend::Local { store, now }) => OrderStore::Local { store, now: *now },
        Ok(Backend::Remote) => OrderStore::Remote,
        Err(NoClock) => OrderStore::NoClock,
    }
}

/// Asks the core's sequencer about the event — a new resource record charged to `payers`
/// (the delivery claim's) — and carries out what it says: the local store's decision at once, or
/// the store service asked ([`Sequenced::Later`], its answer for `stream`).
pub fn begin(shared: &Rc<Shared>, ordered: Ordered, payers: Payers, stream: u32) -> Sequenced {
    let policy = &shared.policy;
    let owner = shared.owners.next();
    let mut backend = backend::of(shared);
    match sequencer::begin(policy, ordered, owner, payers, at(&mut backend)) {
        BeginStep::Decided(begun) => Sequenced::Now(carried_out(shared, begun)),
        BeginStep::Send { request, asked } => {
            let call = BeginCall {
                shared: Rc::clone(shared),
                stream,
                asked: asked.clone(),
            };
            let pending = |_| StoreCall::OrderBegin(Box::new(call));
            match crate::remote_store::call(shared, &request, pending) {
                Ok(token) => Sequenced::Later(token),
                Err(e) => Sequenced::Now(carried_out(shared, asked.unsent(policy, e))),
            }
        }
    }
}

/// The remote store answered a begin: the core's decision on it.
pub fn began(call: BeginCall, reply: &Reply) -> Ruling<OrderClaim> {
    let begun = call.asked.answered(&call.shared.policy, reply.answer());
    carried_out(&call.shared, begun)
}

/// Counts and logs what the core decided; an event that applies carries its resource's claim,
/// settled when the upstream answers.
fn carried_out(shared: &Shared, begun: Decided) -> Ruling<OrderClaim> {
    let Decided {
        decision,
        events,
        outcome,
        note,
    } = begun;
    if let Some(name) = outcome {
        log_outcome(name);
    }
    if let Some(note) = note {
        log(&note);
    }
    count(shared, events);
    match decision {
        Ruling::Forward(claim) => Ruling::Forward(claim.map(|c| OrderClaim(Box::new(c)))),
        Ruling::Answer(http) => Ruling::Answer(http),
    }
}

/// Ends the claim on the resource: `applied` when the upstream answered 2xx (the state advances),
/// otherwise released (state unchanged). `on_stream`: the stream's context is current, so its
/// access-log field can be written.
pub fn settle(shared: &Rc<Shared>, claim: OrderClaim, applied: bool, on_stream: bool) {
    let mut backend = backend::of(shared);
    let settled = match sequencer::settle(&shared.policy, *claim.0, applied, at(&mut backend)) {
        SettleStep::Done(settled) => settled,
        SettleStep::Send(request) => {
            let pending = |_| StoreCall::OrderSettle(Rc::clone(shared));
            match crate::remote_store::call(shared, &request, pending) {
                Ok(_) => return,
                Err(e) => sequencer::settle_unsent(e),
            }
        }
    };
    settled_with(shared, settled, on_stream);
}

/// The remote store answered a settle.
pub fn settle_answered(shared: &Rc<Shared>, reply: &Reply) {
    settled_with(shared, sequencer::settle_answered(reply.answer()), false);
}

fn settled_with(shared: &Shared, settled: Settled, on_stream: bool) {
    let Settled {
        events,
        outcome,
        note,
    } = settled;
    if let (Some(name), true) = (outcome, on_stream) {
        log_outcome(name);
    }
    count(shared, events);
    if let Some(note) = note {
        log(&note);
    }
}

fn count(shared: &Shared, events: Events) {
    for event in events.iter() {
        shared.metrics.bump(event.into());
    }
}

fn log(note: &OrderNote) {
    let level = if note.is_warning() {
        LogLevel::Warn
    } else {
        LogLevel::Info
    };
    host::log(level, &note.to_string());
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
