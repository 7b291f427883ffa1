//! `--engine postgres` against a real PostgreSQL started by each test (`initdb` in a temporary
//! directory, a free port, killed by PID; see `support/postgres.rs`, also for running as root),
//! driven over mutual TLS like an Envoy cluster would: exactly one claim wins under concurrency,
//! completions replay byte for byte, a token is used once, records survive a SIGKILLed database,
//! a stopped one gives a typed timeout and then recovery, two replicas share one database, expired
//! rows are never served and are swept, TLS `verify-full` works and a wrong CA or host name is
//! refused at start. Run with `make test-store` (needs `initdb`/`postgres`, `psql`, `openssl`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use hyper::StatusCode;
use idemgate_core::store::remote::End;
use idemgate_core::store::remote::{Failure, Request, Response};
use idemgate_core::time::{Span, UnixMillis};
use idemgate_core::{ClaimOutcome, ConsumeOutcome, FinishOutcome};
use std::time::{Duration, Instant};
use support::postgres::{self as pg, Postgres};
use support::{
    claim, concurrent_claims, once_recovered, owner, skey, stored_response, Client, Service,
    SLOW_OK,
};

fn finish(name: &str, owner_id: u32, seed: u8) -> Request {
    Request::Finish {
        key: skey(name),
        owner: owner(owner_id),
        ttl: Span::from_secs(3600),
        end: End::Store(stored_response(seed)),
        shard: None,
    }
}

async fn clients(service: &Service, n: usize) -> Vec<Client> {
    let mut clients = Vec::new();
    for _ in 0..n {
        clients.push(Client::connect(service).await);
    }
    clients
}

/// Which of the `n` owners of key `k` won: the one whose completion lands.
async fn complete_by_winner(client: &Client, name: &str, k: usize, n: u32) -> usize {
    let mut stored = 0;
    for i in 0..n {
        match client
            .op(&finish(name, (k as u32) << 16 | i, k as u8))
            .await
        {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: make test-store"]
async fn concurrent_claims_forward_once_and_completions_replay_byte_identical() {
    let postgres = Postgres::start();
    let service = pg::service(&postgres.url(), &["--op-timeout", SLOW_OK], &[]);
    let clients = clients(&service, 4).await;
    let keys = names("pg", 6);
    let n = 200;
    let counts = concurrent_claims(&clients, &keys, n).await;
    assert_eq!(counts, vec![(1, n as usize - 1); 6], "one forward per key");
    for (k, name) in keys.iter().enumerate() {
        assert_eq!(complete_by_winner(&clients[0], name, k, n).await, 1);
        for client in &clients {
            assert_eq!(
                client.op(&claim(skey(name), 7, 999_999)).await,
                (
                    StatusCode::OK,
                    Response::Claim(ClaimOutcome::Replay(stored_response(k as u8)))
                ),
                "the 70 KB completion replays byte for byte"
            );
        }
        let (_, other_payload) = clients[1].op(&claim(skey(name), 8, 999_998)).await;
        assert_eq!(other_payload, Response::Claim(ClaimOutcome::Mismatch));
    }
    // One row per record: the version column is the value's first 16 bytes, and the expiry is the
    // record's (one hour from the database's clock).
    assert_eq!(postgres.psql("SELECT count(*) FROM idemgate_records"), "6");
    assert_eq!(
        postgres.psql(
            "SELECT count(*) FROM idemgate_records WHERE version = substring(value FROM 1 FOR 16)"
        ),
        "6"
    );
    let ttl: f64 = postgres
        .psql(
            "SELECT min(extract(epoch FROM expires_at - clock_timestamp())) FROM idemgate_records",
        )
        .parse()
        .unwrap();
    assert!(ttl > 3000.0 && ttl <= 3600.0, "expires in {ttl} s");
    let metrics = clients[0].get("/metrics").await.1;
    assert!(
        metrics.contains("idemgate_store_cas_conflicts_total"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: make test-store"]
async fn release_deletes_the_row_and_a_token_is_consumed_once() {
    let postgres = Postgres::start();
    let service = pg::service(&postgres.url(), &["--op-timeout", SLOW_OK], &[]);
    let client = Client::connect(&service).await;
    let key = skey("pg-release");
    assert!(matches!(
        client.op(&claim(key, 1, 1)).await.1,
        Response::Claim(ClaimOutcome::Forward { .. })
    ));
    let release = |o| Request::Finish {
        key,
        owner: owner(o),
        ttl: Span::from_secs(60),
        end: End::Release,
        shard: None,
    };
    assert_eq!(
        client.op(&release(2)).await.1,
        Response::Finish(FinishOutcome::NotOwner)
    );
    assert_eq!(
        client.op(&release(1)).await.1,
        Response::Finish(FinishOutcome::Released)
    );
    assert_eq!(postgres.psql("SELECT count(*) FROM idemgate_records"), "0");
    assert_eq!(
        client.op(&claim(key, 1, 4)).await.1,
        Response::Claim(ClaimOutcome::Forward {
            owner: owner(4),
            takeover: false
        })
    );

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let far = UnixMillis(now.as_millis() as u64 + 3_600_000);
    let mut tasks = Vec::new();
    for _ in 0..100 {
        let client = client.clone();
        let consume = Request::Consume {
            key: skey("pg-token-1"),
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

/// Claims `name` once (owner `id`): true if it forwarded; a typed failure while the database is
/// away is fine (the filter's failure mode answers), anything else fails the test.
async fn claim_during_crash(client: &Client, name: &str, id: u32) -> Option<bool> {
    match client.op(&claim(skey(name), 7, id)).await {
        (StatusCode::OK, Response::Claim(ClaimOutcome::Forward { .. })) => Some(true),
        (StatusCode::OK, Response::Claim(ClaimOutcome::Conflict { .. })) => Some(false),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Response::Failed(Failure::Unavailable | Failure::Timeout),
        ) => None,
        other => panic!("claim while PostgreSQL crashes: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: make test-store"]
async fn records_survive_a_postgres_sigkill_mid_traffic_and_nothing_forwards_twice() {
    let mut postgres = Postgres::start();
    let service = pg::service(&postgres.url(), &["--op-timeout", "1s"], &[]);
    let clients = clients(&service, 2).await;
    assert_eq!(
        clients[0].op(&claim(skey("pg-done"), 1, 1)).await.1,
        Response::Claim(ClaimOutcome::Forward {
            owner: owner(1),
            takeover: false
        })
    );
    assert_eq!(
        clients[0].op(&finish("pg-done", 1, 9)).await.1,
        Response::Finish(FinishOutcome::Stored)
    );
    assert!(matches!(
        clients[0].op(&claim(skey("pg-flying"), 1, 2)).await.1,
        Response::Claim(ClaimOutcome::Forward { .. })
    ));

    // Traffic on 40 keys, two claims of each at a time, while the database is SIGKILLed and
    // restarted under it.
    let keys = names("pg-crash", 40);
    let traffic = {
        let (clients, keys) = (clients.clone(), keys.clone());
        tokio::spawn(async move {
            let mut forwards = vec![0usize; keys.len()];
            let mut failures = 0;
            let started = Instant::now();
            let mut round = 0u32;
            while started.elapsed() < Duration::from_secs(6) {
                for (k, name) in keys.iter().enumerate() {
                    let id = 1000 + round * 1000 + k as u32;
                    let (a, b) = tokio::join!(
                        claim_during_crash(&clients[0], name, id),
                        claim_during_crash(&clients[1], name, id + 500),
                    );
                    for answer in [a, b] {
                        match answer {
                            Some(true) => forwards[k] += 1,
                            Some(false) => {}
                            None => failures += 1,
                        }
                    }
                }
                round += 1;
            }
            (forwards, failures, round)
        })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    postgres.crash_and_restart();
    let (forwards, failures, rounds) = traffic.await.unwrap();
    assert!(rounds >= 2, "{rounds} rounds");
    assert!(
        forwards.iter().all(|f| *f <= 1),
        "a key forwarded twice: {forwards:?}"
    );
    eprintln!("{failures} claims failed typed while the database was away");

    // The service's pool reconnects by itself; the first calls may fail while it does.
    let replay = once_recovered(&clients[0], &claim(skey("pg-done"), 1, 3), "after restart").await;
    assert_eq!(
        replay,
        Response::Claim(ClaimOutcome::Replay(stored_response(9)))
    );
    assert!(matches!(
        clients[1].op(&claim(skey("pg-flying"), 1, 4)).await.1,
        Response::Claim(ClaimOutcome::Conflict { .. })
    ));
    // A key that forwarded is held; one whose claim landed but whose answer was lost with the
    // connection is held too (in flight, its lease runs). Only a key no claim ever reached may
    // forward now: never a second forward.
    let mut held = 0;
    for (k, name) in keys.iter().enumerate() {
        match claim_during_crash(&clients[0], name, 900_000 + k as u32).await {
            Some(false) => held += 1,
            Some(true) => assert_eq!(forwards[k], 0, "key {name} forwarded twice"),
            None => panic!("key {name}: a failure after recovery"),
        }
    }
    assert!(held >= forwards.iter().sum::<usize>(), "{held} held");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: make test-store"]
async fn a_stopped_postgres_gives_a_typed_timeout_then_recovery() {
    let postgres = Postgres::start();
    let service = pg::service(&postgres.url(), &["--op-timeout", "300ms"], &[]);
    let client = Client::connect(&service).await;
    assert_eq!(client.get("/readyz").await.0, StatusCode::OK);
    assert!(matches!(
        client.op(&claim(skey("pg-before-stop"), 1, 1)).await.1,
        Response::Claim(ClaimOutcome::Forward { .. })
    ));
    postgres.stop();
    // More operations at once than the pool has connections: each still answers in time.
    let mut tasks = Vec::new();
    for i in 0..40u32 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let started = Instant::now();
            let answer = client.op(&claim(skey("pg-stopped"), 1, 10 + i)).await;
            (answer, started.elapsed())
        }));
    }
    for task in tasks {
        let (answer, took) = task.await.unwrap();
        assert_eq!(
            answer,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Response::Failed(Failure::Timeout)
            )
        );
        assert!(took < Duration::from_secs(3), "answered after {took:?}");
    }
    assert_eq!(
        client.get("/readyz").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(client.get("/healthz").await.0, StatusCode::OK);
    postgres.cont();
    let answer = once_recovered(
        &client,
        &claim(skey("pg-after-cont"), 1, 2),
        "after SIGCONT",
    )
    .await;
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: make test-store"]
async fn two_service_replicas_started_together_share_one_database_and_forward_once() {
    let postgres = Postgres::start();
    let url = postgres.url();
    // Both migrate at the same moment: the advisory lock serialises them.
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| pg::service(&url, &["--op-timeout", SLOW_OK], &[]));
        let b = s.spawn(|| pg::service(&url, &["--op-timeout", SLOW_OK], &[]));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(
        postgres.psql("SELECT string_agg(version::text, ',') FROM idemgate_schema_version"),
        "1"
    );
    let clients = vec![
        Client::connect(&a).await,
        Client::connect(&b).await,
        Client::connect(&a).await,
        Client::connect(&b).await,
    ];
    let keys = names("pg-replicas", 3);
    let counts = concurrent_claims(&clients, &keys, 300).await;
    assert_eq!(counts, vec![(1, 299); 3]);
    // A completion written through one replica replays through the other.
    assert_eq!(complete_by_winner(&clients[0], &keys[0], 0, 300).await, 1);
    assert_eq!(
        clients[1].op(&claim(skey(&keys[0]), 7, 5)).await.1,
        Response::Claim(ClaimOutcome::Replay(stored_response(0)))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: make test-store"]
async fn expired_rows_are_never_served_and_are_swept_in_batches() {
    let postgres = Postgres::start();
    // The default sweep period (30 s): nothing is swept during the first part.
    let service = pg::service(&postgres.url(), &["--op-timeout", SLOW_OK], &[]);
    let client = Client::connect(&service).await;
    assert!(matches!(
        client.op(&claim(skey("pg-expired"), 7, 1)).await.1,
        Response::Claim(ClaimOutcome::Forward { .. })
    ));
    assert_eq!(
        client.op(&finish("pg-expired", 1, 3)).await.1,
        Response::Finish(FinishOutcome::Stored)
    );
    assert!(matches!(
        client.op(&claim(skey("pg-expired"), 7, 2)).await.1,
        Response::Claim(ClaimOutcome::Replay(_))
    ));
    // The row's expiry passes (the record inside still says one hour): the database's clock and
    // the row's `expires_at` decide, so it is absent from now on, before any sweep.
    postgres
        .psql("UPDATE idemgate_records SET expires_at = clock_timestamp() - interval '1 second'");
    assert_eq!(
        client.op(&claim(skey("pg-expired"), 7, 3)).await.1,
        Response::Claim(ClaimOutcome::Forward {
            owner: owner(3),
            takeover: false
        }),
        "an expired row is never served"
    );
    // 1200 expired rows (more than two batches) and one live one.
    postgres.psql(
        "INSERT INTO idemgate_records (key, value, version, expires_at)
         SELECT sha256(('junk-' || i)::bytea), '\\x00'::bytea, substring(sha256(i::text::bytea) FROM 1 FOR 16),
                clock_timestamp() - interval '1 minute'
         FROM generate_series(1, 1200) AS i",
    );
    let expired = "SELECT count(*) FROM idemgate_records WHERE expires_at < clock_timestamp()";
    assert_eq!(postgres.psql(expired), "1200");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(postgres.psql(expired), "1200", "no sweep before its period");

    // A replica that sweeps every 300 ms clears them; the live row stays.
    let sweeper = pg::service(
        &postgres.url(),
        &["--op-timeout", SLOW_OK],
        &[("IDEMGATE_STORE_SWEEP_EVERY", "300ms")],
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    while postgres.psql(expired) != "0" {
        assert!(Instant::now() < deadline, "the sweep never finished");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(postgres.psql("SELECT count(*) FROM idemgate_records"), "1");
    let client = Client::connect(&sweeper).await;
    assert!(matches!(
        client.op(&claim(skey("pg-expired"), 7, 4)).await.1,
        Response::Claim(ClaimOutcome::Conflict { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: make test-store"]
async fn the_shipped_sql_file_applied_by_hand_is_the_schema_the_service_uses() {
    let postgres = Postgres::start();
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sql/001_records.sql");
    for _ in 0..2 {
        let out = postgres.psql_file(pg::DATABASE, &file);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(
        postgres.psql("SELECT version FROM idemgate_schema_version"),
        "1"
    );
    let mut service = pg::service(&postgres.url(), &["--op-timeout", SLOW_OK], &[]);
    let client = Client::connect(&service).await;
    assert!(matches!(
        client.op(&claim(skey("pg-by-hand"), 7, 1)).await.1,
        Response::Claim(ClaimOutcome::Forward { .. })
    ));
    service.terminate();
    service.wait_exit(Duration::from_secs(10)).expect("exits");
    assert!(
        !service.take_stderr().contains("migrated"),
        "nothing left to migrate"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL and openssl: make test-store"]
async fn tls_verify_full_works_and_a_wrong_ca_or_host_is_refused_at_start() {
    let (postgres, certs) = pg::start_tls();
    let base = format!(
        "postgres://{}@127.0.0.1:{}/{}",
        pg::USER,
        postgres.port,
        pg::DATABASE
    );
    let tls = |host_url: &str, ca: &std::path::Path| {
        format!(
            "{host_url}?sslmode=verify-full&sslrootcert={}",
            ca.display()
        )
    };
    let service = pg::service(&tls(&base, &certs.ca), &["--op-timeout", SLOW_OK], &[]);
    let client = Client::connect(&service).await;
    assert!(matches!(
        client.op(&claim(skey("pg-tls"), 7, 1)).await.1,
        Response::Claim(ClaimOutcome::Forward { .. })
    ));
    // The service's connections are encrypted (psql itself connects without TLS).
    let encrypted: u32 = postgres
        .psql(
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
             WHERE s.ssl AND a.application_name = 'idemgate-store'",
        )
        .parse()
        .unwrap();
    assert!(encrypted >= 1, "{encrypted} TLS connections");

    // A CA that did not sign the server's certificate: refused at start, with the reason.
    let (code, stderr) = pg::refused(&tls(&base, &certs.other_ca), &["--connect-timeout", "3s"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot connect to PostgreSQL") && stderr.contains("certificate"),
        "{stderr}"
    );
    // The right CA, but a host name the certificate does not name (it names IP 127.0.0.1).
    let localhost = base.replace("127.0.0.1", "localhost");
    let (code, stderr) = pg::refused(&tls(&localhost, &certs.ca), &["--connect-timeout", "3s"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("certificate"), "{stderr}");
    // sslmode values that do not verify the server are a startup error, not a silent downgrade.
    for mode in ["require", "prefer", "verify-ca"] {
        let (code, stderr) = pg::refused(
            &format!("{base}?sslmode={mode}&sslrootcert={}", certs.ca.display()),
            &[],
        );
        assert_eq!(code, Some(1), "{stderr}");
        assert!(stderr.contains(&format!("sslmode={mode}")), "{stderr}");
    }
}

#[test]
#[ignore = "needs PostgreSQL: make test-store"]
fn no_database_exits_non_zero_with_a_message_without_the_password() {
    let port = support::free_port(false);
    let (code, stderr) = pg::refused(
        &format!("postgres://idemgate:sekrit-pw@127.0.0.1:{port}/idemgate"),
        &["--connect-timeout", "500ms"],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("cannot connect to PostgreSQL"), "{stderr}");
    assert!(!stderr.contains("sekrit-pw"), "{stderr}");
}
