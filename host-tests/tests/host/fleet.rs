//! A fleet as stories: two simulated Envoys whose filters keep their records in the
//! remote store (`store: {"kind": "remote"}`) and share nothing but one `StoreService` — the
//! in-process model of the store service, deciding by the core's own `remote::apply`. Each Envoy
//! draws its own entropy (owner tokens differ); the store decides on its own clock, moved with
//! theirs.

use crate::support::{created, order};
use idemgate_core::store::remote;
use idemgate_core::{ClaimOutcome, FinishOutcome};
use idemgate_host_tests::envoy::{CalloutFault, Clock};
use idemgate_host_tests::scenario::{Abort, Envoy, Roundtrip, StoreService, RECORD_SECRET};
use std::sync::Arc;
use std::time::Duration;

/// The remote store behind the cluster "store" (lease 60 s by default).
pub const REMOTE: &str =
    r#"{"capacity": 64, "store": {"kind": "remote", "cluster": "store", "timeout": "2s"}}"#;

pub struct Fleet {
    pub a: Envoy,
    pub b: Envoy,
    pub store: Arc<StoreService>,
    clock: Clock,
}

impl Fleet {
    pub fn start() -> Fleet {
        let clock = Clock::default();
        let store = Arc::new(StoreService::new(clock.clone()));
        let envoy = |seed: u64| {
            Envoy::builder()
                .config(REMOTE)
                .env("IDEMGATE_RECORD_SECRET", RECORD_SECRET)
                .seed(seed)
                .shared_cluster("store", store.clone())
                .start()
                .unwrap()
        };
        Fleet {
            a: envoy(0xa),
            b: envoy(0xb),
            store,
            clock,
        }
    }

    /// Moves every clock of the fleet (both Envoys' and the store's).
    pub fn advance(&self, by: Duration) {
        self.a.advance(by).unwrap();
        self.b.advance(by).unwrap();
        self.clock.advance(by);
    }

    pub fn executions(&self) -> usize {
        self.a.upstream_calls().len() + self.b.upstream_calls().len()
    }

    /// The store operations decided so far, by kind: (claims, finishes).
    pub fn ops(&self) -> (Vec<ClaimOutcome>, Vec<FinishOutcome>) {
        let mut claims = Vec::new();
        let mut finishes = Vec::new();
        for (_, response) in self.store.log() {
            match response {
                remote::Response::Claim(outcome) => claims.push(outcome),
                remote::Response::Finish(outcome) => finishes.push(outcome),
                _ => {}
            }
        }
        (claims, finishes)
    }
}

/// Answers `envoy`'s store callouts until none is pending (a resent finish is a new one); with
/// none pending, the queue's delay passes once, so finishes queued by then are sent.
pub fn settle(envoy: &Envoy) {
    for _ in 0..8 {
        if envoy.worker(0).pending_callouts().is_empty() {
            envoy.advance(BATCH_DELAY).unwrap();
            if envoy.worker(0).pending_callouts().is_empty() {
                return;
            }
        }
        envoy.worker(0).answer_callouts().unwrap();
    }
    panic!("store callouts keep coming");
}

pub const BATCH_DELAY: Duration = Duration::from_millis(remote::BATCH_DELAY.as_millis());

pub fn is_created(exchange: &Roundtrip) -> bool {
    exchange
        .answer()
        .is_some_and(|a| a.status == 201 && a.body == br#"{"id":7}"#)
}

pub fn is_replay(exchange: &Roundtrip) -> bool {
    is_created(exchange) && exchange.answer().unwrap().header("idempotent-replayed") == Some("true")
}

pub fn status(exchange: &Roundtrip) -> Option<u16> {
    exchange.answer().map(|a| a.status)
}

#[test]
fn a_request_to_one_envoy_and_its_retry_to_the_other_run_once() {
    let fleet = Fleet::start();
    let first = fleet.a.worker(0).send(order("k")).unwrap();
    assert!(!first.reached_upstream(), "paused on the claim");
    let pending = fleet.a.worker(0).pending_callouts();
    assert_eq!(pending.len(), 1);
    assert_eq!(
        (
            pending[0].method(),
            pending[0].path(),
            pending[0].cluster.as_str()
        ),
        ("POST", "/v1/op", "store")
    );
    settle(&fleet.a);
    assert!(first.reached_upstream());

    // Meanwhile the retry reaches the other Envoy: the key is held in the store.
    let early = fleet.b.worker(0).send(order("k")).unwrap();
    settle(&fleet.b);
    assert_eq!(status(&early), Some(409));
    assert!(!early.reached_upstream());

    first.respond(created()).unwrap();
    assert!(is_created(&first), "the client gets its answer at once");
    settle(&fleet.a); // the finish lands

    let retry = fleet.b.worker(0).send(order("k")).unwrap();
    settle(&fleet.b);
    assert!(is_replay(&retry), "{:?}", retry.answer());
    assert!(!retry.reached_upstream());
    assert_eq!(fleet.executions(), 1);
    let (claims, finishes) = fleet.ops();
    assert_eq!(claims.len(), 3);
    assert!(
        matches!(claims[1], ClaimOutcome::Conflict { .. }),
        "{claims:?}"
    );
    assert!(matches!(claims[2], ClaimOutcome::Replay(_)), "{claims:?}");
    assert_eq!(finishes.len(), 1);
    assert!(fleet.a.anomalies().is_empty() && fleet.b.anomalies().is_empty());
}

/// A client that leaves while its claim is asked of the store: the request's machine (kept
/// until the answer comes) releases the claim the store grants, so its retry runs at once on
/// either Envoy instead of waiting out the lease — and the request itself never ran.
#[test]
fn a_client_gone_while_its_claim_is_asked_leaves_no_claim_behind() {
    let fleet = Fleet::start();
    let gone = fleet
        .a
        .worker(0)
        .send(order("k").abort_after(Abort::AfterRequest))
        .unwrap();
    assert_eq!(fleet.a.worker(0).pending_callouts().len(), 1, "the claim");
    settle(&fleet.a);
    assert!(!gone.reached_upstream());
    let (claims, finishes) = fleet.ops();
    assert!(
        matches!(claims[..], [ClaimOutcome::Forward { .. }]),
        "{claims:?}"
    );
    assert_eq!(finishes, [FinishOutcome::Released]);

    let retry = fleet.b.worker(0).send(order("k")).unwrap();
    settle(&fleet.b);
    assert!(retry.reached_upstream(), "{:?}", retry.answer());
    retry.respond(created()).unwrap();
    settle(&fleet.b);
    assert!(is_created(&retry));
    assert_eq!(fleet.executions(), 1);
    assert!(fleet.a.anomalies().is_empty() && fleet.b.anomalies().is_empty());
}

#[test]
fn a_lost_reply_to_a_claim_fails_that_request_and_nothing_runs_twice() {
    for fault in [
        CalloutFault::ResetAfterHeaders,
        CalloutFault::ResetBeforeResponse,
    ] {
        let fleet = Fleet::start();
        fleet.a.faults().callout("store", fault, 1);
        let first = fleet.a.worker(0).send(order("k")).unwrap();
        settle(&fleet.a);
        // The store applied the claim; the filter never learnt it: the failure mode (reject).
        let (claims, _) = fleet.ops();
        assert!(
            matches!(claims[..], [ClaimOutcome::Forward { .. }]),
            "{claims:?}"
        );
        assert!(!first.reached_upstream(), "{fault:?}");
        let failed = status(&first).unwrap_or_default();
        assert!(failed >= 500, "{fault:?}: {:?}", first.answer());

        // Its retry, on either Envoy, finds the key held until the lease ends.
        for envoy in [&fleet.a, &fleet.b] {
            let retry = envoy.worker(0).send(order("k")).unwrap();
            settle(envoy);
            assert_eq!(status(&retry), Some(409), "{fault:?}");
        }
        fleet.advance(Duration::from_secs(61));
        let late = fleet.b.worker(0).send(order("k")).unwrap();
        settle(&fleet.b);
        assert!(late.reached_upstream(), "the expired lease is taken over");
        late.respond(created()).unwrap();
        settle(&fleet.b);
        assert!(is_created(&late));
        assert_eq!(fleet.executions(), 1, "{fault:?}: the lost claim never ran");
        let again = fleet.a.worker(0).send(order("k")).unwrap();
        settle(&fleet.a);
        assert!(is_replay(&again), "{fault:?}: {:?}", again.answer());
    }
}

#[test]
fn a_finish_whose_reply_is_lost_is_sent_again_and_lands() {
    for fault in [
        CalloutFault::ResetAfterHeaders,
        CalloutFault::ResetBeforeResponse,
        CalloutFault::Status(503),
    ] {
        let fleet = Fleet::start();
        let first = fleet.a.worker(0).send(order("k")).unwrap();
        settle(&fleet.a);
        fleet.a.faults().callout("store", fault, 1);
        first.respond(created()).unwrap();
        assert!(is_created(&first));
        settle(&fleet.a);
        let (_, finishes) = fleet.ops();
        // A reset lost a reply to a finish the store applied: the resend finds it done (not
        // owner); a 503 never reached it: the resend lands.
        let expected = if matches!(fault, CalloutFault::Status(_)) {
            1
        } else {
            2
        };
        assert_eq!(finishes.len(), expected, "{fault:?}: {finishes:?}");
        let retry = fleet.b.worker(0).send(order("k")).unwrap();
        settle(&fleet.b);
        assert!(is_replay(&retry), "{fault:?}: {:?}", retry.answer());
        assert_eq!(fleet.executions(), 1);
    }
}

// Interleavings across the fleet: each request on its own simulated Envoy, one key, one
// `StoreService`; every store operation (claim, finish) is a step of the schedule, as is each
// shared-data call, each body chunk and, with clients that may leave, "the client goes away".
// Checked by the explorer's invariants, reading the store's decisions for the records.

use crate::support::filter;
use idemgate_host_tests::explore::{every_schedule, sampled_schedules, Coverage, Plan};

fn all(plan: &Plan) -> Coverage {
    let coverage = every_schedule(plan, &filter(), 50_000)
        .unwrap()
        .unwrap_or_else(|v| panic!("{v}"));
    assert!(coverage.exhaustive, "{coverage:?}");
    println!("{coverage:?}");
    coverage
}

#[test]
fn a_fleet_two_envoys_one_key_every_interleaving() {
    let coverage = all(&Plan::fleet(2, order("k"), created()));
    assert!(coverage.schedules > 1, "{coverage:?}");
}

#[test]
fn a_fleet_with_clients_leaving_every_interleaving() {
    all(&Plan::fleet(2, order("k"), created()).clients_may_leave());
}

#[test]
fn a_fleet_with_a_lost_claim_reply_and_clients_leaving_every_interleaving() {
    for fault in [
        CalloutFault::ResetAfterHeaders,
        CalloutFault::ResetBeforeResponse,
    ] {
        all(&Plan::fleet(2, order("k"), created())
            .callout_fault(fault, 1)
            .clients_may_leave());
    }
}

#[test]
fn a_fleet_with_a_lost_claim_reply_and_the_lease_expiring_sampled() {
    let plan = Plan::fleet(2, order("k"), created())
        .callout_fault(CalloutFault::ResetAfterHeaders, 1)
        .clients_may_leave()
        .with_lease_expiry();
    let runs = std::env::var("IDEMGATE_EXPLORE_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let coverage = sampled_schedules(&plan, &filter(), 0x1de3, runs)
        .unwrap()
        .unwrap_or_else(|v| panic!("{v}"));
    println!("{coverage:?}");
}
