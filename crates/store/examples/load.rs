//! What one store operation costs: starts `redis-server` and the service (release build
//! recommended: `make bench-store`), then measures, over HTTP/2 inside mutual TLS like an Envoy
//! cluster:
//! - one connection, one operation at a time: claim latency (p50, p99) — what a keyed request
//!   adds at the edge for its claim;
//! - 8 connections × 8 in flight: claim + finish pairs per second.
//!
//! Prints figures; asserts nothing about speed (speed targets live in BENCHMARKS.md). Counts are
//! bounded (LOAD_OPS, default 5000), so it stops by itself.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../tests/support/mod.rs"]
mod support;

use idemgate_core::record::{StoredBody, StoredResponse};
use idemgate_core::store::remote::End;
use idemgate_core::store::remote::{Request, Response};
use idemgate_core::time::Span;
use idemgate_core::{ClaimOutcome, FinishOutcome};
use std::time::{Duration, Instant};
use support::{claim, skey, Client, Redis, Service};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn claim_and_finish(client: &Client, name: &str, owner: u32) {
    let key = skey(name);
    match client.op(&claim(key, 1, owner)).await.1 {
        Response::Claim(ClaimOutcome::Forward { owner, .. }) => {
            let finish = Request::Finish {
                key,
                owner,
                ttl: Span::from_secs(600),
                end: End::Store(StoredResponse {
                    status: 201,
                    headers: vec![("content-type".into(), "application/json".into())],
                    body: StoredBody::Kept(vec![b'x'; 1024]),
                    seal: None,
                }),
                shard: None,
            };
            let (_, done) = client.op(&finish).await;
            assert_eq!(done, Response::Finish(FinishOutcome::Stored));
        }
        other => panic!("claim: {other:?}"),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let ops: u32 = std::env::var("LOAD_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let redis = Redis::start(false);
    let service = Service::start(&redis.url(), &["--op-timeout", "5s"]);
    let client = Client::connect(&service).await;
    // Warm up: connections, scripts cached on the node.
    for i in 0..200 {
        claim_and_finish(&client, &format!("warm-{i}"), i).await;
    }

    let mut latencies = Vec::with_capacity(ops as usize);
    for i in 0..ops {
        let request = claim(skey(&format!("seq-{i}")), 1, i);
        let started = Instant::now();
        let (_, answer) = client.op(&request).await;
        latencies.push(started.elapsed());
        assert!(matches!(
            answer,
            Response::Claim(ClaimOutcome::Forward { .. })
        ));
    }
    latencies.sort();
    println!(
        "claim, 1 connection, sequential: n={ops} p50={:?} p99={:?}",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99)
    );

    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(Client::connect(&service).await);
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..64u32 {
        let client = clients[worker as usize % clients.len()].clone();
        let per = ops / 64;
        tasks.push(tokio::spawn(async move {
            for i in 0..per {
                claim_and_finish(&client, &format!("par-{worker}-{i}"), worker << 20 | i).await;
            }
            per
        }));
    }
    let mut pairs = 0;
    for task in tasks {
        pairs += task.await.unwrap();
    }
    let took = started.elapsed();
    println!(
        "claim+finish, 8 connections x 8 in flight: {pairs} pairs in {took:?} = {:.0} pairs/s",
        f64::from(pairs) / took.as_secs_f64()
    );
}
