//! The service against a real `redis-server` over TLS (`rediss://`) with an ACL user, as a
//! managed Redis with in-transit encryption and AUTH runs: certificates made with openssl at test
//! time, Redis listening only on its TLS port. Exactly one claim forwards under concurrency and
//! completions replay; Redis's mutual TLS works with a client certificate; a wrong password, an
//! unknown CA or a missing client certificate stops the service with a clear message that never
//! holds the password. Run with `make test-store`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use hyper::StatusCode;
use idemgate_core::store::remote::End;
use idemgate_core::store::remote::{Request, Response};
use idemgate_core::time::Span;
use idemgate_core::{ClaimOutcome, FinishOutcome};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::tls::{Certs, TlsRedis, PASSWORD};
use support::{
    claim, concurrent_claims, owner, service_binary, skey, stored_response, Client, Service,
    SLOW_OK,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs redis-server and openssl (make test-store)"]
async fn rediss_with_an_acl_user_forwards_once_and_replays() {
    let certs = Certs::make();
    let redis = TlsRedis::start(&certs, false);
    let ca = certs.arg("ca.pem");
    let service = Service::start(
        &redis.url(PASSWORD),
        &["--redis-ca", &ca, "--op-timeout", SLOW_OK],
    );
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(Client::connect(&service).await);
    }
    let keys = ["tls-a", "tls-b", "tls-c"];
    let n = 60;
    let counts = concurrent_claims(&clients, &keys, n).await;
    assert_eq!(counts, vec![(1, n as usize - 1); keys.len()]);
    // Each candidate owner tries to complete: only the winner's finish lands, every other one
    // is not the owner's; then a retry replays the answer byte for byte.
    for (k, name) in keys.iter().enumerate() {
        let mut stored = 0;
        for i in 0..n {
            let finish = Request::Finish {
                key: skey(name),
                owner: owner((k as u32) << 16 | i),
                ttl: Span::from_secs(3600),
                end: End::Store(stored_response(k as u8)),
                shard: None,
            };
            match clients[i as usize % 3].op(&finish).await {
                (StatusCode::OK, Response::Finish(FinishOutcome::Stored)) => stored += 1,
                (StatusCode::OK, Response::Finish(FinishOutcome::NotOwner)) => {}
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(stored, 1, "{name}");
        assert_eq!(
            clients[2].op(&claim(skey(name), 7, 999_999)).await,
            (
                StatusCode::OK,
                Response::Claim(ClaimOutcome::Replay(stored_response(k as u8)))
            )
        );
    }
    let (status, _) = clients[0].get("/readyz").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and openssl (make test-store)"]
async fn redis_mutual_tls_with_a_client_certificate() {
    let certs = Certs::make();
    let redis = TlsRedis::start(&certs, true);
    let (ca, cert, key) = (
        certs.arg("ca.pem"),
        certs.arg("client.pem"),
        certs.arg("client.key"),
    );
    let service = Service::start(
        &redis.url(PASSWORD),
        &[
            "--redis-ca",
            &ca,
            "--redis-cert",
            &cert,
            "--redis-key",
            &key,
            "--op-timeout",
            SLOW_OK,
        ],
    );
    let client = Client::connect(&service).await;
    let (status, answer) = client.op(&claim(skey("mtls-a"), 7, 1)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        matches!(answer, Response::Claim(ClaimOutcome::Forward { .. })),
        "{answer:?}"
    );
    // Without the client certificate Redis refuses the handshake: the service does not start.
    let message = start_fails(&redis.url(PASSWORD), &["--redis-ca", &ca]);
    assert!(message.contains("cannot connect to rediss://"), "{message}");
}

#[test]
#[ignore = "needs redis-server and openssl (make test-store)"]
fn a_wrong_password_or_an_unknown_ca_stops_the_service_without_the_password() {
    let certs = Certs::make();
    let redis = TlsRedis::start(&certs, false);
    let (ca, other_ca) = (certs.arg("ca.pem"), certs.arg("other-ca.pem"));
    let wrong = "wr0ng-Secret";
    let message = start_fails(&redis.url(wrong), &["--redis-ca", &ca]);
    assert!(
        message.to_lowercase().contains("authentication failed"),
        "{message}"
    );
    assert!(
        message.contains("rediss://idemgate:***@127.0.0.1"),
        "{message}"
    );
    assert!(!message.contains(wrong), "{message}");
    let message = start_fails(&redis.url(PASSWORD), &["--redis-ca", &other_ca]);
    assert!(message.to_lowercase().contains("certificate"), "{message}");
    assert!(!message.contains(PASSWORD), "{message}");
    // The system's roots do not hold the test CA either.
    let message = start_fails(&redis.url(PASSWORD), &[]);
    assert!(message.to_lowercase().contains("certificate"), "{message}");
    assert!(!message.contains(PASSWORD), "{message}");
    // A CA file that is not there: named, and the password is not.
    let message = start_fails(&redis.url(PASSWORD), &["--redis-ca", "/nonexistent/ca.pem"]);
    assert!(
        message.contains("--redis-ca /nonexistent/ca.pem"),
        "{message}"
    );
    assert!(!message.contains(PASSWORD), "{message}");
}

/// Runs the service expecting it to exit non-zero at start (bounded; killed by PID otherwise):
/// its stderr.
fn start_fails(url: &str, extra: &[&str]) -> String {
    let log = tempfile::NamedTempFile::new().expect("log file");
    let mut child = Command::new(service_binary())
        .args([
            "--listen",
            "127.0.0.1:0",
            "--redis",
            url,
            "--connect-timeout",
            "3s",
            // What fails here is Redis; the service's own transport is not under test.
            "--plaintext-unauthenticated",
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(log.reopen().expect("log file"))
        .spawn()
        .expect("the service runs");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the service did not stop: {}",
                std::fs::read_to_string(log.path()).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let message = std::fs::read_to_string(log.path()).expect("stderr");
    assert_eq!(status.code(), Some(1), "{message}");
    message
}
