//! `--engine redis+postgres` against a real `redis-server` and a real PostgreSQL (both started by
//! the tests on free ports, killed by PID): one forward per key under concurrency, replays byte for
//! byte (answered by Redis), `FLUSHALL` in the middle of traffic never forwards a second time,
//! a killed or stopped Redis leaves PostgreSQL answering alone, and a stopped or killed
//! PostgreSQL fails every operation the typed way — even for keys Redis holds — then recovers.
//! Run with `make test-store` (needs `redis-server` and PostgreSQL's `initdb`/`postgres`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use hyper::StatusCode;
use idemgate_core::store::remote::End;
use idemgate_core::store::remote::{Failure, Request, Response};
use idemgate_core::time::Span;
use idemgate_core::{ClaimOutcome, FinishOutcome};
use std::time::{Duration, Instant};
use support::postgres::Postgres;
use support::{claim, owner, skey, stored_response, Client, Redis, Service, SLOW_OK};

fn start(redis: &Redis, postgres: &Postgres, op_timeout: &str) -> Service {
    let url = postgres.url();
    Service::start(
        &redis.url(),
        &[
            "--engine",
            "redis+postgres",
            "--postgres",
            &url,
            "--op-timeout",
            op_timeout,
        ],
    )
}

async fn clients(service: &Service, n: usize) -> Vec<Client> {
    let mut clients = Vec::new();
    for _ in 0..n {
        clients.push(Client::connect(service).await);
    }
    clients
}

/// What one claim got.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Tally {
    forwards: usize,
    conflicts: usize,
    replays: usize,
}

/// `n` concurrent claims of each key (owners `k << 16 | first..first+n`) over `clients`; anything
/// but a forward, a conflict or the key's own replay fails the test.
async fn claims(clients: &[Client], keys: &[String], first: u32, n: u32) -> Vec<Tally> {
    let mut tasks = Vec::new();
    for (k, name) in keys.iter().enumerate() {
        for i in first..first + n {
            let client = clients[i as usize % clients.len()].clone();
            let request = claim(skey(name), 7, (k as u32) << 16 | i);
            tasks.push((k, tokio::spawn(async move { client.op(&request).await })));
        }
    }
    let mut tally = vec![Tally::default(); keys.len()];
    for (k, task) in tasks {
        match task.await.unwrap() {
            (StatusCode::OK, Response::Claim(ClaimOutcome::Forward { .. })) => {
                tally[k].forwards += 1
            }
            (StatusCode::OK, Response::Claim(ClaimOutcome::Conflict { retry_after })) => {
                assert!(retry_after > Span(0) && retry_after <= Span::from_secs(30));
                tally[k].conflicts += 1
            }
            (StatusCode::OK, Response::Claim(ClaimOutcome::Replay(response))) => {
                assert_eq!(
                    response,
                    stored_response(k as u8),
                    "key {k} replays its own"
                );
                tally[k].replays += 1
            }
            other => panic!("unexpected answer to a claim: {other:?}"),
        }
    }
    tally
}

/// Every owner the claims of key `k` used, tried as the finisher: exactly one is the owner.
async fn finish_by_whoever_owns(client: &Client, keys: &[String], k: usize, owners: u32) -> usize {
    let mut stored = 0;
    for i in 0..owners {
        let finish = Request::Finish {
            key: skey(&keys[k]),
            owner: owner((k as u32) << 16 | i),
            ttl: Span::from_secs(3600),
            end: End::Store(stored_response(k as u8)),
            shard: None,
        };
        match client.op(&finish).await {
            (StatusCode::OK, Response::Finish(FinishOutcome::Stored)) => stored += 1,
            (StatusCode::OK, Response::Finish(FinishOutcome::NotOwner)) => {}
            other => panic!("finish: {other:?}"),
        }
    }
    stored
}

fn names(tag: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{tag}-order-{i}")).collect()
}

async fn replay_of(client: &Client, name: &str, k: usize) -> (StatusCode, Response) {
    let _ = k;
    client.op(&claim(skey(name), 7, 999_999)).await
}

fn keyspace_hits(redis: &Redis) -> u64 {
    let info = redis.cli(&["info", "stats"]);
    info.lines()
        .find_map(|l| l.strip_prefix("keyspace_hits:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("keyspace_hits in INFO stats")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and PostgreSQL: make test-store"]
async fn concurrent_claims_forward_once_and_redis_answers_replays_byte_identical() {
    let redis = Redis::start(false);
    let postgres = Postgres::start();
    let service = start(&redis, &postgres, SLOW_OK);
    let clients = clients(&service, 4).await;
    let keys = names("tiered", 6);
    let n = 200;
    let tally = claims(&clients, &keys, 0, n).await;
    for (key, t) in keys.iter().zip(&tally) {
        assert_eq!(
            (t.forwards, t.conflicts),
            (1, n as usize - 1),
            "key {key}: exactly one claim forwards"
        );
    }
    for k in 0..keys.len() {
        assert_eq!(finish_by_whoever_owns(&clients[0], &keys, k, n).await, 1);
    }
    // The completions were written through: Redis answers the replays, byte for byte.
    let hits = keyspace_hits(&redis);
    for (k, name) in keys.iter().enumerate() {
        for client in &clients {
            assert_eq!(
                replay_of(client, name, k).await,
                (
                    StatusCode::OK,
                    Response::Claim(ClaimOutcome::Replay(stored_response(k as u8)))
                )
            );
        }
        let (_, other_payload) = clients[1].op(&claim(skey(name), 8, 999_998)).await;
        assert_eq!(other_payload, Response::Claim(ClaimOutcome::Mismatch));
    }
    assert!(
        keyspace_hits(&redis) >= hits + 5 * keys.len() as u64,
        "Redis answered the replays"
    );
    let cached = redis.cli(&["--scan", "--pattern", "idemgate:*"]);
    assert_eq!(cached.lines().count(), 6, "{cached}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and PostgreSQL: make test-store"]
async fn flushall_in_the_middle_of_traffic_never_forwards_twice() {
    let redis = Redis::start(false);
    let postgres = Postgres::start();
    let service = start(&redis, &postgres, SLOW_OK);
    let clients = clients(&service, 4).await;
    let keys = names("flush", 6);
    let mut total = vec![Tally::default(); keys.len()];
    let add = |total: &mut Vec<Tally>, tally: Vec<Tally>| {
        for (sum, t) in total.iter_mut().zip(tally) {
            sum.forwards += t.forwards;
            sum.conflicts += t.conflicts;
            sum.replays += t.replays;
        }
    };

    // Claims in flight, in Redis and PostgreSQL; then Redis forgets everything.
    add(&mut total, claims(&clients, &keys, 0, 100).await);
    redis.cli(&["flushall"]);
    // Duplicates and the finishes together, with Redis flushed again and again meanwhile.
    let url = redis.port;
    let flusher = tokio::task::spawn_blocking(move || {
        for _ in 0..20 {
            let _ = std::process::Command::new("redis-cli")
                .args(["-p", &url.to_string(), "flushall"])
                .output();
            std::thread::sleep(Duration::from_millis(15));
        }
    });
    let mut finishes = Vec::new();
    for k in 0..keys.len() {
        let client = clients[k % clients.len()].clone();
        let keys = keys.clone();
        finishes.push(tokio::spawn(async move {
            finish_by_whoever_owns(&client, &keys, k, 100).await
        }));
    }
    add(&mut total, claims(&clients, &keys, 100, 100).await);
    for (k, finish) in finishes.into_iter().enumerate() {
        assert_eq!(finish.await.unwrap(), 1, "key {k}: one finish lands");
    }
    add(&mut total, claims(&clients, &keys, 200, 100).await);
    flusher.await.unwrap();
    redis.cli(&["flushall"]);
    // After the last flush: PostgreSQL still holds every completion.
    let after = claims(&clients, &keys, 300, 50).await;
    for (k, t) in after.iter().enumerate() {
        assert_eq!(t.replays, 50, "key {k}: every later claim replays: {t:?}");
    }
    add(&mut total, after);
    for (key, t) in keys.iter().zip(&total) {
        assert_eq!(t.forwards, 1, "key {key}: one forward in all: {t:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and PostgreSQL: make test-store"]
async fn without_redis_postgres_answers_alone() {
    let redis = Redis::start(false);
    let postgres = Postgres::start();
    let service = start(&redis, &postgres, SLOW_OK);
    let clients = clients(&service, 2).await;
    let keys = names("no-redis", 2);
    // Completed while Redis was there (Redis holds the replays).
    claims(&clients, &keys, 0, 20).await;
    for k in 0..keys.len() {
        assert_eq!(finish_by_whoever_owns(&clients[0], &keys, k, 20).await, 1);
    }

    // Redis stopped (no answers at all): every operation still answers, from PostgreSQL.
    redis.stop();
    let stopped = names("redis-stopped", 2);
    let tally = claims(&clients, &stopped, 0, 30).await;
    assert!(tally.iter().all(|t| t.forwards == 1), "{tally:?}");
    for (k, name) in keys.iter().enumerate() {
        let (status, answer) = replay_of(&clients[0], name, k).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            answer,
            Response::Claim(ClaimOutcome::Replay(stored_response(k as u8)))
        );
    }
    redis.cont();

    // Redis killed (SIGKILL by PID): the same, and the keys claimed meanwhile finish once.
    drop(redis);
    let tally = claims(&clients, &stopped, 30, 30).await;
    assert!(tally.iter().all(|t| t.forwards == 0), "{tally:?}");
    for k in 0..stopped.len() {
        let stored = finish_by_whoever_owns(&clients[1], &stopped, k, 60).await;
        assert_eq!(stored, 1, "key {k}");
    }
    let tally = claims(&clients, &stopped, 60, 30).await;
    assert!(tally.iter().all(|t| t.replays == 30), "{tally:?}");
    for (k, name) in keys.iter().enumerate() {
        assert_eq!(
            replay_of(&clients[1], name, k).await.1,
            Response::Claim(ClaimOutcome::Replay(stored_response(k as u8)))
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and PostgreSQL: make test-store"]
async fn a_redis_down_at_start_is_connected_later() {
    let redis = Redis::start(false);
    let postgres = Postgres::start();
    redis.stop();
    let service = start(&redis, &postgres, SLOW_OK);
    let client = Client::connect(&service).await;
    let keys = names("late-redis", 1);
    let tally = claims(std::slice::from_ref(&client), &keys, 0, 10).await;
    assert_eq!(tally[0].forwards, 1);
    assert_eq!(finish_by_whoever_owns(&client, &keys, 0, 10).await, 1);
    redis.cont();
    // Once connected, replays are filled into Redis and answered from it.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert_eq!(
            replay_of(&client, &keys[0], 0).await.1,
            Response::Claim(ClaimOutcome::Replay(stored_response(0)))
        );
        if !redis
            .cli(&["--scan", "--pattern", "idemgate:*"])
            .trim()
            .is_empty()
        {
            break;
        }
        assert!(Instant::now() < deadline, "Redis never filled");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A failed answer the filter turns into its failure mode (503).
fn assert_typed_failure(answer: &(StatusCode, Response), what: &str) {
    let typed = answer.0 == StatusCode::SERVICE_UNAVAILABLE
        && matches!(
            answer.1,
            Response::Failed(Failure::Timeout | Failure::Unavailable)
        );
    assert!(typed, "{what}: {} {}", answer.0, brief(&answer.1));
}

/// An answer without its 70 KB body, for assertion messages.
fn brief(response: &Response) -> String {
    match response {
        Response::Claim(ClaimOutcome::Replay(stored)) => format!("replay of {}", stored.status),
        other => format!("{other:?}"),
    }
}

/// Polls until `name` replays again (PostgreSQL back), at most 30 s.
async fn wait_for_replay(client: &Client, name: &str, k: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = replay_of(client, name, k).await;
        if answer.0 == StatusCode::OK {
            assert_eq!(
                answer.1,
                Response::Claim(ClaimOutcome::Replay(stored_response(k as u8)))
            );
            return;
        }
        assert_typed_failure(&answer, "while recovering");
        assert!(Instant::now() < deadline, "never recovered");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and PostgreSQL: make test-store"]
async fn without_postgres_every_operation_fails_typed_even_for_keys_redis_holds() {
    let redis = Redis::start(false);
    let mut postgres = Postgres::start();
    let service = start(&redis, &postgres, "1s");
    let clients = clients(&service, 2).await;
    let keys = names("no-postgres", 2);
    claims(&clients, &keys, 0, 10).await;
    for k in 0..keys.len() {
        assert_eq!(finish_by_whoever_owns(&clients[0], &keys, k, 10).await, 1);
    }
    let in_flight = names("no-postgres-in-flight", 1);
    assert_eq!(claims(&clients, &in_flight, 0, 1).await[0].forwards, 1);
    let cached = redis.cli(&["--scan", "--pattern", "idemgate:*"]);
    assert_eq!(cached.lines().count(), 3, "Redis holds all three: {cached}");

    // Stopped (SIGSTOP): once the heartbeat or the freshness bound notices, Redis answers nothing.
    postgres.stop();
    // Again: a backend the postmaster was forking for a new pooled connection as the first
    // signals went out is stopped too.
    tokio::time::sleep(Duration::from_millis(300)).await;
    postgres.stop();
    tokio::time::sleep(Duration::from_secs(4)).await;
    for round in 0..3 {
        for (k, name) in keys.iter().enumerate() {
            let answer = replay_of(&clients[round % 2], name, k).await;
            assert_typed_failure(&answer, "a replay Redis holds, PostgreSQL stopped");
        }
        let answer = clients[0].op(&claim(skey(&in_flight[0]), 7, 5)).await;
        assert_typed_failure(
            &answer,
            "an in-flight duplicate Redis holds, PostgreSQL stopped",
        );
        let answer = clients[1].op(&claim(skey("no-postgres-new"), 7, 5)).await;
        assert_typed_failure(&answer, "a new key, PostgreSQL stopped");
    }
    postgres.cont();
    wait_for_replay(&clients[0], &keys[0], 0).await;
    let answer = clients[0].op(&claim(skey(&in_flight[0]), 7, 6)).await;
    assert!(
        matches!(
            answer,
            (
                StatusCode::OK,
                Response::Claim(ClaimOutcome::Conflict { .. })
            )
        ),
        "{answer:?}"
    );

    // Killed (SIGKILL, no shutdown) and restarted: every record is still there, and the claim in
    // flight still holds its key.
    postgres.crash_and_restart();
    for (k, name) in keys.iter().enumerate() {
        wait_for_replay(&clients[1], name, k).await;
    }
    let tally = claims(&clients, &in_flight, 10, 20).await;
    assert_eq!(
        tally[0].forwards, 0,
        "the claim in flight survived: {tally:?}"
    );

    // Killed for good: typed failures again, for everything Redis holds too.
    drop(postgres);
    tokio::time::sleep(Duration::from_secs(4)).await;
    for (k, name) in keys.iter().enumerate() {
        let answer = replay_of(&clients[k % 2], name, k).await;
        assert_typed_failure(&answer, "a replay Redis holds, PostgreSQL killed");
    }
    let answer = clients[0].op(&claim(skey(&in_flight[0]), 7, 7)).await;
    assert_typed_failure(
        &answer,
        "an in-flight duplicate Redis holds, PostgreSQL killed",
    );
    let (status, _) = clients[0].get("/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
}
