//! The service against a real `redis-server` (and a real three-primary Redis Cluster), driven over
//! HTTP/2 inside mutual TLS like an Envoy cluster would: exactly one claim wins under concurrency,
//! completions replay byte for byte, releases free the key, tokens are used once, records survive
//! a Redis crash with AOF, a stopped Redis gives a typed timeout and then recovery, and shutdown
//! finishes in-flight operations. Run with `make test-store` (needs `redis-server`; the tests start their own).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use hyper::StatusCode;
use idemgate_core::store::remote::End;
use idemgate_core::store::remote::{Failure, Request, Response};
use idemgate_core::time::{Span, UnixMillis};
use idemgate_core::{ClaimOutcome, ConsumeOutcome, FinishOutcome};
use std::time::{Duration, Instant};
use support::{
    claim, concurrent_claims, once_recovered, owner, skey, stored_response, Client, Cluster, Redis,
    Service, SLOW_OK,
};

async fn exactly_once_then_replay(service: &Service, tag: &str) {
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(Client::connect(service).await);
    }
    let names: Vec<String> = (0..6).map(|i| format!("{tag}-order-{i}")).collect();
    let keys: Vec<&str> = names.iter().map(String::as_str).collect();
    let n = 200;
    let counts = concurrent_claims(&clients, &keys, n).await;
    for (key, (forwards, conflicts)) in keys.iter().zip(&counts) {
        assert_eq!(
            (*forwards, *conflicts),
            (1, n as usize - 1),
            "key {key}: exactly one claim forwards"
        );
    }
    // The winners complete; every later claim, through any connection, replays byte for byte.
    for (k, name) in keys.iter().enumerate() {
        let winner = (0..n)
            .map(|i| owner((k as u32) << 16 | i))
            .collect::<Vec<_>>();
        let mut stored = 0;
        for candidate in winner {
            let finish = Request::Finish {
                key: skey(name),
                owner: candidate,
                ttl: Span::from_secs(3600),
                end: End::Store(stored_response(k as u8)),
                shard: None,
            };
            match clients[0].op(&finish).await {
                (StatusCode::OK, Response::Finish(FinishOutcome::Stored)) => stored += 1,
                (StatusCode::OK, Response::Finish(FinishOutcome::NotOwner)) => {}
                other => panic!("finish: {other:?}"),
            }
        }
        assert_eq!(stored, 1, "only the owner's completion lands");
        for client in &clients {
            let (status, answer) = client.op(&claim(skey(name), 7, 999_999)).await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(
                answer,
                Response::Claim(ClaimOutcome::Replay(stored_response(k as u8)))
            );
        }
        let (_, other_payload) = clients[1].op(&claim(skey(name), 8, 999_998)).await;
        assert_eq!(other_payload, Response::Claim(ClaimOutcome::Mismatch));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn concurrent_claims_forward_once_and_completions_replay_byte_identical() {
    let redis = Redis::start(false);
    let service = Service::start(&redis.url(), &["--op-timeout", SLOW_OK]);
    exactly_once_then_replay(&service, "single").await;
    // One Redis key per record, with the record's expiry as its TTL.
    let keys = redis.cli(&["--scan", "--pattern", "idemgate:*"]);
    assert_eq!(keys.lines().count(), 6, "{keys}");
    let first = keys.lines().next().unwrap();
    let ttl: i64 = redis.cli(&["pttl", first]).trim().parse().unwrap();
    assert!(ttl > 3_000_000 && ttl <= 3_600_000, "pttl {ttl}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn release_frees_the_key_and_a_stale_owner_changes_nothing() {
    let redis = Redis::start(false);
    let service = Service::start(&redis.url(), &["--op-timeout", SLOW_OK]);
    let client = Client::connect(&service).await;
    let key = skey("release-me");
    let (_, first) = client.op(&claim(key, 1, 1)).await;
    assert!(matches!(
        first,
        Response::Claim(ClaimOutcome::Forward { .. })
    ));
    let stale = Request::Finish {
        key,
        owner: owner(2),
        ttl: Span::from_secs(60),
        end: End::Release,
        shard: None,
    };
    assert_eq!(
        client.op(&stale).await.1,
        Response::Finish(FinishOutcome::NotOwner)
    );
    let (_, again) = client.op(&claim(key, 1, 3)).await;
    assert!(matches!(
        again,
        Response::Claim(ClaimOutcome::Conflict { .. })
    ));
    let release = Request::Finish {
        key,
        owner: owner(1),
        ttl: Span::from_secs(60),
        end: End::Release,
        shard: None,
    };
    assert_eq!(
        client.op(&release).await.1,
        Response::Finish(FinishOutcome::Released)
    );
    assert_eq!(
        redis.cli(&["dbsize"]).trim(),
        "0",
        "a release deletes the key"
    );
    let (_, retry) = client.op(&claim(key, 1, 4)).await;
    assert_eq!(
        retry,
        Response::Claim(ClaimOutcome::Forward {
            owner: owner(4),
            takeover: false
        })
    );
}

/// A late signed delivery's look-up (op `replay`) is read-only on the engine: nothing for an absent
/// key or a claim in flight (which it neither takes over nor releases), the stored answer once the
/// key completed with the same fingerprint, nothing for another fingerprint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn a_late_deliverys_look_up_writes_nothing() {
    let redis = Redis::start(false);
    let service = Service::start(&redis.url(), &["--op-timeout", SLOW_OK]);
    let client = Client::connect(&service).await;
    let key = skey("late-delivery");
    let look = |fingerprint: u8| Request::Replay {
        key,
        fingerprint: idemgate_core::request::fingerprint::Fingerprint([fingerprint; 32]),
    };
    let nothing = Response::Claim(ClaimOutcome::NotReplayed);
    assert_eq!(client.op(&look(1)).await, (StatusCode::OK, nothing.clone()));
    assert_eq!(
        redis.cli(&["dbsize"]).trim(),
        "0",
        "an absent key stays absent"
    );
    let (_, first) = client.op(&claim(key, 1, 1)).await;
    assert!(matches!(
        first,
        Response::Claim(ClaimOutcome::Forward { .. })
    ));
    assert_eq!(
        client.op(&look(1)).await.1,
        nothing,
        "in flight: nothing to replay"
    );
    // The claim is still its owner's: a second claim meets it.
    let (_, again) = client.op(&claim(key, 1, 2)).await;
    assert!(matches!(
        again,
        Response::Claim(ClaimOutcome::Conflict { .. })
    ));
    let stored = stored_response(7);
    let finish = Request::Finish {
        key,
        owner: owner(1),
        ttl: Span::from_secs(60),
        end: End::Store(stored.clone()),
        shard: None,
    };
    assert_eq!(
        client.op(&finish).await.1,
        Response::Finish(FinishOutcome::Stored)
    );
    assert_eq!(
        client.op(&look(1)).await.1,
        Response::Claim(ClaimOutcome::Replay(stored))
    );
    assert_eq!(
        client.op(&look(2)).await.1,
        nothing,
        "another body under the id"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn a_token_is_consumed_once() {
    let redis = Redis::start(false);
    let service = Service::start(&redis.url(), &["--op-timeout", SLOW_OK]);
    let client = Client::connect(&service).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let far = UnixMillis(now.as_millis() as u64 + 3_600_000);
    let mut tasks = Vec::new();
    for _ in 0..100 {
        let client = client.clone();
        let consume = Request::Consume {
            key: skey("token-1"),
            expires_at: far,
            payers: vec![],
            fill: None,
        };
        tasks.push(tokio::spawn(async move { client.op(&consume).await }));
    }
    let (mut consumed, mut used) = (0, 0);
    for task in tasks {
        match task.await.unwrap().1 {
            Response::Consume(ConsumeOutcome::Consumed) => consumed += 1,
            Response::Consume(ConsumeOutcome::AlreadyUsed) => used += 1,
            other => panic!("consume: {other:?}"),
        }
    }
    assert_eq!((consumed, used), (1, 99));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn records_survive_a_redis_crash_with_aof() {
    let mut redis = Redis::start(true);
    let service = Service::start(&redis.url(), &["--op-timeout", SLOW_OK]);
    let client = Client::connect(&service).await;
    let done = skey("aof-done");
    let flying = skey("aof-flying");
    assert!(matches!(
        client.op(&claim(done, 1, 1)).await.1,
        Response::Claim(ClaimOutcome::Forward { .. })
    ));
    let finish = Request::Finish {
        key: done,
        owner: owner(1),
        ttl: Span::from_secs(3600),
        end: End::Store(stored_response(9)),
        shard: None,
    };
    assert_eq!(
        client.op(&finish).await.1,
        Response::Finish(FinishOutcome::Stored)
    );
    assert!(matches!(
        client.op(&claim(flying, 1, 2)).await.1,
        Response::Claim(ClaimOutcome::Forward { .. })
    ));

    redis.crash_and_restart();

    // The service's connection reconnects by itself; the first calls may fail while it does.
    let replay = once_recovered(&client, &claim(done, 1, 3), "after restart").await;
    assert_eq!(
        replay,
        Response::Claim(ClaimOutcome::Replay(stored_response(9)))
    );
    assert!(matches!(
        client.op(&claim(flying, 1, 4)).await.1,
        Response::Claim(ClaimOutcome::Conflict { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn a_stopped_redis_gives_a_typed_timeout_then_recovery() {
    let redis = Redis::start(false);
    let service = Service::start(&redis.url(), &["--op-timeout", "300ms"]);
    let client = Client::connect(&service).await;
    assert_eq!(client.get("/readyz").await.0, StatusCode::OK);
    redis.stop();
    let started = Instant::now();
    let (status, answer) = client.op(&claim(skey("stopped"), 1, 1)).await;
    let took = started.elapsed();
    assert_eq!(
        (status, answer),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Response::Failed(Failure::Timeout)
        )
    );
    // The timeout is the service's (300 ms); the bound only rules out "never answered".
    assert!(took < Duration::from_secs(3), "answered after {took:?}");
    assert_eq!(
        client.get("/readyz").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(client.get("/healthz").await.0, StatusCode::OK);
    redis.cont();
    let answer = once_recovered(&client, &claim(skey("after-cont"), 1, 2), "after SIGCONT").await;
    assert!(matches!(
        answer,
        Response::Claim(ClaimOutcome::Forward { .. })
    ));
    assert_eq!(client.get("/readyz").await.0, StatusCode::OK);
    let metrics = client.get("/metrics").await.1;
    assert!(
        metrics
            .contains("idemgate_store_operations_total{op=\"claim\",outcome=\"remote_timeout\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("idemgate_store_operations_total{op=\"claim\",outcome=\"forward\"}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn shutdown_finishes_in_flight_operations() {
    let redis = Redis::start(false);
    let mut service = Service::start(&redis.url(), &["--op-timeout", "10s"]);
    let client = Client::connect(&service).await;
    // Hold an operation in flight: Redis is stopped while the claim is sent.
    redis.stop();
    let pending = {
        let client = client.clone();
        tokio::spawn(async move { client.op(&claim(skey("draining"), 1, 1)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    service.terminate();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !pending.is_finished(),
        "the operation is still waiting for Redis"
    );
    redis.cont();
    let (status, answer) = pending.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert!(matches!(
        answer,
        Response::Claim(ClaimOutcome::Forward { .. })
    ));
    let exit = service
        .wait_exit(Duration::from_secs(10))
        .expect("the service exits");
    assert!(exit.success(), "{exit:?}");
    // And what it answered really landed.
    assert_eq!(redis.cli(&["dbsize"]).trim(), "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn garbage_and_wrong_paths_get_typed_answers() {
    let redis = Redis::start(false);
    let service = Service::start(&redis.url(), &[]);
    let client = Client::connect(&service).await;
    let (status, body) = client.post("/v1/op", b"hello".to_vec()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        Response::decode(&body),
        Ok(Response::Failed(Failure::BadRequest))
    );
    assert_eq!(client.get("/v1/op").await.0, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(client.get("/nope").await.0, StatusCode::NOT_FOUND);
    // A value that is not a record is never overwritten.
    let key = skey("corrupt");
    let redis_key = {
        let hex: String = key.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
        format!("idemgate:{hex}")
    };
    redis.cli(&["set", &redis_key, "not-a-record"]);
    let (status, answer) = client.op(&claim(key, 1, 1)).await;
    assert_eq!(
        (status, answer),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Response::Failed(Failure::Corrupt)
        )
    );
    assert_eq!(redis.cli(&["get", &redis_key]).trim(), "not-a-record");
}

#[test]
#[ignore = "needs redis-server: make test-store"]
fn bad_configuration_or_no_redis_exits_non_zero_with_a_message() {
    let bin = env!("CARGO_BIN_EXE_idemgate-store");
    let out = std::process::Command::new(bin)
        .args(["--op-timeout", "soon"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--op-timeout"));
    let port = support::free_port(false);
    let out = std::process::Command::new(bin)
        .args(["--redis", &format!("redis://127.0.0.1:{port}")])
        .args(["--connect-timeout", "500ms", "--plaintext-unauthenticated"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot connect"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn a_redis_cluster_gives_the_same_exactly_once_result() {
    let cluster = Cluster::start();
    let service = Service::start(&cluster.urls(), &["--cluster", "--op-timeout", SLOW_OK]);
    exactly_once_then_replay(&service, "cluster").await;
    // The records are spread over the primaries (six SHA-256 keys over three nodes).
    let per_node: Vec<usize> = cluster
        .nodes
        .iter()
        .map(|n| n.cli(&["dbsize"]).trim().parse().unwrap())
        .collect();
    assert_eq!(per_node.iter().sum::<usize>(), 6, "{per_node:?}");
    assert!(
        per_node.iter().filter(|n| **n > 0).count() >= 2,
        "{per_node:?}"
    );
    let client = Client::connect(&service).await;
    assert_eq!(client.get("/readyz").await.0, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn two_service_replicas_share_one_redis_and_forward_once() {
    let redis = Redis::start(false);
    let a = Service::start(&redis.url(), &["--op-timeout", SLOW_OK]);
    // One replica on a single worker thread (`--workers 1`, as the fleet bench runs it): the same
    // exactly-once result under the same concurrency.
    let b = Service::start(&redis.url(), &["--op-timeout", SLOW_OK, "--workers", "1"]);
    // Two connections to each replica, claims alternating between them.
    let clients = vec![
        Client::connect(&a).await,
        Client::connect(&b).await,
        Client::connect(&a).await,
        Client::connect(&b).await,
    ];
    let keys = ["replicas-1", "replicas-2", "replicas-3"];
    let counts = concurrent_claims(&clients, &keys, 300).await;
    assert_eq!(counts, vec![(1, 299); 3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn a_service_killed_during_a_claim_then_restarted_forwards_once() {
    let redis = Redis::start(false);
    let service = Service::start(&redis.url(), &["--op-timeout", "10s"]);
    let client = Client::connect(&service).await;
    let key = skey("killed-mid-claim");
    // The claim reaches the service and waits on a stopped Redis; the service dies under it.
    redis.stop();
    let lost = {
        let client = client.clone();
        tokio::spawn(async move {
            let request = claim(key, 1, 1).encode();
            let mut send = client;
            send.try_post("/v1/op", request).await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(service); // SIGKILL, by PID
    redis.cont();
    let service = Service::start(&redis.url(), &["--op-timeout", SLOW_OK]);
    // The filter that sent it got no answer: for it, a store failure (its failure mode answers).
    assert!(lost.await.unwrap().is_err(), "the killed service answered");
    // Retries through the new service. The lost claim never wrote (its read was still queued in
    // the stopped Redis when the service died), so exactly one retry forwards — once, in three
    // rounds of 50 concurrent retries (the 30 s lease keeps a take-over out of this test).
    let client = Client::connect(&service).await;
    let mut forwards = 0;
    for round in 0..3u32 {
        let mut tasks = Vec::new();
        for i in 0..50u32 {
            let client = client.clone();
            tasks.push(tokio::spawn(async move {
                client.op(&claim(key, 1, 100 + round * 100 + i)).await
            }));
        }
        for task in tasks {
            match task.await.unwrap() {
                (StatusCode::OK, Response::Claim(ClaimOutcome::Forward { .. })) => forwards += 1,
                (StatusCode::OK, Response::Claim(ClaimOutcome::Conflict { .. })) => {}
                other => panic!("retry: {other:?}"),
            }
        }
    }
    assert_eq!(forwards, 1);
}
