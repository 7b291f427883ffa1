//! What the tests send and expect: owners, stored answers, storage keys, claims, concurrent claims
//! and an answer once the engine has recovered.

use super::client::Client;
use hyper::StatusCode;
use idemgate_core::client::scope::{Scope, StorageKey};
use idemgate_core::record::{OwnerToken, StoredBody, StoredResponse};
use idemgate_core::request::fingerprint::Fingerprint;
use idemgate_core::request::key::IdempotencyKey;
use idemgate_core::store::remote;
use idemgate_core::time::Span;
use idemgate_core::ClaimOutcome;
use std::time::{Duration, Instant};

/// Generous: these tests check outcomes, not speed, on a shared 2-core machine.
pub const SLOW_OK: &str = "5s";

/// Owner token number `n`.
pub fn owner(n: u32) -> OwnerToken {
    let mut token = [0u8; 16];
    token[..4].copy_from_slice(&n.to_be_bytes());
    OwnerToken(token)
}

/// A 70 KB answer of every byte value, so a lossy conversion anywhere would show.
pub fn stored_response(seed: u8) -> StoredResponse {
    let body: Vec<u8> = (0..70_000u32)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect();
    StoredResponse {
        status: 201,
        headers: vec![
            ("content-type".into(), "application/octet-stream".into()),
            ("location".into(), format!("/orders/{seed}")),
        ],
        body: StoredBody::Kept(body),
        seal: None,
    }
}

/// `n` concurrent claims of each key (owner `k << 16 | i`), spread over `clients` connections:
/// per key, the number of Forward and Conflict answers (anything else fails the test).
pub async fn concurrent_claims(
    clients: &[Client],
    keys: &[impl AsRef<str>],
    n: u32,
) -> Vec<(usize, usize)> {
    let mut tasks = Vec::new();
    for (k, name) in keys.iter().enumerate() {
        for i in 0..n {
            let client = clients[i as usize % clients.len()].clone();
            let request = claim(skey(name.as_ref()), 7, (k as u32) << 16 | i);
            tasks.push((k, tokio::spawn(async move { client.op(&request).await })));
        }
    }
    let mut counts = vec![(0, 0); keys.len()];
    for (k, task) in tasks {
        match task.await.unwrap() {
            (
                StatusCode::OK,
                remote::Response::Claim(ClaimOutcome::Forward {
                    takeover: false, ..
                }),
            ) => counts[k].0 += 1,
            (StatusCode::OK, remote::Response::Claim(ClaimOutcome::Conflict { retry_after })) => {
                assert!(retry_after > Span(0) && retry_after <= Span::from_secs(30));
                counts[k].1 += 1
            }
            other => panic!("unexpected answer to a claim: {other:?}"),
        }
    }
    counts
}

/// The answer to `request` once the engine is back (restarted, resumed): a typed failure (503) is
/// retried for up to 20 s while the service reconnects; any other answer ends the wait.
pub async fn once_recovered(
    client: &Client,
    request: &remote::Request,
    what: &str,
) -> remote::Response {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match client.op(request).await {
            (StatusCode::OK, answer) => return answer,
            (status, remote::Response::Failed(_)) if Instant::now() < deadline => {
                assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{what}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => panic!("{what}: {other:?}"),
        }
    }
}

/// A real storage key (SHA-256 of scope, method, route and key), so keys spread over cluster slots.
pub fn skey(name: &str) -> StorageKey {
    let key = IdempotencyKey::parse(name.as_bytes()).expect("a valid key");
    let scope = Scope {
        source: "header:authorization",
        value: b"Bearer fleet-test",
    };
    StorageKey::derive(scope, "POST", "/orders", &key)
}

pub fn claim(key: StorageKey, fingerprint: u8, owner: u32) -> remote::Request {
    remote::Request::Claim {
        key,
        fingerprint: Fingerprint([fingerprint; 32]),
        owner: self::owner(owner),
        lease: Span::from_secs(30),
        ttl: Span::from_secs(3600),
        payers: vec![],
        fill: None,
    }
}
