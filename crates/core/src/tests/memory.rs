//! The local store's memory is bounded by bytes (`max_memory`), not by `capacity` times the
//! largest body: each fill shard keeps its part of the bound, and an answer that would take its
//! shard past it — or that a payer over its byte share adds while the shard is under pressure —
//! is stored without its body. A completion is never refused: the retry gets the honest no-body
//! replay, never a second execution.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::answer::{answer, EdgeAnswer, BODY_OMITTED_HEADER};
use crate::client::scope::{Scope, StorageKey};
use crate::decision::ResponseFacts;
use crate::policy::Policy;
use crate::record::{OwnerToken, StoredBody};
use crate::request::fingerprint::Fingerprint;
use crate::request::key::IdempotencyKey;
use crate::store::protocol::{ClaimOutcome, FinishOutcome};
use crate::store::share::{self, Payers};
use crate::store::{Layout, MemoryStore};
use crate::time::{Span, UnixMillis};
use crate::Protocol;
use std::prelude::rust_2021::{ToString, Vec};

const T0: UnixMillis = UnixMillis(1_700_000_000_000);
const BODY: usize = 60 * 1024;

fn policy(json: &str) -> Policy {
    Policy::from_json(json, &|_| None).unwrap()
}

struct Request {
    key: StorageKey,
    payers: Payers,
}

fn request(policy: &Policy, address: &str, n: usize) -> Request {
    let key = IdempotencyKey::parse(format!("k-{n}").as_bytes()).unwrap();
    let group = policy.shares.peer_group(address);
    let scope = Scope {
        source: "peer",
        value: address.as_bytes(),
    };
    Request {
        key: StorageKey::derive(scope, "POST", "/orders", &key),
        payers: policy.shares.payers(scope, false, Some(&group)),
    }
}

fn owner(n: usize) -> OwnerToken {
    let mut bytes = [0; 16];
    bytes[..8].copy_from_slice(&(n as u64).to_le_bytes());
    OwnerToken(bytes)
}

/// Claims `r`, completes it with a 201 of `BODY` bytes and a `Location`, and returns whether the
/// stored answer kept its body (read back by a retry, which must be a replay).
fn answered(
    protocol: &mut Protocol<'_, MemoryStore>,
    r: &Request,
    n: usize,
    now: UnixMillis,
) -> bool {
    let outcome = protocol
        .claim(r.key, Fingerprint([1; 32]), owner(n), r.payers, now)
        .unwrap();
    let ClaimOutcome::Forward { owner, .. } = outcome else {
        panic!("request {n}: {outcome:?}");
    };
    let facts = ResponseFacts::Upstream {
        status: 201,
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("location".into(), format!("/orders/{n}")),
        ],
        body: Some(vec![b'x'; BODY]),
    };
    let done = protocol.finish(r.key, owner, Some(facts), now).unwrap();
    assert_eq!(done, FinishOutcome::Stored, "a completion is never refused");
    let retry = protocol
        .claim(r.key, Fingerprint([1; 32]), owner, r.payers, now)
        .unwrap();
    let ClaimOutcome::Replay(stored) = retry else {
        panic!("retry of {n}: {retry:?}");
    };
    let kept = matches!(stored.body, StoredBody::Kept(_));
    let replay = answer(&EdgeAnswer::Replay {
        stored: &stored,
        replay_headers: &protocol.policy.replay_headers,
    });
    assert_eq!(replay.status, 201);
    let header = |name: &str| {
        replay
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    let location = format!("/orders/{n}");
    assert_eq!(header("location"), Some(location.as_str()));
    if kept {
        assert_eq!(replay.body.len(), BODY);
        assert_eq!(header(BODY_OMITTED_HEADER), None);
    } else {
        assert!(replay.body.is_empty());
        assert_eq!(header(BODY_OMITTED_HEADER), Some("true"));
        assert_eq!(header("content-type"), None);
    }
    kept
}

fn shard_bytes(store: &mut MemoryStore, policy: &Policy, key: &StorageKey, now: UnixMillis) -> u64 {
    let layout = Layout {
        capacity: policy.capacity,
    };
    let shard = layout.fill_shard(key);
    share::held(store, &layout, shard.tag, now).unwrap().bytes
}

/// 64 records make one fill shard, so the shard's part is all of `max_memory`: 300 KiB holds four
/// answers of 60 KiB (with their headers and overhead); the fifth is kept without its body, with
/// nobody's share in play. Once the first answers expire, bodies are kept whole again.
#[test]
fn an_answer_past_its_shards_part_of_max_memory_is_kept_without_its_body() {
    let policy = policy(
        r#"{"capacity": 64, "max_memory": "300KiB", "max_response_body": "64KiB", "ttl": "1h",
            "shares": {"identity": "off", "peer": "off"}}"#,
    );
    let mut store = MemoryStore::new();
    let mut protocol = Protocol {
        store: &mut store,
        policy: &policy,
    };
    let kept: Vec<bool> = (0..6)
        .map(|n| answered(&mut protocol, &request(&policy, "10.0.0.1", n), n, T0))
        .collect();
    assert_eq!(kept, [true, true, true, true, false, false]);
    let key = request(&policy, "10.0.0.1", 0).key;
    assert!(shard_bytes(&mut store, &policy, &key, T0) <= 300 * 1024);
    // An hour later the answers have expired: room again.
    let later = T0.after(Span::from_secs(3601));
    let mut protocol = Protocol {
        store: &mut store,
        policy: &policy,
    };
    assert!(answered(
        &mut protocol,
        &request(&policy, "10.0.0.1", 9),
        9,
        later
    ));
}

/// The byte shares bind like the record shares: only while the shard is under pressure — and
/// the pressure counts the shard's bytes (here half of its part of `max_memory`) as well as its
/// records. Nine answers of 60 KiB fill 9 of the shard's 64 records but more than half of its
/// bytes: a client past its byte share is refused then, and only then.
#[test]
fn a_byte_share_binds_once_the_shards_bytes_are_under_pressure() {
    let policy = policy(
        r#"{"capacity": 64, "max_memory": "1MiB", "max_response_body": "64KiB",
            "shares": {"identity": "off", "peer_bytes": "100KiB", "pressure": "50%"}}"#,
    );
    let mut store = MemoryStore::new();
    let mut protocol = Protocol {
        store: &mut store,
        policy: &policy,
    };
    // Not under pressure: the client's second 60 KiB answer takes it past 100 KiB, and a third
    // claim is still forwarded (and kept whole).
    for n in 0..3 {
        assert!(answered(
            &mut protocol,
            &request(&policy, "10.0.0.1", n),
            n,
            T0
        ));
    }
    // Six other clients, one answer each (within their shares): 9 records, over half the bytes.
    for client in 3..9 {
        let address = format!("10.0.1.{client}");
        assert!(answered(
            &mut protocol,
            &request(&policy, &address, client),
            client,
            T0
        ));
    }
    // Under pressure in bytes: the client past its byte share is refused, 429 until its records
    // free their space; another client within its share is still served whole.
    let r = request(&policy, "10.0.0.1", 10);
    let outcome = protocol
        .claim(r.key, Fingerprint([1; 32]), owner(10), r.payers, T0)
        .unwrap();
    assert!(
        matches!(outcome, ClaimOutcome::QuotaExceeded { .. }),
        "{outcome:?}"
    );
    assert!(answered(
        &mut protocol,
        &request(&policy, "10.0.2.1", 20),
        20,
        T0
    ));
}

/// The configuration refuses a byte bound whose smallest fill shard could not keep one answer of
/// `max_response_body`, and names both numbers.
#[test]
fn max_memory_too_small_for_one_answer_per_shard_is_refused_with_the_numbers() {
    let refused = Policy::from_json(r#"{"capacity": 1000, "max_memory": "1MiB"}"#, &|_| None)
        .unwrap_err()
        .to_string();
    assert!(refused.contains("max_memory"), "{refused}");
    assert!(refused.contains("1048576"), "{refused}");
    assert!(refused.contains("1110176"), "{refused}");
    // The defaults fit: 256 MiB over the default store's ten shards.
    assert!(Policy::from_json("{}", &|_| None).is_ok());
    // A million records split 256 MiB too thin; the refusal names the `max_memory` that does,
    // and that one is accepted.
    let big = |memory: &str| {
        Policy::from_json(
            &format!(r#"{{"capacity": 1000000, "max_memory": {memory}}}"#),
            &|_| None,
        )
    };
    let refused = big("\"256MiB\"").unwrap_err().to_string();
    assert!(refused.contains("at least 1927388889"), "{refused}");
    assert!(big("1927388889").is_ok());
    assert!(big("1927388888").is_err());
    // The remote store has no fill shards here: `capacity` only sizes its shares there.
    let secret = |name: &str| {
        (name == "IDEMGATE_RECORD_SECRET").then(|| "0123456789abcdef0123456789abcdef".to_string())
    };
    let remote = Policy::from_json(
        r#"{"capacity": 1000000, "store": {"kind": "remote", "cluster": "s"}}"#,
        &secret,
    );
    assert!(remote.is_ok(), "{remote:?}");
}
