//! The requests, payers and example configuration the share tests send and run.

use crate::client::payer::Payers;
use crate::client::scope::{Scope, StorageKey};
use crate::decision::ResponseFacts;
use crate::policy::Policy;
use crate::record::OwnerToken;
use crate::request::fingerprint::Fingerprint;
use crate::request::key::IdempotencyKey;
use crate::store::protocol::{ClaimOutcome, FinishOutcome};
use crate::store::MemoryStore;
use crate::time::UnixMillis;
use crate::Protocol;
use std::prelude::rust_2021::Vec;

pub(crate) const T0: UnixMillis = UnixMillis(1_700_000_000_000);

pub(crate) fn policy(json: &str) -> Policy {
    Policy::from_json(json, &|_| None).unwrap()
}

/// A request's storage key and payers, as the filter derives them.
pub(crate) struct Request {
    pub(crate) key: StorageKey,
    pub(crate) payers: Payers,
}

pub(crate) fn request(
    policy: &Policy,
    authorization: Option<&str>,
    address: &str,
    n: usize,
) -> Request {
    let key = IdempotencyKey::parse(format!("k-{n}").as_bytes()).unwrap();
    let group = policy.shares.peer_group(address);
    let scope = match authorization {
        Some(value) => Scope {
            source: "header:authorization",
            value: value.as_bytes(),
        },
        None => Scope {
            source: "peer",
            value: address.as_bytes(),
        },
    };
    Request {
        key: StorageKey::derive(scope, "POST", "/orders", &key),
        payers: policy.shares.payers(scope, false, Some(&group)),
    }
}

pub(crate) fn owner(n: usize) -> OwnerToken {
    let mut bytes = [0; 16];
    bytes[..8].copy_from_slice(&(n as u64).to_le_bytes());
    OwnerToken(bytes)
}

/// Claims and completes (a stored 404, as the issue's app answers) `request`.
pub(crate) fn run(
    protocol: &mut Protocol<'_, MemoryStore>,
    r: &Request,
    n: usize,
    now: UnixMillis,
) -> ClaimOutcome {
    let outcome = protocol
        .claim(r.key, Fingerprint([1; 32]), owner(n), r.payers, now)
        .unwrap();
    if let ClaimOutcome::Forward { owner, .. } = outcome {
        let facts = ResponseFacts::Upstream {
            status: 404,
            headers: Vec::new(),
            body: Some(b"not found".to_vec()),
        };
        let done = protocol.finish(r.key, owner, Some(facts), now).unwrap();
        assert_eq!(done, FinishOutcome::Stored);
    }
    outcome
}

/// The example's capacity and TTL, with cells of 64 records so that a store filled past its
/// pressure by 35 other clients does not fill single cells by chance (a `store_full` is not what
/// these tests are about), and shares that bind from 30 %.
pub(crate) const EXAMPLE: &str = r#"{"capacity": 1000, "records_per_cell": 64, "ttl": "24h", "lease": "60s",
    "shares": {"pressure": "30%"}}"#;

/// Fills `engine`'s store past the pressure of [`EXAMPLE`]: 350 records of 35 clients, each
/// within its share.
pub(crate) fn fill_past_pressure(protocol: &mut Protocol<'_, MemoryStore>, policy: &Policy) {
    for client in 0..35 {
        let address = format!("10.9.0.{client}");
        for n in 0..10 {
            let i = 100_000 + client * 100 + n;
            let outcome = run(protocol, &request(policy, None, &address, i), i, T0);
            assert!(
                matches!(outcome, ClaimOutcome::Forward { .. }),
                "{address}: {outcome:?}"
            );
        }
    }
}
