//! The fleet's finishes batched (op 7): a worker's finishes wait up to the core's delay (10 ms)
//! and go to the store service in one callout. Counted at Envoy's cluster for the store
//! (`upstream_rq_total`): K fresh requests at once through one worker cost K claims and as many
//! callouts as batches the filter counts (`store.finish_batches`), fewer than K — one when their
//! answers come within the delay — instead of 2K. A retry sent to the other Envoy right after the
//! answer waits for the finish (`in_flight.wait`) and gets the replay, not a 409.

use super::backend::{Backend, Engine, Store, RECORD_SECRET};
use super::envoys::config;
use crate::client::Request;
use crate::harness::{Envoy, Setup};
use crate::upstream::Upstream;
use std::thread;

/// Fresh requests sent at once.
const K: usize = 16;

fn envoy(filter: &str, upstream: &Upstream, store: &Store) -> Envoy {
    let mut setup = Setup::new(filter, upstream.port);
    setup.clusters = store.cluster();
    // One worker: one queue of finishes, so the count below is the queue rule's alone.
    setup.concurrency = 1;
    setup
        .vm_env
        .push(("IDEMGATE_RECORD_SECRET".into(), RECORD_SECRET.into()));
    Envoy::start(&setup)
}

fn store_callouts(envoy: &Envoy) -> u64 {
    envoy
        .stat("cluster.idemgate_store.upstream_rq_total")
        .unwrap_or(0)
}

fn a_workers_fresh_requests_take_fewer_than_two_callouts_each(engine: Engine) {
    let backend = Backend::start(engine);
    let store = Store::start(&backend);
    let upstream = Upstream::start();
    let filter = config(r#", "in_flight": { "wait": "3s" }"#);
    let a = envoy(&filter, &upstream, &store);
    let b = envoy(&filter, &upstream, &store);
    let before = store_callouts(&a);
    // The upstream holds each request 300 ms, so all K are claimed before any is answered and
    // their answers come back together.
    let sent: Vec<_> = (0..K)
        .map(|i| {
            let port = a.port;
            thread::spawn(move || {
                let request = Request::post("/orders", &format!("batch-{i}")).script("delay=300");
                let answer = request.send(port);
                (request, answer)
            })
        })
        .collect();
    let answered: Vec<_> = sent.into_iter().map(|t| t.join().unwrap()).collect();
    for (request, answer) in &answered {
        assert_eq!(answer.status, 201, "{}", answer.text());
        // Right after the answer, through the other Envoy: the replay (it waits for the finish
        // still queued or travelling), never a 409 and never a second execution.
        let retry = request.send(b.port);
        assert_eq!(retry.status, 201, "{}", retry.text());
        assert!(retry.replayed(), "the first's answer, replayed");
        assert_eq!(retry.body, answer.body);
    }
    assert_eq!(upstream.total(), K, "each ran once");
    // The filter counts a finish when the batch's answer comes back, which the replays above
    // need not wait for.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while a.counter("stored") < K as u64 && std::time::Instant::now() < deadline {
        thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(a.counter("stored"), K as u64, "{}", a.log_text());
    let batches = a.counter("store.finish_batches");
    assert_eq!(
        a.counter("store.finishes_batched"),
        K as u64,
        "no finish sent twice"
    );
    assert_eq!(a.counter("store_error"), 0);
    let callouts = store_callouts(&a) - before;
    // Exactly the queue rule's count: K claims, one callout per batch, nothing else.
    assert_eq!(callouts, K as u64 + batches);
    assert!(
        (1..K as u64).contains(&batches),
        "{batches} batches for {K} finishes: fewer callouts than 2K"
    );
    println!(
        "{engine:?}: {K} fresh requests, {callouts} store callouts ({batches} batch(es)): {:.3} per request",
        callouts as f64 / K as f64
    );
}
on_every_engine!(a_workers_fresh_requests_take_fewer_than_two_callouts_each);
