//! Events racing on one resource of an ordered callback route, through the filter's
//! `.wasm`: each event on its own worker, every interleaving of their host-call steps, and what
//! must hold after each schedule:
//! - no worker trapped, nothing suspicious happened at the host;
//! - **at most one event applies per version**: the events the upstream saw, in the order it saw
//!   them, each apply from the state the ones before left (replayed on the route's table), and the
//!   resource's record ends in that state at a version one higher per applied event; every stored
//!   version of the resource is the one before it or the next, and moves only with a forwarded
//!   event;
//! - **the other is decided against the new state**: an event acknowledged by the edge (200
//!   `already-applied` or `illegal`) names a state the resource really was in, and that state's
//!   answer for the event by the table is that acknowledgement;
//! - **nothing is lost**: every event was applied (forwarded, 2xx, `idemgate-order: applied`),
//!   acknowledged as above, or sent back with 409 (`order_resource_busy` while another event was
//!   forwarded, `order_event_early`) for its sender to deliver again;
//! - no claim on the resource outlives the run (every exchange ended: each settled or released).

use super::plan::Plan;
use super::plan::NO_SHARES;
use super::run::Run;
use crate::envoy::ClientAnswer;
use crate::scenario::{Request, Response};
use idemgate_core::order::transition::{Arrival, DeclaredTable};
use idemgate_core::record::resource::Resource;
use idemgate_core::record::{Bucket, Record};
use idemgate_core::time::UnixMillis;

/// The demo's table (the sequencer's contract): unpaid → paid → shipped; unpaid or paid →
/// cancelled.
pub const TABLE: &str = r#"{"initial": "unpaid", "transitions": [
    ["unpaid", "payment.succeeded", "paid"], ["paid", "order.shipped", "shipped"],
    ["unpaid", "order.cancelled", "cancelled"], ["paid", "order.cancelled", "cancelled"]]}"#;

/// A delivery of event `kind` for order 1 with delivery id `id`.
pub fn event(id: &str, kind: &str) -> Request {
    Request::post("/hooks")
        .header("webhook-id", id)
        .json(&format!(r#"{{"type":"{kind}","data":{{"order":1}}}}"#))
}

impl Plan {
    /// `events` on one resource, each on its own worker of one Envoy (the local store); the
    /// upstream answers 201 to each forwarded one; every one of them may reach it.
    pub fn ordered(events: Vec<Request>) -> Plan {
        let n = events.len();
        let mut plan = Plan::concurrent(n, events[0].clone(), Response::new(201));
        plan.requests = events;
        plan.config = format!(
            r#"{{"capacity": 64, {NO_SHARES}, "routes": [{{"prefix": "/hooks", "kind": "callback",
                "key_from": [{{"header": "webhook-id"}}],
                "order": {{"unsigned": "allow", "resource": {{"json": "/data/order"}}, "event": {{"json": "/type"}},
                           "table": {TABLE}}}}}]}}"#
        );
        plan.max_upstream_calls = n;
        plan
    }
}

fn event_of(request: &Request) -> Result<String, String> {
    let body: serde_json::Value =
        serde_json::from_slice(&request.body).map_err(|e| format!("event body: {e}"))?;
    body["type"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| String::from("event without a type"))
}

/// Every state the resource's record held, in write order (with its version and claim's lease).
fn resource_records(run: &Run) -> Vec<(usize, Resource)> {
    run.writes
        .iter()
        .enumerate()
        .filter_map(|(i, write)| {
            let bucket = Bucket::decode(&write.value).ok()?;
            bucket
                .entries
                .into_iter()
                .find_map(|(_, record)| match record {
                    Record::Resource(r) => Some((i, r)),
                    _ => None,
                })
        })
        .collect()
}

/// The first invariant that fails, described.
pub fn check(plan: &Plan, run: &Run) -> Result<(), String> {
    super::invariants::ran_cleanly(run)?;
    let table = DeclaredTable::parse(TABLE).map_err(|e| e.to_string())?;
    let events: Vec<String> = plan
        .requests
        .iter()
        .map(event_of)
        .collect::<Result<_, _>>()?;

    // The forwarded events in the upstream's order, replayed on the table.
    let mut calls = run.upstream_calls.clone();
    calls.sort_by_key(|c| c.writes_before);
    let mut history = vec![String::from(table.initial())];
    for call in &calls {
        let event = events
            .get(call.worker)
            .ok_or_else(|| format!("an upstream call from unknown worker {}", call.worker))?;
        let current = history.last().cloned().unwrap_or_default();
        match table.table().arrival(&current, event) {
            Arrival::Apply { to } => history.push(to.to_owned()),
            other => {
                return Err(format!(
                    "worker {}'s {event} reached the upstream at {current}, where it is {}: applied out of order",
                    call.worker,
                    other.name()
                ))
            }
        }
    }

    // The record: versions move by one, only with forwarded events, and end at the model.
    let records = resource_records(run);
    let mut previous: Option<&Resource> = None;
    for (i, record) in records.iter().map(|(i, r)| (i, r)) {
        if let Some(before) = previous {
            let step = record.version.checked_sub(before.version);
            let moved = record.state != before.state;
            match step {
                Some(0) if !moved => {}
                Some(1) if moved => {
                    let applied_before = calls.iter().filter(|c| c.writes_before <= *i).count();
                    if (record.version as usize) > applied_before {
                        return Err(format!(
                            "write {i}: version {} with only {applied_before} event(s) forwarded",
                            record.version
                        ));
                    }
                }
                _ => {
                    return Err(format!(
                        "write {i}: the resource went from {} v{} to {} v{}",
                        before.state, before.version, record.state, record.version
                    ))
                }
            }
        }
        previous = Some(record);
    }
    let last = records.last().map(|(_, r)| r);
    let (state, version) = match last {
        Some(r) => (r.state.as_str(), r.version),
        None => (table.initial(), 0),
    };
    let model = history.last().map(String::as_str).unwrap_or_default();
    if state != model || version as usize != calls.len() {
        return Err(format!(
            "the resource ended {state} v{version}; the forwarded events lead to {model} v{}",
            calls.len()
        ));
    }
    let end = UnixMillis(run.writes.last().map_or(0, |w| w.at_ms));
    if let Some(claim) = last.and_then(|r| r.live_claim(end)) {
        return Err(format!(
            "the resource is still claimed by {:?}",
            claim.owner
        ));
    }

    // Each event: applied, acknowledged against a state the resource was in, or sent back.
    for actor in &run.actors {
        let event = &events[actor.actor];
        let Some(answer) = &actor.answer else {
            return Err(format!("worker {} got no answer", actor.actor));
        };
        decided(
            &table,
            &history,
            actor.forwarded,
            event,
            answer,
            calls.len(),
        )
        .map_err(|e| format!("worker {} ({event}): {e}", actor.actor))?;
    }
    if let Ok(Some(answer)) = &run.followup {
        let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap_or_default();
        if answer.status == 409 && body["code"] != "order_event_early" {
            return Err(format!(
                "after the lease the first event again got 409 {}: a claim is stuck",
                answer.body_text()
            ));
        }
    }
    Ok(())
}

fn decided(
    table: &DeclaredTable,
    history: &[String],
    forwarded: bool,
    event: &str,
    answer: &ClientAnswer,
    applied: usize,
) -> Result<(), String> {
    let order = answer.header("idemgate-order");
    if forwarded {
        return match (answer.status, order) {
            (201, Some("applied")) => Ok(()),
            _ => Err(format!(
                "forwarded, but answered {} with idemgate-order {order:?}",
                answer.status
            )),
        };
    }
    let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap_or_default();
    match (answer.status, order) {
        (200, Some(kind @ ("already-applied" | "illegal"))) => {
            let state = body["state"].as_str().unwrap_or_default();
            if !history.iter().any(|s| s == state) {
                return Err(format!(
                    "acknowledged at {state}, a state the resource never had"
                ));
            }
            let expected = match table.table().arrival(state, event) {
                Arrival::AlreadyApplied => "already-applied",
                Arrival::Illegal { .. } => "illegal",
                other => other.name(),
            };
            if expected != kind {
                return Err(format!(
                    "{kind} at {state}, where the table says {expected}"
                ));
            }
            Ok(())
        }
        (409, _) => {
            let code = body["code"].as_str().unwrap_or_default();
            match code {
                "order_resource_busy" if applied > 0 => Ok(()),
                "order_event_early" => Ok(()),
                _ => Err(format!("409 {code} with {applied} event(s) forwarded")),
            }
        }
        _ => Err(format!(
            "neither applied, acknowledged nor sent back: {} {}",
            answer.status,
            answer.body_text()
        )),
    }
}
