//! Every ordering of the host-call steps of concurrent requests with one key (two requests), or a
//! large seeded sample (three). Set `IDEMGATE_EXPLORE_SEED` to reproduce a sampled failure, and
//! `IDEMGATE_EXPLORE_RUNS` to sample more.

use crate::detached::BOTH;
use crate::support::{created, filter, order};
use idemgate_host_tests::envoy::{CalloutFault, InnerPass, InnerReply, Outcome};
use idemgate_host_tests::explore::{
    every_schedule, every_schedule_checked, invariants, sampled_schedules, Coverage, Plan, Run,
};
use idemgate_host_tests::scenario::{Failure, Forwarding, Response, Upstream};

fn seed() -> u64 {
    std::env::var("IDEMGATE_EXPLORE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x1de3)
}

fn runs(default: usize) -> usize {
    std::env::var("IDEMGATE_EXPLORE_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn all(plan: &Plan) -> Coverage {
    let coverage = every_schedule(plan, &filter(), 50_000)
        .unwrap()
        .unwrap_or_else(|v| panic!("{v}"));
    assert!(coverage.exhaustive, "{coverage:?}");
    println!("{coverage:?}");
    coverage
}

fn sample(plan: &Plan, n: usize) {
    let coverage = sampled_schedules(plan, &filter(), seed(), runs(n))
        .unwrap()
        .unwrap_or_else(|v| panic!("{v}"));
    println!("{coverage:?}");
}

#[test]
fn two_requests_one_key_every_interleaving() {
    let coverage = all(&Plan::concurrent(2, order("k"), created()));
    assert!(coverage.schedules > 20, "{coverage:?}");
}

#[test]
fn two_requests_in_chunks_every_interleaving() {
    all(&Plan::concurrent(
        2,
        order("k").chunked_at(&[4, 9]),
        created(),
    ));
}

#[test]
fn two_requests_with_the_lease_expiring_anywhere() {
    all(&Plan::concurrent(2, order("k"), created()).with_lease_expiry());
}

#[test]
fn two_requests_creating_the_cell_as_the_cas_counter_wraps() {
    // The cell's creation is handed CAS u32::MAX − 2 or u32::MAX: the filter's insert-if-absent (a
    // `set` with CAS u32::MAX) meets its corner case, which the filter re-stamps away.
    for first in [u32::MAX - 2, u32::MAX] {
        all(&Plan::concurrent(2, order("k"), created()).first_cas(first));
    }
}

#[test]
fn two_requests_when_an_update_lands_on_cas_u32_max() {
    // The claim gets u32::MAX − 1, so the completion is handed exactly u32::MAX while the second
    // request still holds its "absent" read: its create (CAS u32::MAX) then matches.
    all(&Plan::concurrent(2, order("k"), created()).first_cas(u32::MAX - 1));
}

#[test]
fn two_requests_when_the_first_outcome_is_in_doubt() {
    let plan = Plan::concurrent(2, order("k"), created())
        .upstream(vec![
            Upstream::Fail(Failure::ResetBeforeResponse),
            Upstream::Respond(created()),
        ])
        .with_lease_expiry();
    all(&plan);
}

#[test]
fn two_requests_when_the_upstream_releases_the_first() {
    let plan = Plan::concurrent(2, order("k"), created())
        .upstream(vec![
            Upstream::Fail(Failure::ConnectionFailure),
            Upstream::Respond(created()),
        ])
        .max_upstream_calls(2);
    all(&plan);
}

/// The fair-share rule under every interleaving. The other explorations take shares off
/// ([`idemgate_host_tests::explore::plan::NO_SHARES`]); this one turns them on with the store
/// always under pressure (`pressure` 0 %) and one record as a client's share: alice sends two
/// orders with different keys at once, on two workers. However the two claims' ledger reads and
/// compare-and-sets interleave, exactly one order is created and the other is refused 429 for her
/// share before anything is forwarded — never both served (a lost charge), never both refused (a
/// charge counted twice).
#[test]
fn one_client_at_her_share_under_pressure_every_interleaving() {
    let mut plan = Plan::concurrent(2, order("k1"), created());
    plan.requests = vec![order("k1"), order("k2")];
    plan.config =
        r#"{"capacity": 64, "shares": {"identity": 1, "peer": "off", "pressure": "0%"}}"#.into();
    let coverage = every_schedule_checked(&plan, &filter(), 50_000, one_served_one_held)
        .unwrap()
        .unwrap_or_else(|v| panic!("{v}"));
    assert!(coverage.exhaustive, "{coverage:?}");
    assert!(coverage.schedules > 2, "{coverage:?}");
    println!("{coverage:?}");
}

fn one_served_one_held(_: &Plan, run: &Run) -> Result<(), String> {
    invariants::ran_cleanly(run)?;
    let answers: Vec<(u16, bool, String)> = run
        .actors
        .iter()
        .map(|a| {
            let answer = a.answer.as_ref();
            let status = answer.map_or(0, |answer| answer.status);
            let body = answer.map(|answer| answer.body_text()).unwrap_or_default();
            (status, a.forwarded, body)
        })
        .collect();
    let served = answers.iter().filter(|(s, f, _)| *s == 201 && *f).count();
    let held = answers
        .iter()
        .filter(|(s, f, body)| *s == 429 && !*f && body.contains("scope_quota_exceeded"))
        .count();
    if served != 1 || held != 1 {
        return Err(format!(
            "one order created and one held for her share, got (status, forwarded, body): {answers:?}"
        ));
    }
    Ok(())
}

#[test]
fn three_requests_one_key_sampled() {
    sample(&Plan::concurrent(3, order("k"), created()), 1000);
}

#[test]
fn three_requests_with_the_lease_expiring_sampled() {
    sample(
        &Plan::concurrent(3, order("k").chunked_at(&[6]), created()).with_lease_expiry(),
        1000,
    );
}

// Detached execution: each claimed request goes upstream as a callout that belongs to
// the root context; its answer may come after the client went away. The upstream model creates
// one order per request it serves, so every answer says which execution it came from. Every
// exhaustive plan runs both ways the exchange goes: back into Envoy through the
// re-entry listener, whose inner pass marks every answer, and straight to the cluster
// (`cluster_skipping_routes_and_filters`).

fn detached_order() -> idemgate_host_tests::scenario::Request {
    order("k").chunked_at(&[6])
}

/// Every schedule of the plan `make` builds, for each way; the coverage of each.
fn both(make: impl Fn(Forwarding) -> Plan) -> Vec<Coverage> {
    BOTH.into_iter()
        .map(|way| {
            let coverage = all(&make(way));
            println!("{way:?}: {coverage:?}");
            coverage
        })
        .collect()
}

fn detached(way: Forwarding) -> Plan {
    Plan::detached_via(way, 2, detached_order())
}

#[test]
fn two_detached_requests_one_key_every_interleaving() {
    for coverage in both(detached) {
        assert!(coverage.schedules > 10, "{coverage:?}");
    }
}

#[test]
fn two_detached_requests_with_clients_leaving_at_every_step() {
    for coverage in both(|way| detached(way).clients_may_leave()) {
        assert!(coverage.schedules > 100, "{coverage:?}");
    }
}

#[test]
fn two_detached_requests_in_doubt_with_the_lease_expiring_anywhere() {
    both(|way| {
        detached(way)
            .outcomes(vec![Some(Outcome::Silent), None])
            .with_lease_expiry()
    });
}

#[test]
fn two_detached_requests_in_doubt_with_clients_leaving_and_the_lease_expiring_sampled() {
    // Every interleaving is over 50,000 schedules: a seeded sample.
    let plan = Plan::detached(2, detached_order())
        .outcomes(vec![Some(Outcome::Silent), None])
        .clients_may_leave()
        .with_lease_expiry();
    sample(&plan, 500);
}

#[test]
fn two_detached_requests_when_the_first_execution_answers_503() {
    both(|way| {
        detached(way)
            .outcomes(vec![Some(Response::new(503).outcome()), None])
            .clients_may_leave()
            .max_upstream_calls(2)
    });
}

/// An execution in doubt (the app's answer cut after its head) with either client leaving at
/// each of its steps and the duplicate's claim landing anywhere: the key is never released, and
/// the follow-up runs it again only once the lease has ended.
#[test]
fn two_detached_requests_in_doubt_with_clients_leaving_at_every_step() {
    both(|way| {
        detached(way)
            .outcomes(vec![Some(Outcome::ResetAfterHeaders), None])
            .clients_may_leave()
    });
}

#[test]
fn three_detached_requests_with_clients_leaving_sampled() {
    sample(
        &Plan::detached(3, detached_order())
            .clients_may_leave()
            .with_lease_expiry(),
        300,
    );
}

#[test]
fn two_detached_requests_when_the_first_is_reset_mid_answer_with_the_lease_expiring_anywhere() {
    both(|way| {
        detached(way)
            .outcomes(vec![Some(Outcome::ResetAfterHeaders), None])
            .with_lease_expiry()
    });
}

#[test]
fn two_detached_requests_when_the_first_dispatch_fails_or_never_connects() {
    for fault in [CalloutFault::DispatchFails, CalloutFault::ConnectionFailure] {
        both(|way| detached(way).callout_fault(fault, 1).clients_may_leave());
    }
}

// Re-entry: what the inner pass of the re-entry listener answers. The key is never released —
// so never run twice — when an earlier attempt may have reached the app; a reply the inner pass
// made without reaching it is never stored, and releases the key.

fn reentering() -> Plan {
    Plan::detached(2, detached_order())
}

#[test]
fn two_detached_requests_when_the_inner_route_retried_a_reset_attempt() {
    for attempts in [2, 3] {
        let fault = CalloutFault::Inner(InnerPass::RetriedThenRefused { attempts });
        let coverage = all(&reentering().callout_fault(fault, 1).clients_may_leave());
        println!("attempts {attempts}: {coverage:?}");
    }
}

#[test]
fn two_detached_requests_when_the_inner_route_retried_a_reset_attempt_with_the_lease_expiring_anywhere(
) {
    let fault = CalloutFault::Inner(InnerPass::RetriedThenRefused { attempts: 2 });
    all(&reentering().callout_fault(fault, 1).with_lease_expiry());
}

#[test]
fn two_detached_requests_when_the_inner_pass_answers_itself() {
    for reply in [
        InnerReply::RBAC_DENIED,
        InnerReply::DIRECT_RESPONSE,
        InnerReply::LOCAL_RATE_LIMITED,
    ] {
        let fault = CalloutFault::Inner(InnerPass::LocalReply(reply));
        let coverage = all(&reentering().callout_fault(fault, 1).clients_may_leave());
        println!("{}: {coverage:?}", reply.details);
    }
}

#[test]
fn two_detached_requests_when_the_inner_route_times_out_with_the_lease_expiring_anywhere() {
    let fault = CalloutFault::Inner(InnerPass::Timeout);
    all(&reentering().callout_fault(fault, 1).with_lease_expiry());
}

#[test]
fn two_detached_requests_when_the_listener_does_not_mark_with_the_lease_expiring_anywhere() {
    let fault = CalloutFault::Inner(InnerPass::Unmarked);
    all(&reentering().callout_fault(fault, 1).with_lease_expiry());
}

// The router path with a route retry policy: the details are the last attempt's, the attempt
// count says there were more.

#[test]
fn two_requests_when_the_route_retried_a_reset_attempt_with_the_lease_expiring_anywhere() {
    for attempts in [2, 3] {
        let plan = Plan::concurrent(2, order("k"), created())
            .upstream(vec![
                Upstream::Fail(Failure::RetriedThenRefused { attempts }),
                Upstream::Respond(created()),
            ])
            .with_lease_expiry();
        let coverage = all(&plan);
        println!("attempts {attempts}: {coverage:?}");
    }
}
