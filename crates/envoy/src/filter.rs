//! The HTTP context: turns one request's Envoy facts into core values, and carries out what the core
//! decides. No rule lives here: claims, completions and every answer's status, headers and body come
//! from `idemgate-core`.
//!
//! Request: route match → key → scope → storage key → fingerprint (headers, then each body chunk,
//! within `max_request_body`) → claim → forward, or answer. A request with a body is claimed at the
//! end of its body; `envoy.filters.http.buffer` placed *after* this filter holds the request until
//! then, so the upstream is never contacted before the claim is won (see `examples/envoy`).
//!
//! Detached routes (the default where a cluster is configured): the request is kept (headers and
//! the hashed body) and, once claimed, sent by the edge itself on an exchange that outlives the
//! client ([`crate::detached`]); the stream stays paused and is answered with the relayed answer.
//!
//! Response: only an answer that came from the upstream (`response.code_details == via_upstream`) is
//! captured and, at the end of the whole response, completed through the core; anything else is
//! classified by [`crate::origin`] as "never reached" (release) or "in doubt" (keep in flight).

use crate::abi::{Action, BufferType, Headers, LogLevel, MapType};
use crate::backend::{self, Backend, NoClock};
use crate::detached::{self, Relay, RELAY_DETAILS};
use crate::host;
use crate::metrics::Counter;
use crate::origin::{classify_attempts, doubt_cause, Origin};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::remote_store;
use crate::sequencer::{self, Sequenced};
use crate::settle::settle;
use crate::shared::{Exchange, OrderClaim, Pending, Shared, StoreCall};
use alloc::rc::Rc;
use idemgate_core::answer::{answer_for, Degraded, EdgeAnswer, HttpAnswer, RelayProblem};
use idemgate_core::client::identity::{ScopeHashes, Unreadable};
use idemgate_core::client::payer::PayerTag;
use idemgate_core::client::scope::StorageKey;
use idemgate_core::guard::{self, Ask, Capture, Reply, Ruling};
use idemgate_core::guard::{Guarded, Headed, Kept, Sent};
use idemgate_core::policy::{Detached, Forward, Policy, RouteKind};
use idemgate_core::record::OwnerToken;
use idemgate_core::request::budget::Budget;
use idemgate_core::store::remote::client;
use idemgate_core::time::UnixMillis;
use idemgate_core::{Protocol, ProtocolError};

mod claim;
mod life;
mod request;
mod response;
mod waiting;

/// The part of a request a detached route keeps for its exchange that the core does not take in:
/// where it goes and all its headers (the core keeps its body, as taken in: [`guard::Kept`]).
struct Held {
    /// The route's detached settings, kept with the request rather than looked up again by
    /// index, so a "route not found" case cannot exist.
    route: Detached,
    /// The route's kind: which of the exchange's answers the record keeps.
    kind: RouteKind,
    headers: Headers,
}

/// The core's machine for a guarded request's life, from its body to its settlement
/// ([`guard::Guarded`]): the resource claims it carries are the sequencer's, the request it
/// keeps a detached route's.
/// The kept request is boxed: it rides in the machine's actions, which stay small.
type Machine = Guarded<OrderClaim, Box<Held>>;

enum Stage {
    /// Nothing (more) to do for this request.
    Idle,
    /// The request's life as the core's machine runs it: its body being taken in or forwarded
    /// on the router path (`call: None`), or paused until the remote store answers callout
    /// `call`.
    Guarded {
        machine: Box<Machine>,
        call: Option<u32>,
    },
    /// The claimed request is on a detached exchange (callout `token`); the stream waits, paused.
    Detached { token: u32 },
}

pub struct Filter {
    shared: Rc<Shared>,
    stage: Stage,
    /// This HTTP context's id (the exchange's answer is relayed to it, if it still exists).
    context_id: u32,
    /// The key this stream waits on in the VM's waiters, while it is parked.
    parked: Option<StorageKey>,
    /// Let on unprotected because the store could not decide: the mark its answer gets.
    degraded: Option<Degraded>,
}

impl Filter {
    pub fn new(shared: Rc<Shared>, context_id: u32) -> Filter {
        Filter {
            shared,
            stage: Stage::Idle,
            context_id,
            parked: None,
            degraded: None,
        }
    }

    /// The compiled policy, shared (a reference-count bump, never a copy or a re-parse).
    fn policy(&self) -> Rc<Policy> {
        Rc::clone(&self.shared.policy)
    }

    /// Counts a decision and writes it for the access log ([`crate::access_log`]).
    fn count(&self, counter: Counter) {
        self.shared.metrics.bump(counter);
        crate::access_log::record(counter);
    }

    /// Counts each of the core's events.
    fn count_all(&self, events: idemgate_core::events::Events) {
        for event in events.iter() {
            self.count(Counter::from(event));
        }
    }

    fn debug(&self, key: &StorageKey, what: &str) {
        if self.shared.debug.get() {
            host::log(LogLevel::Debug, &format!("key {} {what}", key.log_label()));
        }
    }

    /// Sends an edge answer made by the core, as the policy writes problems, and ends this
    /// request's part.
    fn reply(&mut self, edge: &EdgeAnswer<'_>) -> Action {
        self.stage = Stage::Idle;
        host::send(&answer_for(edge, &self.policy()));
        Action::Pause
    }

    fn send(&mut self, http: &HttpAnswer) -> Action {
        self.stage = Stage::Idle;
        host::send(http);
        Action::Pause
    }

    /// Whether this stream waits for the callout `token` (a detached exchange, or a remote
    /// store's claim or token use).
    pub fn awaits(&self, token: u32) -> bool {
        match &self.stage {
            Stage::Detached { token: t } | Stage::Guarded { call: Some(t), .. } => *t == token,
            _ => false,
        }
    }

    /// The stream is deleted: a machine waiting for a callout is told its client is gone (if
    /// its end was not told already). Whether this filter must be kept until that answer
    /// comes ([`crate::dispatch`]).
    pub fn client_gone(&mut self) -> bool {
        self.unpark_unless(false);
        self.tell_waiting_gone();
        self.is_orphaned()
    }

    /// Tells a machine waiting for a callout that its client is gone; whether one was waiting.
    fn tell_waiting_gone(&mut self) -> bool {
        match &mut self.stage {
            Stage::Guarded {
                machine,
                call: Some(_),
            } => {
                machine.gone();
                true
            }
            _ => false,
        }
    }

    /// Whether this filter's stream is gone while its machine waits for a callout.
    pub fn is_orphaned(&self) -> bool {
        matches!(&self.stage, Stage::Guarded { machine, call: Some(_) } if machine.is_orphaned())
    }

    /// Whether this stream waits for a callout's answer (the remote store's, or a detached
    /// exchange's): until it comes the request must not go on, whatever Envoy delivers meanwhile.
    fn waits(&self) -> bool {
        matches!(
            &self.stage,
            Stage::Detached { .. } | Stage::Guarded { call: Some(_), .. }
        )
    }

    /// The machine of a stream that does not wait for a callout (its body being taken in, or
    /// forwarded), taken out of the stage; the stage is idle until the machine is run again.
    /// A stage that waits for a callout is left in place: its answer must find it.
    fn take_machine(&mut self) -> Option<Box<Machine>> {
        if !matches!(&self.stage, Stage::Guarded { call: None, .. }) {
            return None;
        }
        match core::mem::replace(&mut self.stage, Stage::Idle) {
            Stage::Guarded { machine, .. } => Some(machine),
            _ => None,
        }
    }

    /// Lets a request paused for the remote store go on (`Pause`: it was answered or waits again).
    fn resume(&mut self, action: Action) {
        if action == Action::Continue {
            if let Err(status) = crate::abi::continue_request() {
                host::log(
                    LogLevel::Warn,
                    &format!("could not resume the request: status {}", status.0),
                );
            }
        }
    }
}

/// Where a router-path request's end came from. The details describe the router's last attempt;
/// an earlier attempt of a route's retry policy may have reached the upstream, so the
/// attempt count is read when the details say "never reached".
fn classify_end(details: Option<&str>) -> Origin {
    classify_attempts(details, host::upstream_attempts)
}

/// The stream callbacks, as [`crate::dispatch`] calls them.
impl Filter {
    pub fn on_done(&mut self) {
        // A detached exchange is not ended here: it belongs to the key and settles it when it
        // answers (see `crate::detached`).
        self.end(false);
    }

    pub fn on_request_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        self.start(end_of_stream)
    }

    pub fn on_request_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        self.hash_chunk(size, end_of_stream)
    }

    pub fn on_request_trailers(&mut self, _trailers: usize) -> Action {
        // Trailers end the request: the body is complete.
        self.body_end()
    }

    pub fn on_response_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        #[cfg(feature = "test-panic")] // Test-only build (tests/envoy/faults.rs): kill the VM.
        #[allow(clippy::panic)]
        if host::response_header("x-idemgate-test-panic").is_some() {
            panic!("test-panic")
        }
        self.response_headers(end_of_stream)
    }

    pub fn on_response_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        self.response_body(size, end_of_stream)
    }

    pub fn on_response_trailers(&mut self, _trailers: usize) -> Action {
        self.end(true);
        Action::Continue
    }

    pub fn on_log(&mut self) {
        self.end(false);
    }
}
