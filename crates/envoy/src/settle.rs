//! Settling a claim: completes, releases or keeps it in flight, as the core decides from the
//! response facts — one function for the router path (the stream's own response) and the
//! detached path (a callout's answer, possibly after the stream is gone).

use crate::abi::LogLevel;
use crate::backend::{self, Backend, NoClock};
use crate::host;
use crate::metrics::Counter;
use crate::origin::DoubtCause;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::shared::Shared;
use alloc::rc::Rc;
use idemgate_core::client::scope::StorageKey;
use idemgate_core::decision::ResponseFacts;
use idemgate_core::record::OwnerToken;
use idemgate_core::{FinishOutcome, Protocol};

/// Finishes the claim `owner` holds on `key` with `facts`; `cause` names why, should the core keep
/// it in flight (in doubt). Returns what the core did (`None` if the store failed); with a remote
/// store, what is being written (the service's answer comes later: [`crate::remote_store`]).
/// `on_stream`: the stream's own context is current, so a local settle writes the outcome to its
/// access log; on the root context (a detached exchange, a client gone) that write can only fail,
/// so it is not made (the relay writes it once the stream is effective).
pub fn settle(
    shared: &Rc<Shared>,
    key: StorageKey,
    owner: OwnerToken,
    facts: ResponseFacts,
    cause: DoubtCause,
    on_stream: bool,
) -> Option<FinishOutcome> {
    let (mut store, now) = match backend::of(shared) {
        Ok(Backend::Local { store, now }) => (store, now),
        Ok(Backend::Remote) => {
            return crate::remote_store::settle(shared, key, owner, facts, cause)
        }
        Err(NoClock) => {
            // Nothing can be written without knowing when: the claim holds until its lease
            // ends, so the outcome is in doubt, as when the store fails.
            shared.metrics.bump(Counter::StoreError);
            host::log(
                LogLevel::Warn,
                "could not settle without a clock: kept in flight",
            );
            return None;
        }
    };
    let policy = &shared.policy;
    let mut protocol = Protocol {
        store: &mut store,
        policy,
    };
    let debug = |what: &str| {
        if shared.debug.get() {
            host::log(LogLevel::Debug, &format!("key {} {what}", key.log_label()));
        }
    };
    match protocol.finish(key, owner, Some(facts), now) {
        Ok(outcome) => {
            match outcome {
                FinishOutcome::Stored => {
                    shared.metrics.bump(Counter::Stored);
                    debug("answer stored");
                }
                FinishOutcome::Released => {
                    shared.metrics.bump(Counter::Released);
                    debug("released");
                }
                FinishOutcome::KeptInFlight => {
                    shared.metrics.bump(Counter::InDoubt);
                    shared.metrics.bump(Counter::from(cause));
                    debug("outcome in doubt: kept in flight until the lease ends");
                }
                FinishOutcome::NotOwner => debug("no longer the owner: nothing written"),
            }
            if on_stream {
                crate::access_log::record_outcome(outcome);
            }
            // Duplicates waiting in any worker ask again: a replay, or a claim to run.
            if shared.waits && matches!(outcome, FinishOutcome::Stored | FinishOutcome::Released) {
                crate::waking::announce(&key);
            }
            Some(outcome)
        }
        Err(e) => {
            shared.metrics.bump(Counter::StoreError);
            host::log(LogLevel::Warn, &format!("store failed: {e}"));
            None
        }
    }
}

/// Gives back a claim whose request never went upstream, on the root context (its client gone
/// before the request was sent, an ordering decision nobody waits for, an exchange Envoy never
/// sent): released, as the core releases what never reached the upstream.
pub fn release(shared: &Rc<Shared>, key: StorageKey, owner: OwnerToken) -> Option<FinishOutcome> {
    settle(
        shared,
        key,
        owner,
        ResponseFacts::NeverReached,
        DoubtCause::Other,
        false,
    )
}
