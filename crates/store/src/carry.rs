//! One operation, carried: the core's [`Operation`] asks for a read or a compare-and-set, Redis
//! answers, the core decides. Nothing here decides anything about records; it maps engine
//! failures to the core's typed [`Failure`]s and bounds the whole operation by one timeout.
//!
//! The exchange may touch more keys than the request's: each payer's ledger, one key
//! per engine call. Past `--claim-memory-limit`, claims and token uses answer *store full* before
//! any engine call, so the rest of Redis's `maxmemory` stays for finishes.
//!
//! On Redis the exchange starts with a speculative compare-and-set (one round trip for a fresh
//! claim, a token's first use, the owner's finish), decided on the service's clock and, for a
//! finish, on the claim value this replica remembers writing ([`crate::engine::Recall`]).

use crate::desk::{Batch, Desks, Tally};
use crate::engine::{Cas, Engine, EngineError};
use crate::entropy::Entropy;
use crate::log::{record_event, RecordEvent};
use crate::metrics::Metrics;
use idemgate_core::client::scope::StorageKey;
use idemgate_core::store::remote::full;
use idemgate_core::store::remote::Resume;
use idemgate_core::store::remote::{
    Failure, LedgerJob, LedgerOutcome, Need, Operation, OperationStep, Request, Response,
    Settlement, SettlementStep, ValueVersion, Write,
};
use idemgate_core::store::WriteOutcome;
use idemgate_core::time::UnixMillis;
use idemgate_core::{ClaimOutcome, ConsumeOutcome, FinishOutcome};
use std::sync::LazyLock;
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
        match tokio::time::timeout(timeout, exchange(engine, metrics, request, timeout)).await {
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

async fn exchange(
    engine: &Engine,
    metrics: &Metrics,
    request: Request,
    timeout: Duration,
) -> Response {
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
            Operation::speculate(request, service_clock(), claimed.as_deref(), fresh)
        }
        _ => Operation::start(request),
    };
    // After a compare-and-set met another version, reads go to the engine's source of truth.
    let mut conflicted = false;
    // The claim this operation wrote, remembered for its owner's finish once it is forwarded.
    let mut claim_value = None;
    loop {
        let step = match need {
            Need::Ledger(job) => {
                let (settled, tally) = settle(engine, job, timeout).await;
                metrics.engine_calls(tally.calls);
                metrics.cas_conflicts(tally.conflicts);
                exchange.settled(settled)
            }
            need => {
                metrics.engine_call();
                let answer = call(engine, &need, conflicted).await;
                if raced(&answer, &need) {
                    metrics.cas_conflict();
                }
                conflicted |= matches!(answer, EngineReply::Conflict(_));
                if let (
                    EngineReply::Written,
                    true,
                    Need::Write {
                        key: on,
                        write: Write::Set { value, .. },
                        ..
                    },
                ) = (&answer, claiming, need)
                {
                    if on == key {
                        claim_value = Some(value);
                    }
                }
                resume(&mut exchange, answer)
            }
        };
        match step {
            OperationStep::Need(next) => need = next,
            OperationStep::Done(response) => {
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

/// What the engine answered one call, with a fresh version for the decision it leads to.
enum EngineReply {
    Read(UnixMillis, Option<Vec<u8>>, ValueVersion),
    Written,
    /// Another version: with the engine's clock and what the key holds, when the engine says.
    Conflict(Option<(UnixMillis, Option<Vec<u8>>, ValueVersion)>),
    Failed(Failure),
}

/// Whether `answer` to `need` is a lost race: a compare-and-set that met another version. A
/// speculation that missed (decided on the service's clock) is the common retry, not a race.
fn raced(answer: &EngineReply, need: &Need) -> bool {
    matches!(answer, EngineReply::Conflict(_)) && !matches!(need, Need::Write { at: Some(_), .. })
}

/// `machine` resumed with what the engine answered.
fn resume<M: Resume>(machine: &mut M, answer: EngineReply) -> M::Step {
    match answer {
        EngineReply::Read(now, value, fresh) => machine.read(now, value.as_deref(), fresh),
        EngineReply::Written => machine.written(WriteOutcome::Written),
        EngineReply::Conflict(None) => machine.written(WriteOutcome::Conflict),
        EngineReply::Conflict(Some((now, value, fresh))) => {
            machine.conflicted(now, value.as_deref(), fresh)
        }
        EngineReply::Failed(failure) => machine.failed(failure),
    }
}

/// One read or compare-and-set at the engine (a [`Need::Ledger`] is no engine call: it answers
/// unavailable).
async fn call(engine: &Engine, need: &Need, conflicted: bool) -> EngineReply {
    let fresh = || fresh_version().ok_or(Failure::Unavailable);
    let answer = match need {
        Need::Read { key } => match engine.read(key, conflicted).await {
            Ok((now, value)) => fresh().map(|fresh| EngineReply::Read(now, value, fresh)),
            Err(e) => Err(failure(e)),
        },
        Need::Write {
            key,
            expect,
            write,
            at,
        } => match engine.compare_and_set(key, *expect, write, *at).await {
            Ok(Cas::Written) => Ok(EngineReply::Written),
            Ok(Cas::Conflict(None)) => Ok(EngineReply::Conflict(None)),
            Ok(Cas::Conflict(Some((now, value)))) => {
                fresh().map(|fresh| EngineReply::Conflict(Some((now, value, fresh))))
            }
            Err(e) => Err(failure(e)),
        },
        Need::Ledger(_) => Err(Failure::Unavailable),
    };
    answer.unwrap_or_else(EngineReply::Failed)
}

/// Settles `job` with the other jobs waiting on its ledger key ([`crate::desk`]): its answer,
/// and the engine calls counted on it.
async fn settle(engine: &Engine, job: LedgerJob, timeout: Duration) -> (LedgerOutcome, Tally) {
    let key = job.key();
    let (answer, start) = DESKS.queue(job);
    if start {
        tokio::spawn(settle_batches(engine.clone(), key, timeout));
    }
    answer.await.unwrap_or((
        LedgerOutcome::Failed(Failure::Unavailable),
        Tally::default(),
    ))
}

/// Settles the batches on `key` until its desk is idle, each within `timeout`.
async fn settle_batches(engine: Engine, key: StorageKey, timeout: Duration) {
    while let Some(batch) = DESKS.next(&key) {
        let Batch {
            mut settlement,
            waiters,
            known,
        } = batch;
        let jobs = settlement.len();
        let mut tally = Tally::default();
        let settled = tokio::time::timeout(
            timeout,
            settle_batch(&engine, &mut settlement, known, &mut tally),
        )
        .await;
        match settled {
            Ok(answers) => {
                let known = settlement.value().map(|value| value.map(<[u8]>::to_vec));
                DESKS.done(&key, waiters, answers, tally, known);
            }
            Err(_) => DESKS.done(
                &key,
                waiters,
                vec![LedgerOutcome::Failed(Failure::Timeout); jobs],
                tally,
                None,
            ),
        }
    }
}

/// One batch at the engine. On Redis it starts with a compare-and-set on the value the last
/// batch left (or on an absent key): a miss answers with what Redis holds, so it never costs more
/// than a read would have.
async fn settle_batch(
    engine: &Engine,
    settlement: &mut Settlement,
    known: Option<Option<Vec<u8>>>,
    tally: &mut Tally,
) -> Vec<LedgerOutcome> {
    let mut need = match (engine.speculates(), fresh_version()) {
        (true, Some(fresh)) => {
            let assumed = known.flatten();
            settlement.speculate(service_clock(), assumed.as_deref(), fresh)
        }
        _ => settlement.start(),
    };
    let mut conflicted = false;
    loop {
        tally.calls += 1;
        let answer = call(engine, &need, conflicted).await;
        if raced(&answer, &need) {
            tally.conflicts += 1;
        }
        conflicted |= matches!(answer, EngineReply::Conflict(_));
        match resume(settlement, answer) {
            SettlementStep::Need(next) => need = next,
            SettlementStep::Done(answers) => return answers,
        }
    }
}

/// Payers' ledgers with work waiting (see [`crate::desk`]).
static DESKS: LazyLock<Desks> = LazyLock::new(Desks::default);

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
        Request::Replay { .. } => "replay",
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
        Response::Claim(ClaimOutcome::NotReplayed) => "not_replayed",
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
