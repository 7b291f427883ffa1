//! One operation, carried: the core's [`Exchange`] asks for a read or a compare-and-set, Redis
//! answers, the core decides. Nothing here decides anything about records; it maps engine
//! failures to the core's typed [`Failure`]s and bounds the whole operation by one timeout.
//!
//! The exchange may touch more keys than the request's: each payer's ledger (issue 23), one key
//! per engine call. Past `--claim-memory-limit`, claims and token uses answer *store full* before
//! any engine call, so the rest of Redis's `maxmemory` stays for finishes.
//!
//! On Redis the exchange starts with a speculative compare-and-set (one round trip for a fresh
//! claim, a token's first use, the owner's finish), decided on the service's clock and, for a
//! finish, on the claim value this replica remembers writing ([`crate::engine::Recall`]).

use crate::engine::{Cas, Engine, EngineError};
use crate::entropy::Entropy;
use crate::log::{record_event, RecordEvent};
use crate::metrics::Metrics;
use crate::turns::{Turn, Turns};
use idemgate_core::protocol::{ClaimOutcome, ConsumeOutcome, FinishOutcome};
use idemgate_core::remote::exchange::full;
use idemgate_core::remote::{
    Exchange, Failure, Need, Request, Response, Step, ValueVersion, Write,
};
use idemgate_core::store::WriteOutcome;
use idemgate_core::time::UnixMillis;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Carries `request` to its answer within `timeout`. A timeout answers [`Failure::Timeout`]; a
/// compare-and-set sent before the timeout may still land, which the protocol tolerates (a claim
/// that landed holds its lease and then expires or is taken over; a finish that landed is found
/// by the retry as not-ours-any-more).
pub async fn carry(
    engine: &Engine,
    metrics: &Metrics,
    request: Request,
    timeout: Duration,
) -> Response {
    let _in_flight = metrics.enter();
    let started = Instant::now();
    let op = op_name(&request);
    let key = *request.key();
    let new_record = matches!(
        request,
        Request::Claim { .. } | Request::Consume { .. } | Request::OrderBegin { .. }
    );
    let response = if new_record && engine.refuses_new_records() {
        // Past the claim memory limit: the rest is kept for the finishes of claims in flight.
        full(&request)
    } else {
        match tokio::time::timeout(timeout, exchange(engine, metrics, request)).await {
            Ok(response) => response,
            Err(_) => Response::Failed(Failure::Timeout),
        }
    };
    metrics.operation(op, outcome_name(&response), started.elapsed());
    if let Some(event) = RecordEvent::of(&response) {
        record_event(event, &key);
    }
    response
}

async fn exchange(engine: &Engine, metrics: &Metrics, request: Request) -> Response {
    let key = *request.key();
    let claiming = matches!(request, Request::Claim { .. });
    let recall = engine.recall();
    // A finish uses what this replica wrote for its claim, once, whatever its outcome.
    let claimed = match (&request, recall) {
        (Request::Finish { .. }, Some(recall)) => recall.take(&key),
        _ => None,
    };
    let (mut exchange, mut need) = match (engine.speculates(), fresh_version()) {
        (true, Some(fresh)) => {
            Exchange::speculate(request, service_clock(), claimed.as_deref(), fresh)
        }
        _ => Exchange::start(request),
    };
    // After a compare-and-set met another version, reads go to the engine's source of truth.
    let mut conflicted = false;
    // The claim this operation wrote, remembered for its owner's finish once it is forwarded.
    let mut claim_value = None;
    // The turn on the payer's ledger this operation is working on, if any.
    let mut turn: Option<Turn<'_>> = None;
    loop {
        let on = *need.key();
        if on == key {
            turn = None;
        } else if turn.as_ref().map(Turn::key) != Some(&on) {
            // Let go of the previous payer's turn before waiting for the next one.
            drop(turn.take());
            turn = Some(TURNS.take(on).await);
        }
        metrics.engine_call();
        let step = match need {
            Need::Read { key: on } => match engine.read(&on, conflicted).await {
                Ok((now, value)) => match fresh_version() {
                    Some(fresh) => exchange.read(now, value.as_deref(), fresh),
                    None => exchange.failed(Failure::Unavailable),
                },
                Err(e) => exchange.failed(failure(e)),
            },
            Need::Write {
                key: on,
                expect,
                write,
                at,
            } => match engine.compare_and_set(&on, expect, &write, at).await {
                Ok(Cas::Written) => {
                    if let (true, true, Write::Set { value, .. }) = (claiming, on == key, write) {
                        claim_value = Some(value);
                    }
                    exchange.written(WriteOutcome::Written)
                }
                Ok(Cas::Conflict(found)) => {
                    // A speculation that missed is the common retry, not a race.
                    if at.is_none() {
                        metrics.cas_conflict();
                    }
                    conflicted = true;
                    match (found, fresh_version()) {
                        (None, _) => exchange.written(WriteOutcome::Conflict),
                        (Some((now, value)), Some(fresh)) => {
                            exchange.conflicted(now, value.as_deref(), fresh)
                        }
                        (Some(_), None) => exchange.failed(Failure::Unavailable),
                    }
                }
                Err(e) => exchange.failed(failure(e)),
            },
        };
        match step {
            Step::Need(next) => need = next,
            Step::Done(response) => {
                if let (Some(recall), Some(value), Response::Claim(ClaimOutcome::Forward { .. })) =
                    (recall, claim_value, &response)
                {
                    recall.remember(key, value);
                }
                return response;
            }
        }
    }
}

/// The service's clock, which a speculative write is decided on (the engine refuses it unless
/// its own clock is within the core's tolerance of it).
fn service_clock() -> UnixMillis {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    UnixMillis(u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX))
}

/// The core's name for what went wrong with the engine; the exchange decides what it means.
fn failure(error: EngineError) -> Failure {
    match error {
        EngineError::Full => Failure::Full,
        EngineError::Timeout => Failure::Timeout,
        EngineError::Unavailable(why) => {
            tracing::warn!("{why}");
            Failure::Unavailable
        }
    }
}

/// Payers' ledgers, one operation at a time each (see [`crate::turns`]).
static TURNS: Turns = Turns::new();

/// The process's pool of OS randomness for versions.
static ENTROPY: Entropy = Entropy::new();

/// A random version for the value about to be written (see the core's `remote::stored`).
fn fresh_version() -> Option<ValueVersion> {
    ENTROPY.version()
}

pub fn op_name(request: &Request) -> &'static str {
    match request {
        Request::Claim { .. } => "claim",
        Request::Finish { .. } => "finish",
        Request::Consume { .. } => "consume",
        _ => "other",
    }
}

pub fn outcome_name(response: &Response) -> &'static str {
    match response {
        Response::Claim(ClaimOutcome::Forward {
            takeover: false, ..
        }) => "forward",
        Response::Claim(ClaimOutcome::Forward { takeover: true, .. }) => "takeover",
        Response::Claim(ClaimOutcome::Conflict { .. }) => "conflict",
        Response::Claim(ClaimOutcome::Replay(_)) => "replay",
        Response::Claim(ClaimOutcome::Mismatch) => "mismatch",
        Response::Claim(ClaimOutcome::StoreFull { .. }) => "store_full",
        Response::Finish(FinishOutcome::Stored) => "stored",
        Response::Finish(FinishOutcome::Released) => "released",
        Response::Finish(FinishOutcome::KeptInFlight) => "kept_in_flight",
        Response::Finish(FinishOutcome::NotOwner) => "not_owner",
        Response::Consume(ConsumeOutcome::Consumed) => "consumed",
        Response::Consume(ConsumeOutcome::AlreadyUsed) => "already_used",
        Response::Consume(ConsumeOutcome::StoreFull { .. }) => "store_full",
        Response::Claim(ClaimOutcome::QuotaExceeded { .. })
        | Response::Consume(ConsumeOutcome::QuotaExceeded { .. }) => "quota_exceeded",
        Response::Failed(failure) => failure.code(),
        _ => "other",
    }
}
