//! Operator controls against real engines: `records get` finds the record a claim made
//! (its storage key derived from the client's request, as the filter derives it), `records evict`
//! removes it so the next claim forwards again, `stats` counts records and groups them by scope,
//! the admin port answers the same behind its own bearer token (and the store port never does),
//! and bad command lines exit non-zero with a message. Run with `make test-store`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use hyper::StatusCode;
use idemgate_core::client::scope::{QuotaTag, Scope, StorageKey};
use idemgate_core::request::key::IdempotencyKey;
use idemgate_core::store::remote::End;
use idemgate_core::store::remote::{Request, Response};
use idemgate_core::time::Span;
use idemgate_core::{ClaimOutcome, FinishOutcome};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use support::postgres::Postgres;
use support::{claim, free_port, owner, skey, stored_response, Client, Redis, Service};

/// The scope `support::skey` derives its keys in.
const SCOPE: &str = "Bearer fleet-test";

fn cli(args: &[&str], engine: &[&str]) -> Output {
    Command::new(support::service_binary())
        .args(args)
        .args(engine)
        .output()
        .expect("the binary runs")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn record_args<'a>(verb: &'a str, key: &'a str) -> Vec<&'a str> {
    vec![
        "records", verb, "--key", key, "--route", "/orders", "--scope", SCOPE,
    ]
}

/// Claims `name` (in `support::skey`'s scope) and stores an answer for it.
async fn completed(client: &Client, name: &str) {
    let (_, answer) = client.op(&claim(skey(name), 1, 1)).await;
    assert!(matches!(
        answer,
        Response::Claim(ClaimOutcome::Forward { .. })
    ));
    let finish = Request::Finish {
        key: skey(name),
        owner: owner(1),
        ttl: Span::from_secs(3600),
        end: End::Store(stored_response(3)),
        shard: None,
    };
    assert_eq!(
        client.op(&finish).await.1,
        Response::Finish(FinishOutcome::Stored)
    );
}

/// get → completed; evict → gone; the next claim of the key forwards again.
async fn get_evict_forward(service: &Service, engine: &[&str]) {
    let client = Client::connect(service).await;
    completed(&client, "op-1").await;
    let got = stdout(&cli(&record_args("get", "op-1"), engine));
    assert!(got.contains("\"state\":\"completed\""), "{got}");
    assert!(got.contains("\"status\":201"), "{got}");
    assert!(got.contains("\"body_bytes\":70000"), "{got}");
    assert!(got.contains(&skey("op-1").to_hex()), "{got}");
    assert!(
        !got.contains("body_base64"),
        "the body only with --body: {got}"
    );
    let mut with_body = record_args("get", "op-1");
    with_body.push("--body");
    assert!(stdout(&cli(&with_body, engine)).contains("\"body_base64\":\""));
    // Another scope's same key is another record.
    let other = cli(
        &[
            "records",
            "get",
            "--key",
            "op-1",
            "--route",
            "/orders",
            "--scope",
            "Bearer mallory",
        ],
        engine,
    );
    assert!(stdout(&other).contains("\"state\":\"absent\""));

    // Before the eviction a claim replays; after it, the same key forwards again.
    let (_, answer) = client.op(&claim(skey("op-1"), 1, 2)).await;
    assert!(matches!(answer, Response::Claim(ClaimOutcome::Replay(_))));
    let evicted = cli(&record_args("evict", "op-1"), engine);
    assert!(stdout(&evicted).contains("\"evicted\":true"));
    let log = String::from_utf8_lossy(&evicted.stderr).to_string();
    let label = skey("op-1").log_label();
    assert!(
        log.contains("record evicted") && log.contains(&format!("key_hash={label} via=cli")),
        "{log}"
    );
    assert!(
        !log.contains("op-1") && !log.contains("fleet-test"),
        "{log}"
    );
    assert!(stdout(&cli(&record_args("get", "op-1"), engine)).contains("\"state\":\"absent\""));
    let (_, answer) = client.op(&claim(skey("op-1"), 1, 3)).await;
    assert!(
        matches!(answer, Response::Claim(ClaimOutcome::Forward { .. })),
        "{answer:?}"
    );
    assert!(stdout(&cli(&record_args("get", "op-1"), engine)).contains("\"state\":\"in_flight\""));
    // Evicting a claim in flight: its owner's finish then stores nothing (not its record).
    assert!(stdout(&cli(&record_args("evict", "op-1"), engine)).contains("\"evicted\":true"));
    let late = Request::Finish {
        key: skey("op-1"),
        owner: owner(3),
        ttl: Span::from_secs(3600),
        end: End::Store(stored_response(4)),
        shard: None,
    };
    assert_eq!(
        client.op(&late).await.1,
        Response::Finish(FinishOutcome::NotOwner)
    );
    assert!(stdout(&cli(&record_args("get", "op-1"), engine)).contains("\"state\":\"absent\""));
    // Evicting what is not there says so.
    assert!(stdout(&cli(&record_args("evict", "op-none"), engine)).contains("\"evicted\":false"));
}

/// Three records in one scope, one in another: stats counts four and lists the first scope first.
async fn stats_by_scope(service: &Service, engine: &[&str]) {
    let client = Client::connect(service).await;
    for i in 0..3 {
        client.op(&claim(skey(&format!("st-{i}")), 1, 1)).await;
    }
    let other = Scope {
        source: "header:authorization",
        value: b"Bearer someone-else",
    };
    let key = IdempotencyKey::parse(b"st-x").unwrap();
    let lone = StorageKey::derive(other, "POST", "/orders", &key);
    client.op(&claim(lone, 1, 1)).await;
    let out = stdout(&cli(&["stats", "--top", "5"], engine));
    assert!(out.contains("\"records\":4,"), "{out}");
    let tag = |scope: Scope<'_>| idemgate_core::hash::to_hex(&QuotaTag::of(scope).0);
    let busy = tag(Scope {
        source: "header:authorization",
        value: SCOPE.as_bytes(),
    });
    let first = format!(
        "\"top_scopes\":[{{\"scope_tag\":\"{busy}\",\"class\":\"identified\",\"records\":3,"
    );
    assert!(out.contains(&first), "{out}");
    assert!(
        out.contains(&format!("{{\"scope_tag\":\"{}\",", tag(other))),
        "{out}"
    );
    assert!(!out.contains("fleet-test"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (make test-store)"]
async fn redis_get_evict_and_stats() {
    let redis = Redis::start(false);
    let url = redis.url();
    let service = Service::start(&url, &[]);
    let engine = ["--redis", url.as_str()];
    get_evict_forward(&service, &engine).await;
    redis.cli(&["FLUSHALL"]);
    stats_by_scope(&service, &engine).await;
    // Keys outside the prefix are not records.
    redis.cli(&["SET", "unrelated", "x"]);
    assert!(stdout(&cli(&["stats"], &engine)).contains("\"records\":4,"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (make test-store)"]
async fn postgres_get_evict_and_stats() {
    let pg = Postgres::start();
    let url = pg.url();
    let service = support::postgres::service(&url, &[], &[]);
    let engine = ["--engine", "postgres", "--postgres", url.as_str()];
    get_evict_forward(&service, &engine).await;
    pg.psql("DELETE FROM idemgate_records");
    stats_by_scope(&service, &engine).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and PostgreSQL (make test-store)"]
async fn redis_postgres_evict_leaves_no_cached_copy() {
    let pg = Postgres::start();
    let redis = Redis::start(false);
    let (pg_url, redis_url) = (pg.url(), redis.url());
    let engine = [
        "--engine",
        "redis+postgres",
        "--postgres",
        pg_url.as_str(),
        "--redis",
        redis_url.as_str(),
    ];
    let service = support::postgres::service(
        &pg_url,
        &["--engine", "redis+postgres", "--redis", &redis_url],
        &[],
    );
    let client = Client::connect(&service).await;
    completed(&client, "tier-1").await;
    // The completed answer is in Redis too (written through).
    let rkey = format!("idemgate:{}", skey("tier-1").to_hex());
    assert_eq!(redis.cli(&["EXISTS", &rkey]).trim(), "1");
    assert!(stdout(&cli(&record_args("evict", "tier-1"), &engine)).contains("\"evicted\":true"));
    assert_eq!(redis.cli(&["EXISTS", &rkey]).trim(), "0");
    let (_, answer) = client.op(&claim(skey("tier-1"), 1, 2)).await;
    assert!(
        matches!(answer, Response::Claim(ClaimOutcome::Forward { .. })),
        "{answer:?}"
    );
}

/// One HTTP/1.1 request to the admin port: the status and body.
fn http(port: u16, method: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut stream = loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(stream) => break stream,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("admin port {port}: {e}"),
        }
    };
    let auth = token
        .map(|t| format!("authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nhost: admin\r\n{auth}connection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not HTTP: {text:?}"));
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, body.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (make test-store)"]
async fn admin_port_needs_its_token_and_answers_like_the_cli() {
    let redis = Redis::start(false);
    let url = redis.url();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("admin-token");
    let token = "s3cret-admin-token-0123456789";
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let token_path = token_file.to_str().unwrap();
    let port = free_port(false);
    let admin = format!("127.0.0.1:{port}");
    let service = Service::start(
        &url,
        &["--admin-listen", &admin, "--admin-token-file", token_path],
    );
    let client = Client::connect(&service).await;
    completed(&client, "adm-1").await;
    let path = "/v1/records?key=adm-1&route=/orders&scope=Bearer+fleet-test";

    for bad in [
        None,
        Some("wrong-token-wrong-token"),
        Some("s3cret-admin-token-012345678"),
    ] {
        let (status, body) = http(port, "GET", path, bad);
        assert_eq!(status, 401, "{bad:?}: {body}");
        assert!(!body.contains("completed"), "{body}");
        assert_eq!(http(port, "DELETE", path, bad).0, 401);
        assert_eq!(http(port, "GET", "/v1/stats", bad).0, 401);
    }
    // Nothing was evicted by the refused requests.
    let (status, body) = http(port, "GET", path, Some(token));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"state\":\"completed\""), "{body}");
    let (status, body) = http(port, "GET", "/v1/stats", Some(token));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"records\":1,"), "{body}");
    // Bad input is a 400 problem, not a guess.
    assert_eq!(
        http(port, "GET", "/v1/records?route=/orders", Some(token)).0,
        400
    );
    assert_eq!(http(port, "GET", "/v1/records?nope=1", Some(token)).0, 400);

    let (status, body) = http(port, "DELETE", path, Some(token));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"evicted\":true"), "{body}");
    assert_eq!(http(port, "GET", path, Some(token)).0, 404);
    let (_, answer) = client.op(&claim(skey("adm-1"), 1, 2)).await;
    assert!(matches!(
        answer,
        Response::Claim(ClaimOutcome::Forward { .. })
    ));

    // The store port never serves the operator endpoints.
    let store = Client::connect(&service).await;
    let (status, body) = store.get(path).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, body) = store.get("/v1/stats").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}

#[test]
fn the_admin_port_never_starts_without_a_good_token() {
    let port = free_port(false).to_string();
    let admin = format!("127.0.0.1:{port}");
    // The service's own transport is not what is tested here.
    let plaintext = "--plaintext-unauthenticated";
    let out = cli(
        &[
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            &admin,
            plaintext,
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--admin-token-file"));
    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("short");
    std::fs::write(&short, "abc\n").unwrap();
    let out = cli(
        &[
            "--listen",
            "127.0.0.1:0",
            plaintext,
            "--admin-listen",
            &admin,
            "--admin-token-file",
            short.to_str().unwrap(),
            // A Redis that is not there: the token is refused before the engine is asked.
            "--redis",
            "redis://127.0.0.1:1",
            "--connect-timeout",
            "200ms",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("shorter than 16"), "{err}");
}

#[test]
fn bad_command_lines_exit_non_zero_with_a_message() {
    for (args, words) in [
        (
            &["records", "get", "--route", "/orders"][..],
            "required arguments were not provided:\n  --key <KEY>",
        ),
        (
            &["records", "frob", "--key", "k"],
            "unrecognized subcommand 'frob'",
        ),
        (&["status"], "unrecognized subcommand 'status'"),
        (
            &["records", "get", "--key", "k"],
            "required arguments were not provided:\n  --route <PATH>",
        ),
        (&["stats", "--top", "none"], "--top"),
        (&["stats", "--engine", "mysql"], "--engine"),
    ] {
        let out = cli(args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(words), "{args:?}: {err}");
    }
    // A query no route of the policy guards: the engine is never asked.
    let out = cli(
        &[
            "records", "get", "--key", "k", "--route", "/orders", "--method", "GET", "--scope", "x",
        ],
        &["--redis", "redis://127.0.0.1:1"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no route of the policy"));
    let out = cli(&["records", "--help"], &[]);
    assert!(stdout(&out).contains("records get"));
}
