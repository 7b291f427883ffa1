//! What a root context's request contexts and its callouts share — one module, because they refer
//! to each other: [`Shared`] (the configuration, metrics, owner tokens, hashing budget) holds the
//! table of pending callouts, and each pending callout ([`Pending`]) carries the `Shared` it was
//! made under, so its answer is decided under the configuration that made it, even after a
//! reconfiguration or after its stream is gone. The modules that make and answer callouts
//! ([`crate::detached`], [`crate::remote_store`], [`crate::sequencer`], [`crate::settle`]) depend on
//! this one and never on each other's callers (no import circle in the crate).

use crate::callout::CalloutTable;
use crate::metrics::Metrics;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::shared_store::{HostSharedData, SharedStore};
use alloc::rc::Rc;
use core::cell::{Cell, RefCell};
use core::time::Duration;
use idemgate_core::client::scope::StorageKey;
use idemgate_core::guard::sequencer::{AskedBegin, Claimed};
use idemgate_core::policy::{Policy, RouteKind, Via};
use idemgate_core::record::OwnerToken;
use idemgate_core::request::budget::Reservation;
use idemgate_core::store::remote::{FinishBatch, FinishQueue, BATCH_DELAY};
use idemgate_core::time::UnixMillis;

/// The root's tick when nothing asks for a quicker one: the sweep's pace.
pub const TICK: Duration = Duration::from_secs(1);

/// What every request context of a VM shares, by reference.
pub struct Shared {
    pub policy: Rc<Policy>,
    pub metrics: Metrics,
    /// Cached host log level (refreshed on every tick), so no debug line is formatted for nothing.
    pub debug: Cell<bool>,
    /// Whether writes must be read back (`SharedStore::settle_updates`): only if some cell of the
    /// layout could not be created at configure time.
    pub settle_updates: bool,
    pub owners: OwnerTokens,
    /// The root context's pending callouts (detached exchanges, store operations): a request context registers its
    /// call here, and the answer is routed from here even after that context is gone.
    pub callouts: Rc<RefCell<CalloutTable<Pending>>>,
    /// The hashes of the last client scopes seen
    /// ([`idemgate_core::client::identity::ScopeHashes`]).
    pub scopes: idemgate_core::client::identity::ScopeHashes,
    /// Body bytes this VM's streams hold in fingerprinting (`hashing_budget`).
    pub hashing: Rc<idemgate_core::request::budget::Budget>,
    /// Answer bytes this VM's detached exchanges may have Envoy buffer (`relay_budget`).
    pub relay: Rc<idemgate_core::request::budget::Budget>,
    /// Whether some route waits for a request in flight (`in_flight.wait`): then a completed or
    /// released record is announced to every worker ([`crate::waking`]).
    pub waits: bool,
    /// The VM's shared queue its parked streams are woken through, listed while one is parked.
    pub queue: Option<u32>,
    /// This VM's streams parked waiting for a record's answer, by key.
    pub waiters: RefCell<idemgate_core::guard::Waiters<u32>>,
    /// Whether the root's tick is quickened for them ([`crate::root::quicken_tick`]).
    pub quick_tick: Cell<bool>,
    /// This worker's finishes waiting to be sent together to the remote store
    /// ([`crate::remote_store`]).
    pub finishes: RefCell<FinishQueue>,
    /// Whether the root's tick runs at the queue's delay, for finishes waiting.
    pub finish_tick: Cell<bool>,
}

impl Shared {
    /// Sets the root's tick to the quickest anything waiting needs: queued finishes their delay,
    /// parked streams the waiters' pace, else once a second.
    pub fn set_tick(&self) {
        let period = if self.finish_tick.get() {
            Duration::from_millis(BATCH_DELAY.as_millis())
        } else if self.quick_tick.get() {
            Duration::from_millis(idemgate_core::guard::Waiters::<u32>::TICK.as_millis())
        } else {
            TICK
        };
        let _ = crate::abi::set_tick_period(period);
    }

    /// The store requests use.
    pub fn store(&self) -> SharedStore<HostSharedData> {
        SharedStore {
            data: HostSharedData,
            settle_updates: self.settle_updates,
        }
    }
}

/// Owner tokens (the fencing token of a claim) need to be unique, not secret: they never leave
/// the store. A random 8-byte prefix drawn once per VM and a counter make them unique across VMs
/// and restarts without one `random_get` host call per request.
pub struct OwnerTokens {
    prefix: [u8; 8],
    next: Cell<u64>,
}

impl OwnerTokens {
    pub fn new(seed: [u8; 16]) -> Self {
        let mut prefix = [0u8; 8];
        prefix.copy_from_slice(&seed[..8]);
        OwnerTokens {
            prefix,
            next: Cell::new(u64::from_le_bytes([
                seed[8], seed[9], seed[10], seed[11], seed[12], seed[13], seed[14], seed[15],
            ])),
        }
    }

    pub fn next(&self) -> OwnerToken {
        let count = self.next.get();
        self.next.set(count.wrapping_add(1));
        let mut token = [0u8; 16];
        token[..8].copy_from_slice(&self.prefix);
        token[8..].copy_from_slice(&count.to_be_bytes());
        OwnerToken(token)
    }
}

impl Shared {
    /// Registers a callout the host accepted under `token` in this root's table; `false` if the
    /// table could not be borrowed (never expected: it is not held across callbacks). The caller
    /// then fails its request and gives back what it claimed, rather than leaving an answer with
    /// no entry to find (no silent fallback).
    pub fn register(&self, token: u32, pending: Pending) -> bool {
        match self.callouts.try_borrow_mut() {
            Ok(mut table) => {
                table.insert(token, pending);
                true
            }
            Err(_) => false,
        }
    }
}

/// A callout waiting for its answer.
#[non_exhaustive]
pub enum Pending {
    /// A claimed request sent upstream by the edge itself ([`crate::detached`]).
    Detached(Exchange),
    /// An operation on the remote store service ([`crate::remote_store`]).
    Store(StoreCall),
}

/// A detached exchange in flight: everything needed to settle its key when the answer comes, with
/// or without the stream that started it.
pub struct Exchange {
    pub shared: Rc<Shared>,
    pub key: StorageKey,
    pub owner: OwnerToken,
    /// The stream (HTTP context id) waiting for the answer, if it still exists then.
    pub stream: u32,
    /// When the claim was made (`None`: the clock could not be read then), for Retry-After.
    pub claimed_at: Option<UnixMillis>,
    /// The route's kind: on a callback route only a 2xx answer settles the key (core).
    pub kind: RouteKind,
    /// Where the exchange went: back into Envoy (answers carry the re-entry mark) or straight to a
    /// cluster.
    pub via: Via,
    /// On an ordered route: the resource the event applies to, settled with the answer.
    pub order: Option<OrderClaim>,
    /// The body's part of the hashing budget, charged to its client: Envoy keeps the body it
    /// sends until the exchange ends, so the part is given back (dropped) only then.
    pub body: Option<Reservation>,
    /// The exchange's part of the relay budget (`upstream.max_body`, charged to its client):
    /// Envoy buffers the answer until it is handed over, so the part is given back (dropped)
    /// once the answer has been read, or the exchange ends any other way.
    pub relay: Reservation,
}

/// A store operation waiting for its answer (an entry of the callout table).
pub enum StoreCall {
    /// A request's claim; the stream (or, its client gone, its machine: [`crate::dispatch`])
    /// waits, paused.
    Claim { stream: u32 },
    /// A token's use; the stream (or its machine) waits, paused.
    Consume { stream: u32 },
    /// Completions and releases sent together; nobody waits.
    Finishes(BatchCall),
    /// The sequencer's begin; the stream waits, paused ([`crate::sequencer`]).
    OrderBegin(Box<BeginCall>),
    /// The sequencer's settle; nobody waits.
    OrderSettle(Rc<Shared>),
}

/// A batch of finishes in flight: the core's [`FinishBatch`] (its bytes, and each finish's
/// resend rule), and the configuration it was sent under.
pub struct BatchCall {
    pub shared: Rc<Shared>,
    pub batch: FinishBatch,
}

/// A begin sent to the remote store: what its answer is decided with, whether or not the stream
/// that sent it still exists then.
pub struct BeginCall {
    pub shared: Rc<Shared>,
    /// The stream (HTTP context id) waiting, or its machine once its client is gone.
    pub stream: u32,
    /// The core's side of the begin: what the answer is decided with.
    pub asked: AskedBegin,
}

/// A resource claimed for an event being forwarded (the core's [`Claimed`]): settled when the
/// upstream answers. Boxed: it rides along in the filter's stages, which stay one pointer bigger,
/// not three words.
#[derive(Debug, Clone)]
pub struct OrderClaim(pub Box<Claimed>);
