//! Mutual TLS and logs, against the real service binary and a real `redis-server`, with
//! certificates made by `openssl` for each test: a connection without a client certificate, with
//! one from another CA, or in plain h2c gets no store operation; the plaintext opt-out still serves
//! h2c; without TLS settings the service does not start; every record's life is one JSON log line
//! with the storage key's hash, never the key. Run with `make test-store`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use hyper::StatusCode;
use idemgate_core::hash::to_hex;
use idemgate_core::store::remote::End;
use idemgate_core::store::remote::{Request, Response};
use idemgate_core::time::{Span, UnixMillis};
use idemgate_core::{ClaimOutcome, ConsumeOutcome, FinishOutcome};
use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use support::{claim, owner, service_binary, skey, stored_response, tls_client_config, Client};
use support::{Redis, Service, SLOW_OK};
use tokio_rustls::rustls;

/// One claim over a fresh connection made with `config`: the status, or why there was none.
async fn claim_over(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    name: &str,
) -> Result<StatusCode, String> {
    let mut client = Client::connect_tls(addr, config).await?;
    client
        .try_post("/v1/op", claim(skey(name), 1, 1).encode())
        .await
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and openssl: make test-store"]
async fn a_connection_without_a_valid_client_certificate_gets_no_operation() {
    let redis = Redis::start(false);
    let service = Service::start(&redis.url(), &["--op-timeout", SLOW_OK]);
    let pki = service.pki();
    let other = tempfile::tempdir().unwrap();
    let other = support::pki::make(other.path());

    // A real TLS client that trusts the service but presents no certificate.
    let anonymous = claim_over(service.addr, tls_client_config(&pki.ca, None), "anon").await;
    assert!(anonymous.is_err(), "no certificate: {anonymous:?}");
    // A certificate signed by another CA (well-formed, for clientAuth, just not ours).
    let stranger = tls_client_config(&pki.ca, Some((&pki.stranger_cert, &pki.stranger_key)));
    let stranger = claim_over(service.addr, stranger, "stranger").await;
    assert!(stranger.is_err(), "another CA's certificate: {stranger:?}");
    // A whole other PKI's client, which does trust our server's CA.
    let foreign = tls_client_config(&pki.ca, Some((&other.client_cert, &other.client_key)));
    let foreign = claim_over(service.addr, foreign, "foreign").await;
    assert!(foreign.is_err(), "a foreign PKI's certificate: {foreign:?}");
    // Plain h2c to the TLS port: not even an HTTP/2 connection.
    let plain = match Client::connect_plain(service.addr).await {
        Ok(mut client) => client
            .try_post("/v1/op", claim(skey("plain"), 1, 1).encode())
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e),
    };
    assert!(plain.is_err(), "h2c to the TLS port: {plain:?}");

    // Nothing reached Redis, nothing was counted as an operation; four refusals were.
    assert_eq!(redis.cli(&["dbsize"]).trim(), "0");
    let client = Client::connect(&service).await;
    // The service counts a refusal once its side of the handshake has failed, which a loaded
    // machine may schedule after the client saw the alert: wait for it, up to 5 s.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let metrics = loop {
        let metrics = client.get("/metrics").await.1;
        if metrics.contains("idemgate_store_tls_refused_total 4")
            || std::time::Instant::now() > deadline
        {
            break metrics;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(
        metrics.contains("idemgate_store_tls_refused_total 4"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("idemgate_store_operations_total{"),
        "{metrics}"
    );
    // The same claim with the right certificate lands: the refusals above were about identity.
    let (status, answer) = client.op(&claim(skey("anon"), 1, 1)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(matches!(
        answer,
        Response::Claim(ClaimOutcome::Forward { .. })
    ));
    assert_eq!(redis.cli(&["dbsize"]).trim(), "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and openssl: make test-store"]
async fn http_1_1_is_offered_by_alpn_for_probes() {
    let redis = Redis::start(false);
    let service = Service::start(&redis.url(), &[]);
    let pki = service.pki();
    let mut config =
        (*tls_client_config(&pki.ca, Some((&pki.client_cert, &pki.client_key)))).clone();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = tokio::net::TcpStream::connect(service.addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let (mut send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    let request = hyper::Request::get("/healthz")
        .header("host", "localhost")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let response = send.send_request(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn plaintext_unauthenticated_still_serves_h2c() {
    let redis = Redis::start(false);
    let mut command = Command::new(service_binary());
    command.args(["--listen", "127.0.0.1:0", "--redis", &redis.url()]);
    command.arg("--plaintext-unauthenticated");
    let mut service = Service::launch(command, false);
    let client = Client::connect(&service).await;
    let (status, answer) = client.op(&claim(skey("plain-ok"), 1, 1)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(matches!(
        answer,
        Response::Claim(ClaimOutcome::Forward { .. })
    ));
    assert!(
        service.take_stderr().contains("without TLS"),
        "the opt-out is logged: {}",
        service.take_stderr()
    );
}

#[test]
#[ignore = "needs openssl: make test-store"]
fn without_tls_settings_the_service_does_not_start() {
    let run = |args: &[&str]| {
        let out = Command::new(service_binary())
            .args(["--listen", "127.0.0.1:0", "--redis", "redis://127.0.0.1:1"])
            .args(args)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(!stdout.contains("listening"), "it started: {stdout}");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stderr) = run(&[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--tls-cert") && stderr.contains("--plaintext-unauthenticated"),
        "{stderr}"
    );
    let dir = tempfile::tempdir().unwrap();
    let pki = support::pki::make(dir.path());
    let cert = pki.server_cert.display().to_string();
    let key = pki.server_key.display().to_string();
    let (code, stderr) = run(&["--tls-cert", &cert, "--tls-key", &key]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("missing --client-ca"), "{stderr}");
    // Files that are not what the flag needs: named in the message, before any engine is tried.
    let ca = pki.ca.display().to_string();
    let (code, stderr) = run(&["--tls-cert", &key, "--tls-key", &key, "--client-ca", &ca]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("--tls-cert") && stderr.contains("no PEM certificate"),
        "{stderr}"
    );
    let missing = dir.path().join("absent.pem").display().to_string();
    let (code, stderr) = run(&[
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--client-ca",
        &missing,
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("--client-ca") && stderr.contains("absent.pem"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and openssl: make test-store"]
async fn each_record_event_is_one_json_line_with_the_key_hash_only() {
    let redis = Redis::start(false);
    let mut service = Service::start(
        &redis.url(),
        &["--op-timeout", SLOW_OK, "--log-format", "json"],
    );
    let client = Client::connect(&service).await;
    let (kept, freed, token) = (skey("log-kept"), skey("log-freed"), skey("log-token"));
    for (key, n) in [(kept, 1), (freed, 2)] {
        assert!(matches!(
            client.op(&claim(key, 1, n)).await.1,
            Response::Claim(ClaimOutcome::Forward { .. })
        ));
    }
    let finish = |key, n, end| Request::Finish {
        key,
        owner: owner(n),
        ttl: Span::from_secs(60),
        end,
        shard: None,
    };
    let stored = finish(kept, 1, End::Store(stored_response(1)));
    assert_eq!(
        client.op(&stored).await.1,
        Response::Finish(FinishOutcome::Stored)
    );
    assert_eq!(
        client.op(&finish(freed, 2, End::Release)).await.1,
        Response::Finish(FinishOutcome::Released)
    );
    // A replay changes nothing: no line.
    assert!(matches!(
        client.op(&claim(kept, 1, 3)).await.1,
        Response::Claim(ClaimOutcome::Replay(_))
    ));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let consume = Request::Consume {
        key: token,
        expires_at: UnixMillis(now.as_millis() as u64 + 60_000),
        payers: vec![],
        fill: None,
    };
    assert_eq!(
        client.op(&consume).await.1,
        Response::Consume(ConsumeOutcome::Consumed)
    );

    let log = service.take_stderr();
    let events: Vec<(String, String)> = log
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("a JSON log line"))
        .filter(|line| line["target"] == "idemgate_store::record")
        .map(|line| {
            assert_eq!(line["level"], "INFO", "{line}");
            (
                line["event"].as_str().unwrap().to_owned(),
                line["key_hash"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let hash = |key: idemgate_core::client::scope::StorageKey| key.log_label();
    assert_eq!(
        events,
        vec![
            ("created".into(), hash(kept)),
            ("created".into(), hash(freed)),
            ("completed".into(), hash(kept)),
            ("released".into(), hash(freed)),
            ("token_used".into(), hash(token)),
        ],
        "{log}"
    );
    for key in [kept, freed, token] {
        assert!(
            !log.contains(&to_hex(key.as_bytes())),
            "a storage key in clear: {log}"
        );
    }
}
