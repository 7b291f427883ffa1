//! The filter's side of the remote store (`store: {"kind": "remote"}`): every claim and token
//! use, and every batch of finishes, is one `POST /v1/op` to the store service (`idemgate-store`)
//! through the Envoy cluster the configuration names, by `proxy_http_call` registered in the root
//! context's [`crate::callout`] table. This module only carries bytes: the request bodies are
//! built by `idemgate_core::store::remote::client`, and its `*_outcome` functions turn the answer
//! — or its absence — into the same outcomes the local store gives, or a store error for the
//! failure mode.
//!
//! - A claim (and a token use) pauses the request; the answer resumes it or answers it
//!   ([`crate::filter`]). If the stream is gone when a claim answers `forward`, the claim is
//!   released (the upstream never saw the request).
//! - A finish is queued from [`crate::settle`] without holding the response: the client gets its
//!   answer at once. The worker's finishes go together, one callout per batch: when the queue is
//!   full or its oldest finish has waited the core's delay (the root's tick sends it), all by the
//!   core's rule ([`idemgate_core::store::remote::FinishQueue`]). Whether a finish that gets no
//!   usable answer is sent again is the core's rule too, per finish ([`FinishBatch::answered`]:
//!   up to the core's `FINISH_ATTEMPTS` (3) times in all; one that landed unseen is found by the
//!   resend as *not owner*); this module sends, counts and logs. If none lands, the claim stays
//!   in flight: retries get 409 until the lease ends, then may take it over
//!   (`docs/deploy/fleet-store.md` says so).

use crate::abi::{self, BufferType, LogLevel, MapType, Status};
use crate::host;
use crate::metrics::Counter;
use crate::origin::DoubtCause;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::shared::{BatchCall, Pending, Shared, StoreCall};
use alloc::rc::Rc;
use core::time::Duration;
use idemgate_core::client::scope::StorageKey;
use idemgate_core::decision::ResponseFacts;
use idemgate_core::policy::StoreKind;
use idemgate_core::record::OwnerToken;
use idemgate_core::store::remote::client::{self, CalloutReply};
use idemgate_core::store::remote::{BatchStep, FinishBatch, FinishStep, Finishing};
use idemgate_core::store::remote::{Request, CONTENT_TYPE};
use idemgate_core::store::StoreError;
use idemgate_core::time::UnixMillis;
use idemgate_core::{ClaimOutcome, FinishOutcome, ProtocolError};

/// The `:authority` of store requests (the service does not look at it).
const AUTHORITY: &str = "idemgate-store";

/// What a claim's answer means for `key`; a replay is checked against the record secrets first
/// (in the core: [`client::claim_outcome`]), so a planted or altered answer is never replayed.
pub fn claim_outcome(
    shared: &Shared,
    reply: &Reply,
    key: &StorageKey,
) -> Result<ClaimOutcome, ProtocolError> {
    match &shared.policy.store {
        StoreKind::Remote { secrets, .. } => client::claim_outcome(reply.answer(), key, secrets),
        // A claim is sent only when the store is remote: a host bug, answered as one.
        _ => Err(ProtocolError::UnexpectedReply),
    }
}

/// Sends one operation to the store service; the token names the callout.
pub fn send(shared: &Shared, body: &[u8]) -> Result<u32, Status> {
    let StoreKind::Remote {
        cluster, timeout, ..
    } = &shared.policy.store
    else {
        return Err(Status::NO_HOST);
    };
    abi::http_call(
        cluster,
        &[
            (":method", b"POST"),
            (":path", client::PATH.as_bytes()),
            (":authority", AUTHORITY.as_bytes()),
            ("content-type", CONTENT_TYPE.as_bytes()),
        ],
        body,
        Duration::from_millis(timeout.as_millis()),
    )
}

/// Sends `request` and registers what to do with its answer; `Err` when the host refused the call
/// (no such cluster): a store error for the failure mode.
pub fn call(
    shared: &Shared,
    request: &Request,
    pending: impl FnOnce(u32) -> StoreCall,
) -> Result<u32, ProtocolError> {
    let token = send(shared, &request.encode()).map_err(|status| {
        ProtocolError::Store(StoreError::Unavailable(format!(
            "could not call the store service: status {}",
            status.0
        )))
    })?;
    if !shared.register(token, Pending::Store(pending(token))) {
        // Never expected (the table is not held across callbacks); if it happens, the answer
        // would find no entry and the request would wait for nothing: fail it now instead.
        return Err(ProtocolError::Store(StoreError::Unavailable(String::from(
            "the callout table was busy",
        ))));
    }
    Ok(token)
}

/// A callout's answer, read from the root context (before any `set_effective_context`).
pub struct Reply {
    status: Option<u16>,
    body: Vec<u8>,
}

impl Reply {
    pub fn read(num_headers: usize, body_size: usize) -> Reply {
        let none = Reply {
            status: None,
            body: Vec::new(),
        };
        if num_headers == 0 {
            return none;
        }
        // An answer the host cannot hand over whole is no answer: with no status, the core
        // reads it as the store unavailable (never a short body decoded).
        let (Some(headers), Some(body)) = (
            host::headers(MapType::HttpCallResponseHeaders),
            host::body(BufferType::HttpCallResponseBody, body_size),
        ) else {
            return none;
        };
        let status = headers
            .iter()
            .find(|(name, _)| *name == ":status")
            .and_then(|(_, v)| core::str::from_utf8(v).ok())
            .and_then(|s| s.parse::<u16>().ok());
        Reply { status, body }
    }

    pub fn answer(&self) -> CalloutReply<'_> {
        CalloutReply {
            status: self.status,
            body: &self.body,
        }
    }
}

/// Settles a claim in the remote store: queues the completion or release the core's policy
/// makes of `facts` (nothing when the outcome is in doubt: the claim stays in flight) in this
/// worker's queue of finishes. Returns what is being written — the service's answer comes later
/// and is counted then.
pub fn settle(
    shared: &Rc<Shared>,
    key: StorageKey,
    owner: OwnerToken,
    facts: ResponseFacts,
    cause: DoubtCause,
) -> Option<FinishOutcome> {
    let StoreKind::Remote { secrets, .. } = &shared.policy.store else {
        // Called only when the store is remote ([`crate::settle`]).
        return None;
    };
    let Some(request) = client::finish(key, owner, facts, &shared.policy, secrets) else {
        shared.metrics.bump(Counter::InDoubt);
        shared.metrics.bump(Counter::from(cause));
        debug(
            shared,
            &key,
            "outcome in doubt: kept in flight until the lease ends",
        );
        return Some(FinishOutcome::KeptInFlight);
    };
    let finishing = Finishing::new(&request);
    let intended = finishing.intended();
    queue(shared, finishing);
    Some(intended)
}

/// Queues `finishing`; a full queue is sent at once, else the tick is quickened to send it by
/// the queue's delay. Without a clock nothing can be timed: the queue goes at once.
fn queue(shared: &Rc<Shared>, finishing: Finishing) {
    let now = host::now();
    let batches = match shared.finishes.try_borrow_mut() {
        Ok(mut queue) => {
            let full = queue.push(finishing, now.unwrap_or(UnixMillis(0)));
            let rest = match now {
                Some(_) => None,
                None => queue.flush(),
            };
            [full, rest]
        }
        Err(_) => {
            // Never expected (the queue is not held across callbacks).
            shared.metrics.bump(Counter::StoreError);
            host::log(
                LogLevel::Warn,
                "could not queue a finish: the claim stays in flight until its lease ends",
            );
            return;
        }
    };
    for batch in batches.into_iter().flatten() {
        send_batch(shared, batch);
    }
    let waiting = shared.finishes.try_borrow().is_ok_and(|q| !q.is_empty());
    if waiting && !shared.finish_tick.replace(true) {
        shared.set_tick();
    }
}

/// The root's tick at `now`: the queued finishes go once due, and the tick slows again once none
/// waits.
pub fn tick(shared: &Rc<Shared>, now: UnixMillis) {
    let due = match shared.finishes.try_borrow_mut() {
        Ok(mut queue) => queue.due(now),
        Err(_) => None,
    };
    if let Some(batch) = due {
        send_batch(shared, batch);
    }
    let idle = shared.finishes.try_borrow().is_ok_and(|q| q.is_empty());
    if idle && shared.finish_tick.replace(false) {
        shared.set_tick();
    }
}

/// Sends whatever is queued now (the configuration is being replaced).
pub fn flush(shared: &Rc<Shared>) {
    let queued = match shared.finishes.try_borrow_mut() {
        Ok(mut queue) => queue.flush(),
        Err(_) => None,
    };
    if let Some(batch) = queued {
        send_batch(shared, batch);
    }
}

fn send_batch(shared: &Rc<Shared>, batch: FinishBatch) {
    let finishes = batch.len() as i64;
    match send(shared, batch.body()) {
        Ok(token) => {
            shared.metrics.bump(Counter::FinishBatches);
            shared.metrics.add(Counter::FinishesBatched, finishes);
            let call = BatchCall {
                shared: Rc::clone(shared),
                batch,
            };
            if !shared.register(token, Pending::Store(StoreCall::Finishes(call))) {
                shared.metrics.add(Counter::StoreError, finishes);
                host::log(
                    LogLevel::Warn,
                    "could not register a finish callout: its answer will not be read",
                );
            }
        }
        Err(status) => {
            shared.metrics.add(Counter::StoreError, finishes);
            host::log(
                LogLevel::Warn,
                &format!(
                    "could not send {finishes} finish(es) to the store service (status {}): their claims stay in flight until their leases end",
                    status.0
                ),
            );
        }
    }
}

/// A batch answered: the core's step for each finish counted and logged, the finishes that got
/// no decision sent again when it says so, and a batch refused whole counted and warned of.
pub fn batch_answered(call: BatchCall, reply: &Reply) {
    let BatchCall { shared, batch } = call;
    let step = batch.answered(reply.answer());
    match &step {
        BatchStep::Answered(steps) => {
            for (key, step) in steps {
                for event in step.events().iter() {
                    shared.metrics.bump(event.into());
                }
                let note = step.note();
                if note.is_warning() {
                    host::log(LogLevel::Warn, &note.to_string());
                } else {
                    debug(&shared, key, note);
                }
                if shared.waits && !matches!(step, FinishStep::SendAgain { .. }) {
                    // Settled (or given up on): this Envoy's duplicates ask the store again at
                    // once; another Envoy's ask on their own time.
                    crate::waking::announce(key);
                }
            }
        }
        BatchStep::Refused(keys) => {
            shared.metrics.bump(Counter::FinishBatchRefused);
            shared.metrics.add(Counter::StoreError, keys.len() as i64);
            host::log(
                LogLevel::Warn,
                &format!(
                    "the store service refused a batch of {} finish(es) (400): a service older than batched finishes must be upgraded before the filters; their claims stay in flight until their leases end",
                    keys.len()
                ),
            );
        }
    }
    if let Some(again) = step.resend() {
        send_batch(&shared, again);
    }
}

fn debug(shared: &Shared, key: &StorageKey, what: impl core::fmt::Display) {
    if shared.debug.get() {
        host::log(LogLevel::Debug, &format!("key {} {what}", key.log_label()));
    }
}
