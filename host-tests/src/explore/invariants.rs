//! What must hold after every schedule:
//! - no worker trapped, nothing suspicious happened at the host;
//! - at most `max_upstream_calls` requests reached the upstream (one per key, plus one per lease
//!   that legitimately expired), and at least one;
//! - every client got the original answer, a replay of a stored answer, or a 409;
//! - the records went only through legal transitions (no stale owner overwrote a newer record, no
//!   live lease was taken over, nothing completed without a claim);
//! - no lease is stuck: after the lease, the same request is answered (replayed or forwarded), not
//!   refused with 409; no in-flight record has a lease longer than its TTL;
//! - at most one execution per key while its record lives: none starts once the key's record is
//!   completed (plans use one key), one more only per lease that legitimately expired;
//! - every completed execution's answer is what later retries get: each completed record holds an
//!   execution's answer, and every replay (during the run, and the follow-up after it) is that
//!   record's answer;
//! - with detached execution, every execution the upstream answered (with an answer that is
//!   stored, not released) completed the record with that answer, whether or not its client
//!   stayed (the answer belongs to the key) — unless a later execution legitimately took over;
//! - with detached execution (callouts), a client that stayed gets its execution's answer relayed
//!   (or, when the app did not answer, the edge's problem answer or the reply Envoy made on the
//!   re-entry pass), and a client that went away gets nothing;
//! - a key is released only when its execution certainly did not run (it never reached the app,
//!   or the app itself answered a release status): never after a reset, a timeout, an earlier
//!   attempt of a retried route, or an answer of the re-entry listener without its mark;
//! - with detached execution, a key no execution completed runs again: after the lease, the
//!   same request reaches the app and its client gets the app's own answer (whether the key was
//!   released, or kept in doubt until its lease ended);
//! - only an answer the filter can tell is the app's (direct: Envoy's router header; re-entry:
//!   the mark says `via_upstream`) is ever stored.

use super::plan::Plan;
use super::run::Run;
use crate::envoy::{CalloutFault, ClientAnswer, Delivery, Write};
use crate::scenario::{Response, Upstream};
use idemgate_core::policy::DEFAULT_RELEASE_STATUSES;
use idemgate_core::record::{Bucket, Record, StoredBody};
use std::collections::HashMap;

/// Every worker ran without an error and the host saw no anomaly: what any exploration's
/// invariants assume before they look at the records.
pub fn ran_cleanly(run: &Run) -> Result<(), String> {
    for actor in &run.actors {
        if let Some(error) = &actor.error {
            return Err(format!("worker {} failed: {error}", actor.actor));
        }
    }
    if !run.anomalies.is_empty() {
        return Err(format!("host anomalies: {:?}", run.anomalies));
    }
    Ok(())
}

/// The first invariant that fails, described.
pub fn check(plan: &Plan, run: &Run) -> Result<(), String> {
    ran_cleanly(run)?;
    let executions = executions(plan, run);
    let calls = executions.len();
    // A fleet whose store lost a claim's reply may end with no execution (the others got 409).
    let may_run_none =
        plan.client_may_leave || (plan.store.is_some() && !plan.callout_faults.is_empty());
    if calls > plan.max_upstream_calls || (calls == 0 && !may_run_none) {
        return Err(format!(
            "{calls} executions reached the upstream (allowed: 1..={}): {:?} {:?}",
            plan.max_upstream_calls, run.upstream_calls, run.callouts
        ));
    }
    if plan.callouts.is_some() {
        detached_answers(plan, run)?;
    } else {
        answers(plan, run)?;
    }
    let forwarded: Vec<usize> = run
        .actors
        .iter()
        .filter(|a| a.forwarded)
        .map(|a| a.actor)
        .collect();
    transitions(&run.writes, &forwarded)?;
    no_release_in_doubt(plan, run)?;
    let completed = if plan.store.is_some() {
        store_completed(run)
    } else {
        completed_responses(&run.writes)?
    };
    no_execution_after_completion(&run.writes, &executions)?;
    completed_answers_are_executions(plan, run, &completed)?;
    answered_executions_are_recorded(plan, run, &completed)?;
    for actor in &run.actors {
        if let Some(answer) = &actor.answer {
            replay_is_the_record(answer, &completed)
                .map_err(|e| format!("worker {}: {e}", actor.actor))?;
        }
    }
    if let Ok(Some(answer)) = &run.followup {
        replay_is_the_record(answer, &completed).map_err(|e| format!("the follow-up: {e}"))?;
        if let Some(record) = completed.first() {
            if answer.header("idempotent-replayed") != Some("true") {
                return Err(format!(
                    "the key's record was completed ({} …) but the follow-up got {} {}: not its replay",
                    record.0,
                    answer.status,
                    answer.body_text()
                ));
            }
        }
    }
    released_key_runs_again(plan, run, &completed)?;
    match &run.followup {
        Err(e) => return Err(format!("the follow-up request failed: {e}")),
        Ok(Some(answer)) if answer.status == 409 => {
            return Err(
                "a lease is stuck: after the lease ended the same request still got 409".into(),
            )
        }
        Ok(_) => {}
    }
    Ok(())
}

/// Detached execution: when no execution completed the key's record, the follow-up (sent once the
/// lease passed) runs — its callout reaches the app — and its client gets the app's answer, not a
/// replay, a 409 or the edge's problem answer: a released key runs again, and one kept in doubt
/// only until its lease ends.
fn released_key_runs_again(plan: &Plan, run: &Run, completed: &[Stored]) -> Result<(), String> {
    if plan.callouts.is_none() || plan.store.is_some() || !completed.is_empty() {
        return Ok(());
    }
    let answer = match &run.followup {
        Ok(answer) => answer.as_ref(),
        // Said by the follow-up's own check.
        Err(_) => return Ok(()),
    };
    let own = answer.is_none_or(|a| a.status == 201 && a.header("idempotent-replayed").is_none());
    if run.followup_ran && own {
        return Ok(());
    }
    let got = answer.map_or_else(
        || "no answer".into(),
        |a| format!("{} {}", a.status, a.body_text()),
    );
    Err(format!(
        "no execution completed the key, yet the follow-up after the lease {} and got {got}: a released key must run again",
        if run.followup_ran { "ran" } else { "did not run" },
    ))
}

fn is_original(answer: &ClientAnswer, upstream: &Upstream) -> bool {
    match upstream {
        Upstream::Respond(response) if response.cut_after.is_none() => {
            !answer.local
                && answer.complete
                && answer.status == response.status
                && answer.body == response.body
        }
        Upstream::Respond(_) | Upstream::ClientGone => !answer.complete,
        Upstream::Fail(failure) => answer.local && answer.status == failure.envoy_reply().0,
    }
}

fn is_replay_of(answer: &ClientAnswer, response: &Response) -> bool {
    answer.header("idempotent-replayed") == Some("true")
        && answer.status == response.status
        && answer.body == response.body
}

fn is_problem(answer: &ClientAnswer) -> bool {
    answer.header("content-type") == Some("application/problem+json")
}

fn is_conflict(answer: &ClientAnswer) -> bool {
    answer.status == 409 && answer.header("content-type") == Some("application/problem+json")
}

fn answers(plan: &Plan, run: &Run) -> Result<(), String> {
    // A fleet whose store may lose replies: a request whose claim got no answer gets the
    // failure mode's problem answer.
    let store_failed = plan.store.is_some() && !plan.callout_faults.is_empty();
    let stored: Vec<&Response> = run
        .actors
        .iter()
        .filter(|a| a.forwarded)
        .filter_map(|a| match plan.upstream_for(a.actor) {
            Some(Upstream::Respond(r)) => Some(r),
            _ => None,
        })
        .collect();
    for actor in &run.actors {
        let upstream = plan.upstream_for(actor.actor);
        let ok = match (&actor.answer, actor.forwarded, upstream) {
            (Some(answer), true, Some(upstream)) => is_original(answer, upstream),
            (None, true, Some(Upstream::ClientGone)) => true,
            (Some(answer), false, _) => {
                is_conflict(answer)
                    || stored.iter().any(|r| is_replay_of(answer, r))
                    || (store_failed && is_problem(answer) && answer.status >= 500)
            }
            (None, false, _) => actor.left,
            _ => false,
        };
        if !ok {
            let got = actor
                .answer
                .as_ref()
                .map(|a| format!("{} {}", a.status, a.body_text()))
                .unwrap_or_else(|| "no answer".into());
            return Err(format!(
                "worker {} (forwarded: {}) got {got}: neither its original answer, a replay, nor a 409",
                actor.actor, actor.forwarded
            ));
        }
    }
    Ok(())
}

/// One execution: a request that reached the upstream (the router path, or a callout to the
/// plan's origin cluster that reached it), with how many shared-data writes preceded it.
#[derive(Debug, Clone)]
pub struct Execution {
    pub worker: usize,
    pub writes_before: usize,
}

fn executions(plan: &Plan, run: &Run) -> Vec<Execution> {
    let routed = run.upstream_calls.iter().map(|c| Execution {
        worker: c.worker,
        writes_before: c.writes_before,
    });
    let origin = plan.callouts.as_ref().map(|(cluster, _)| cluster.as_str());
    let called = run
        .callouts
        .iter()
        .filter(|c| c.reached && Some(c.request.cluster.as_str()) == origin)
        .map(|c| Execution {
            worker: c.request.worker,
            writes_before: c.request.writes_before,
        });
    routed.chain(called).collect()
}

/// A completed record's answer: status, body (`None`: not kept), and the write that first held it.
type Stored = (u16, Option<Vec<u8>>, usize);

/// Every distinct completed answer written, in write order.
fn completed_responses(writes: &[Write]) -> Result<Vec<Stored>, String> {
    let mut found = Vec::new();
    for (n, write) in writes.iter().enumerate().filter(|(_, w)| is_cell(w)) {
        for (_, record) in decode(&write.value)?.entries {
            if let Record::Completed(done) = record {
                let body = match &done.response.body {
                    StoredBody::Kept(body) => Some(body.clone()),
                    _ => None,
                };
                let entry = (done.response.status, body, n);
                if !found
                    .iter()
                    .any(|f: &Stored| f.0 == entry.0 && f.1 == entry.1)
                {
                    found.push(entry);
                }
            }
        }
    }
    Ok(found)
}

/// A fleet: the answers the store service completed records with (finishes it applied), with
/// the index of the store operation.
fn store_completed(run: &Run) -> Vec<Stored> {
    use idemgate_core::store::remote::{End, Request, Response};
    use idemgate_core::FinishOutcome;
    let mut found: Vec<Stored> = Vec::new();
    for (n, (request, response)) in run.store_log.iter().enumerate() {
        let (
            Request::Finish {
                end: End::Store(stored),
                ..
            },
            Response::Finish(outcome),
        ) = (request, response)
        else {
            continue;
        };
        if *outcome != FinishOutcome::Stored {
            continue;
        }
        let body = match &stored.body {
            StoredBody::Kept(body) => Some(body.clone()),
            _ => None,
        };
        if !found.iter().any(|f| f.0 == stored.status && f.1 == body) {
            found.push((stored.status, body, n));
        }
    }
    found
}

/// No execution starts once its key's record is completed (while the record lives: the runs are
/// far shorter than its TTL).
fn no_execution_after_completion(writes: &[Write], executions: &[Execution]) -> Result<(), String> {
    let first_completion = writes.iter().position(|w| {
        is_cell(w)
            && decode(&w.value).is_ok_and(|b| {
                b.entries
                    .iter()
                    .any(|(_, r)| matches!(r, Record::Completed(_)))
            })
    });
    if let Some(at) = first_completion {
        if let Some(late) = executions.iter().find(|e| e.writes_before > at) {
            return Err(format!(
                "worker {} executed the request after its key's record was completed (write #{at}): a second execution while the record lives",
                late.worker
            ));
        }
    }
    Ok(())
}

/// The answers executions produced (status, body), as the upstream gave them — only those the
/// filter could tell were the app's (an unmarked answer from the re-entry listener is not: it must
/// never be stored).
fn execution_answers(plan: &Plan, run: &Run) -> Vec<(u16, Vec<u8>)> {
    let mut answers: Vec<(u16, Vec<u8>)> = run
        .callouts
        .iter()
        .filter(|c| Some(&c.request.cluster) != plan.store.as_ref())
        .filter(|c| c.from_app && c.says_app_answered())
        .filter_map(|c| match &c.delivery {
            Delivery::Response { body, .. } => c.delivery.status().map(|s| (s, body.clone())),
            Delivery::Failure => None,
        })
        .collect();
    for actor in run.actors.iter().filter(|a| a.forwarded) {
        if let Some(Upstream::Respond(r)) = plan.upstream_for(actor.actor) {
            answers.push((r.status, r.body.clone()));
        }
    }
    if let Some(Upstream::Respond(r)) = plan.upstream.first() {
        // The follow-up request may have executed too.
        answers.push((r.status, r.body.clone()));
    }
    answers
}

fn completed_answers_are_executions(
    plan: &Plan,
    run: &Run,
    completed: &[Stored],
) -> Result<(), String> {
    let answers = execution_answers(plan, run);
    for (status, body, n) in completed {
        let matches = answers
            .iter()
            .any(|(s, b)| s == status && body.as_ref().is_none_or(|body| body == b));
        if !matches {
            return Err(format!(
                "write #{n} completed the record with {status} {:?}, which no execution answered",
                body.as_ref()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
            ));
        }
    }
    Ok(())
}

/// The answer belongs to the key, not to the client's connection: every detached execution the
/// upstream answered with a storable answer (not one of the release statuses) completed the
/// record with that answer — also when its client had gone away — unless a later execution took
/// the key over (its lease ended before the answer was written: the stale owner is fenced out).
fn answered_executions_are_recorded(
    plan: &Plan,
    run: &Run,
    completed: &[Stored],
) -> Result<(), String> {
    let Some((origin, _)) = &plan.callouts else {
        return Ok(());
    };
    let origin_calls = || run.callouts.iter().filter(|c| c.request.cluster == *origin);
    for record in origin_calls() {
        let taken_over = origin_calls().any(|later| {
            later.reached && later.request.writes_before > record.request.writes_before
        });
        if taken_over {
            continue;
        }
        let Delivery::Response { body, .. } = &record.delivery else {
            continue;
        };
        let Some(status) = record.delivery.status() else {
            continue;
        };
        let knowable = record.from_app && record.says_app_answered();
        if !knowable || DEFAULT_RELEASE_STATUSES.contains(&status) {
            continue;
        }
        let kept = completed
            .iter()
            .any(|(s, b, _)| *s == status && b.as_ref().is_none_or(|b| b == body));
        if !kept {
            return Err(format!(
                "worker {}'s execution was answered {status} {} (client gone: {}) but no completed record holds that answer: the answer was lost",
                record.request.worker,
                String::from_utf8_lossy(body),
                record.stream_gone
            ));
        }
    }
    Ok(())
}

/// A replay must be the completed record's answer.
fn replay_is_the_record(answer: &ClientAnswer, completed: &[Stored]) -> Result<(), String> {
    if answer.header("idempotent-replayed") != Some("true") {
        return Ok(());
    }
    let matches = completed.iter().any(|(status, body, _)| {
        *status == answer.status && body.as_ref().is_none_or(|b| *b == answer.body)
    });
    if matches {
        Ok(())
    } else {
        Err(format!(
            "a replay of {} {} that no completed record holds",
            answer.status,
            answer.body_text()
        ))
    }
}

/// Detached execution: a client that stayed gets its own execution's answer relayed (the edge's
/// problem answer when the execution had no answer of the upstream's), or — without an execution
/// of its own — a 409 or a replay; a client that went away gets nothing.
fn detached_answers(plan: &Plan, run: &Run) -> Result<(), String> {
    let origin = plan.callouts.as_ref().map(|(cluster, _)| cluster.as_str());
    for actor in &run.actors {
        let own = run.callouts.iter().rev().find(|c| {
            c.request.worker == actor.actor && Some(c.request.cluster.as_str()) == origin
        });
        let describe = |a: &ClientAnswer| format!("{} {}", a.status, a.body_text());
        let ok = match (&actor.answer, own) {
            (None, _) => actor.left,
            (Some(answer), _) if actor.left => !answer.complete,
            (Some(answer), Some(record)) => {
                let relayed = match &record.delivery {
                    Delivery::Response { body, .. } => {
                        record.delivery.status() == Some(answer.status)
                            && *body == answer.body
                            && answer.header("idempotent-replayed").is_none()
                    }
                    Delivery::Failure => false,
                };
                if record.from_app && record.says_app_answered() {
                    relayed
                } else {
                    // Envoy's own reply (the inner pass's, relayed as the same request without a
                    // key would get it) or the edge's problem answer.
                    relayed || (answer.status >= 500 && is_problem(answer))
                }
            }
            (Some(answer), None) => {
                let dispatch_failed = plan
                    .callout_faults
                    .iter()
                    .any(|(f, _)| *f == CalloutFault::DispatchFails);
                is_conflict(answer)
                    || answer.header("idempotent-replayed") == Some("true")
                    || (dispatch_failed && answer.status == 503 && is_problem(answer))
            }
        };
        if !ok {
            return Err(format!(
                "worker {} (left: {}, callout: {:?}) got {}: not what its execution answered, a replay, nor a 409",
                actor.actor,
                actor.left,
                own.map(|c| c.delivery.status()),
                actor.answer.as_ref().map(describe).unwrap_or_else(|| "no answer".into())
            ));
        }
    }
    Ok(())
}

/// Why worker `worker`'s execution may have reached the app without an answer that settles it
/// (`None`: releasing its key is safe — it never reached the app, or the app's own answer, as the
/// filter could tell, has a release status).
fn doubt_of(plan: &Plan, run: &Run, worker: usize) -> Option<String> {
    if let Some((origin, _)) = &plan.callouts {
        let own = run
            .callouts
            .iter()
            .filter(|c| c.request.worker == worker && c.request.cluster == *origin);
        let last = own.clone().next_back()?;
        if !own.clone().any(|c| c.reached) {
            return None;
        }
        let status = last.delivery.status();
        let settled = last.from_app
            && last.says_app_answered()
            && status.is_some_and(|s| DEFAULT_RELEASE_STATUSES.contains(&s));
        return (!settled).then(|| {
            format!(
                "its callout reached the app and came back {status:?} with mark {:?}",
                last.mark()
            )
        });
    }
    if !run.upstream_calls.iter().any(|c| c.worker == worker) {
        return None;
    }
    match plan.upstream_for(worker)? {
        Upstream::Respond(r)
            if r.cut_after.is_none() && DEFAULT_RELEASE_STATUSES.contains(&r.status) =>
        {
            None
        }
        Upstream::Fail(failure) if !failure.may_have_reached() => None,
        other => Some(format!("the upstream got it and then {other:?}")),
    }
}

/// A key is released (its claim removed by its owner) only when its execution certainly did not
/// run: it never reached the app, or the app itself answered with a release status. One that may
/// have reached the app — a reset, a timeout, an earlier attempt of a retried route, an answer of
/// the re-entry listener without its mark — keeps the key in doubt until its lease ends: released,
/// a retry would run it a second time.
fn no_release_in_doubt(plan: &Plan, run: &Run) -> Result<(), String> {
    let mut owners: HashMap<[u8; 16], usize> = HashMap::new();
    for (n, write) in run.writes.iter().enumerate().filter(|(_, w)| is_cell(w)) {
        let before = decode(write.before.as_deref().unwrap_or_default())?;
        let after = decode(&write.value)?;
        for (_, record) in &after.entries {
            if let Record::InFlight(claim) = record {
                owners.entry(claim.owner.0).or_insert(write.worker);
            }
        }
        for (key, record) in &before.entries {
            let Record::InFlight(claim) = record else {
                continue;
            };
            let expired = claim.expires_at.0 <= write.at_ms;
            let own = owners.get(&claim.owner.0) == Some(&write.worker);
            if after.get(key).is_some() || expired || !own {
                continue;
            }
            if let Some(doubt) = doubt_of(plan, run, write.worker) {
                return Err(format!(
                    "write #{n}: worker {} released its key although {doubt}: the outcome is in doubt, and a retry runs it a second time",
                    write.worker
                ));
            }
        }
    }
    Ok(())
}

/// Records live in the store's cells; other shared-data keys (the layout marker the filter writes
/// when configured) are not buckets.
const CELL_PREFIX: &str = "idemgate/c/";

pub(super) fn is_cell(write: &Write) -> bool {
    write.key.starts_with(CELL_PREFIX)
}

pub(super) fn decode(bytes: &[u8]) -> Result<Bucket, String> {
    Bucket::decode(bytes).map_err(|e| format!("a cell holds bytes that are not a bucket: {e:?}"))
}

mod transitions;

pub use transitions::transitions;

#[cfg(test)]
mod tests;
