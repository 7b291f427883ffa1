//! A worker's finishes batched (op 7) on the remote store: they wait in the worker's queue up to
//! the core's delay and go in one callout; each finish in it keeps the resend rule of a single
//! one — a batch lost or answered late is sent again and what landed is found *not owner*, a
//! failure inside the answer sends that finish again alone — and what a lost finish means is
//! unchanged: a duplicate meanwhile gets 409 (then the replay), and a worker's VM gone with
//! finishes queued leaves their claims in flight until their leases end.

use crate::fleet::{is_created, is_replay, settle, status, Fleet, BATCH_DELAY, REMOTE};
use crate::support::{created, order};
use idemgate_core::store::remote::{Failure, Incoming, Response};
use idemgate_core::FinishOutcome;
use idemgate_host_tests::envoy::{CalloutFault, CalloutRequest, Clock, Outcome, Service};
use idemgate_host_tests::scenario::{Envoy, Roundtrip, StoreService, RECORD_SECRET};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `n` requests with keys of their own through `envoy`'s worker 0, claimed and answered by the
/// upstream: their finishes queued.
fn answered(envoy: &Envoy, n: usize) -> Vec<Roundtrip> {
    let sent: Vec<Roundtrip> = (0..n)
        .map(|i| envoy.worker(0).send(order(&format!("k{i}"))).unwrap())
        .collect();
    envoy.worker(0).answer_callouts().unwrap();
    for exchange in &sent {
        assert!(exchange.reached_upstream());
        exchange.respond(created()).unwrap();
        assert!(is_created(exchange), "the client gets its answer at once");
    }
    sent
}

fn finishes_in(callout: &CalloutRequest) -> usize {
    match Incoming::decode(&callout.body) {
        Ok(Incoming::Finishes(finishes)) => finishes.len(),
        other => panic!("not a batch of finishes: {other:?}"),
    }
}

#[test]
fn a_workers_finishes_wait_for_the_delay_and_go_in_one_callout() {
    let fleet = Fleet::start();
    answered(&fleet.a, 3);
    assert!(
        fleet.a.worker(0).pending_callouts().is_empty(),
        "the finishes wait in the queue"
    );
    fleet
        .a
        .advance(BATCH_DELAY - Duration::from_millis(1))
        .unwrap();
    assert!(fleet.a.worker(0).pending_callouts().is_empty());
    fleet.a.advance(Duration::from_millis(1)).unwrap();
    let pending = fleet.a.worker(0).pending_callouts();
    assert_eq!(pending.len(), 1, "one callout for the three finishes");
    assert_eq!(finishes_in(&pending[0]), 3);
    settle(&fleet.a);
    let (claims, finishes) = fleet.ops();
    assert_eq!(claims.len(), 3);
    assert_eq!(finishes, [FinishOutcome::Stored; 3]);
    assert_eq!(fleet.a.callouts().len(), 4, "3 claims and 1 batch");
    assert_eq!(fleet.a.metric("idemgate.store.finish_batches"), Some(1));
    assert_eq!(fleet.a.metric("idemgate.store.finishes_batched"), Some(3));
    assert_eq!(fleet.a.metric("idemgate.stored"), Some(3));
    for i in 0..3 {
        let retry = fleet.b.worker(0).send(order(&format!("k{i}"))).unwrap();
        settle(&fleet.b);
        assert!(is_replay(&retry), "{:?}", retry.answer());
    }
    assert_eq!(fleet.executions(), 3);
}

#[test]
fn a_duplicate_while_the_finish_is_queued_gets_409_then_the_replay() {
    let fleet = Fleet::start();
    answered(&fleet.a, 1);
    let early = fleet.b.worker(0).send(order("k0")).unwrap();
    fleet.b.worker(0).answer_callouts().unwrap();
    assert_eq!(status(&early), Some(409), "the claim is in flight");
    let answer = early.answer().unwrap();
    assert!(answer.header("retry-after").is_some(), "{answer:?}");
    assert!(!early.reached_upstream());
    settle(&fleet.a); // the tick sends the queued finish; it lands
    let retry = fleet.b.worker(0).send(order("k0")).unwrap();
    settle(&fleet.b);
    assert!(is_replay(&retry), "{:?}", retry.answer());
    assert_eq!(fleet.executions(), 1);
}

#[test]
fn a_batch_lost_or_answered_late_is_sent_again_and_what_landed_is_not_owner() {
    for fault in [
        CalloutFault::ResetAfterHeaders,
        CalloutFault::ResetBeforeResponse,
        CalloutFault::Timeout,
        CalloutFault::Status(503),
    ] {
        let fleet = Fleet::start();
        answered(&fleet.a, 3);
        fleet.a.faults().callout("store", fault, 1);
        settle(&fleet.a);
        let (_, finishes) = fleet.ops();
        // A reply lost after the store applied the batch: the resend finds each finish done; a
        // 503 never reached the store: the resend lands each.
        let expected: Vec<FinishOutcome> = match fault {
            CalloutFault::Status(_) => vec![FinishOutcome::Stored; 3],
            _ => [[FinishOutcome::Stored; 3], [FinishOutcome::NotOwner; 3]].concat(),
        };
        assert_eq!(finishes, expected, "{fault:?}");
        assert_eq!(fleet.a.metric("idemgate.store.finish_batches"), Some(2));
        for i in 0..3 {
            let retry = fleet.b.worker(0).send(order(&format!("k{i}"))).unwrap();
            settle(&fleet.b);
            assert!(is_replay(&retry), "{fault:?}: {:?}", retry.answer());
        }
        assert_eq!(fleet.executions(), 3);
    }
}

/// The store model, with its first batch's answer spoiled: one finish's answer replaced by a
/// failure (`whole: false`), or the whole body cut short (`whole: true`).
struct Spoiling {
    store: Arc<StoreService>,
    whole: bool,
    spoiled: AtomicBool,
}

impl Service for Spoiling {
    fn serve(&self, request: &CalloutRequest) -> Outcome {
        let outcome = self.store.serve(request);
        let batch = matches!(Incoming::decode(&request.body), Ok(Incoming::Finishes(_)));
        let Outcome::Answer(mut answer) = outcome else {
            return outcome;
        };
        if batch && !self.spoiled.swap(true, Ordering::SeqCst) {
            if self.whole {
                answer.body.truncate(answer.body.len() / 2);
            } else if let Ok(Response::Finishes(mut answers)) = Response::decode(&answer.body) {
                answers[1] = Response::Failed(Failure::Timeout);
                answer.body = Response::Finishes(answers).encode();
            }
        }
        Outcome::Answer(answer)
    }

    fn shared_state(&self) -> bool {
        true
    }
}

#[test]
fn a_batch_answered_partly_garbage_sends_again_what_got_no_decision() {
    for whole in [false, true] {
        let store = Arc::new(StoreService::new(Clock::default()));
        let envoy = Envoy::builder()
            .config(REMOTE)
            .env("IDEMGATE_RECORD_SECRET", RECORD_SECRET)
            .cluster(
                "store",
                Spoiling {
                    store: store.clone(),
                    whole,
                    spoiled: AtomicBool::new(false),
                },
            )
            .start()
            .unwrap();
        answered(&envoy, 3);
        envoy.advance(BATCH_DELAY).unwrap();
        let first = envoy.worker(0).pending_callouts();
        assert_eq!(first.len(), 1);
        envoy.worker(0).answer_callout(first[0].token).unwrap();
        let again = envoy.worker(0).pending_callouts();
        assert_eq!(again.len(), 1, "sent again at once");
        // A spoiled answer for one finish: that finish alone again; an unreadable answer: all.
        assert_eq!(finishes_in(&again[0]), if whole { 3 } else { 1 });
        settle(&envoy);
        let finishes: Vec<FinishOutcome> = store
            .log()
            .into_iter()
            .filter_map(|(_, response)| match response {
                Response::Finish(outcome) => Some(outcome),
                _ => None,
            })
            .collect();
        let expected = match whole {
            false => vec![FinishOutcome::Stored; 3]
                .into_iter()
                .chain([FinishOutcome::NotOwner])
                .collect::<Vec<_>>(),
            true => [[FinishOutcome::Stored; 3], [FinishOutcome::NotOwner; 3]].concat(),
        };
        assert_eq!(finishes, expected, "whole: {whole}");
        for i in 0..3 {
            let retry = envoy.worker(0).send(order(&format!("k{i}"))).unwrap();
            settle(&envoy);
            assert!(is_replay(&retry), "{:?}", retry.answer());
        }
    }
}

#[test]
fn a_batch_an_old_service_refuses_is_counted_and_its_claims_wait_for_their_leases() {
    let store = Arc::new(StoreService::new(Clock::default()));
    // A service that predates batches: it reads single operations only.
    let old = {
        let store = store.clone();
        move |request: &CalloutRequest| match Incoming::decode(&request.body) {
            Ok(Incoming::Finishes(_)) => {
                let mut answer = idemgate_host_tests::envoy::Answer::new(400);
                answer.body = Response::Failed(Failure::BadRequest).encode();
                Outcome::Answer(answer)
            }
            _ => store.serve(request),
        }
    };
    let envoy = Envoy::builder()
        .config(REMOTE)
        .env("IDEMGATE_RECORD_SECRET", RECORD_SECRET)
        .cluster("store", old)
        .start()
        .unwrap();
    answered(&envoy, 2);
    settle(&envoy);
    assert_eq!(
        envoy.callouts().len(),
        3,
        "2 claims, 1 batch: not sent again"
    );
    assert_eq!(envoy.metric("idemgate.store.finish_batch_refused"), Some(1));
    assert_eq!(envoy.metric("idemgate.store_error"), Some(2));
    assert!(envoy
        .logs()
        .iter()
        .any(|l| l.message.contains("must be upgraded before the filters")));
    let retry = envoy.worker(0).send(order("k0")).unwrap();
    settle(&envoy);
    assert_eq!(status(&retry), Some(409), "in flight until the lease ends");
}

#[test]
fn a_workers_vm_gone_with_finishes_queued_leaves_their_claims_to_the_lease() {
    let fleet = Fleet::start();
    answered(&fleet.a, 1);
    fleet.a.restart_worker(0).unwrap();
    fleet.a.advance(BATCH_DELAY).unwrap();
    assert!(fleet.a.worker(0).pending_callouts().is_empty());
    assert!(
        fleet.ops().1.is_empty(),
        "the queued finish went with the VM"
    );
    let early = fleet.b.worker(0).send(order("k0")).unwrap();
    settle(&fleet.b);
    assert_eq!(status(&early), Some(409), "the claim holds its lease");
    fleet.advance(Duration::from_secs(61));
    let late = fleet.b.worker(0).send(order("k0")).unwrap();
    settle(&fleet.b);
    assert!(late.reached_upstream(), "the expired lease is taken over");
    late.respond(created()).unwrap();
    settle(&fleet.b);
    let again = fleet.a.worker(0).send(order("k0")).unwrap();
    settle(&fleet.a);
    assert!(is_replay(&again), "{:?}", again.answer());
}
