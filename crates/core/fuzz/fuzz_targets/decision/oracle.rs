//! The `decide` / `complete` invariants, checked on one record and its facts.

use idemgate_core::answer::{answer, EdgeAnswer};
use idemgate_core::client::scope::StorageKey;
use idemgate_core::decision::{complete, decide, Completion, Decision, ResponseFacts};
use idemgate_core::headers::NEVER_REPLAYED;
use idemgate_core::policy::Policy;
use idemgate_core::record::{Bucket, InFlight, OwnerToken, Record, StoredBody};
use idemgate_core::request::fingerprint::Fingerprint;
use idemgate_core::time::UnixMillis;

pub(crate) fn live(record: Option<&Record>, now: UnixMillis) -> Option<&Record> {
    record.filter(|r| !r.is_expired(now))
}

pub(crate) fn check_decide(
    record: Option<&Record>,
    fp: Fingerprint,
    owner: OwnerToken,
    now: UnixMillis,
    policy: &Policy,
) -> Decision {
    let decision = decide(record, fp, owner, now, policy);
    match (&decision, live(record, now)) {
        (Decision::Claim { claim, takeover }, found) => {
            assert!(
                claim.lease_until <= claim.expires_at,
                "lease outlives the record: {claim:?}"
            );
            assert_eq!(claim.expires_at, now.after(policy.ttl));
            assert_eq!(
                claim.lease_until,
                now.after(policy.lease).min(claim.expires_at)
            );
            assert_eq!((claim.owner, claim.fingerprint), (owner, fp));
            if now.0 < u64::MAX {
                assert!(
                    !Record::InFlight(claim.clone()).is_expired(now),
                    "claim born expired"
                );
            }
            match found {
                None => assert!(!takeover),
                Some(Record::InFlight(f)) => {
                    assert!(
                        *takeover && f.fingerprint == fp && now >= f.lease_until,
                        "took over {f:?} at {now:?}"
                    );
                }
                Some(other) => panic!("live {other:?} turned into a claim at {now:?}"),
            }
        }
        (Decision::Conflict { retry_after }, Some(Record::InFlight(f))) => {
            assert!(retry_after.as_millis() > 0, "Conflict with retry_after 0");
            assert_eq!(now.after(*retry_after), f.lease_until);
            assert_eq!(f.fingerprint, fp);
        }
        (Decision::Replay(response), Some(Record::Completed(done))) => {
            assert_eq!(done.fingerprint, fp);
            assert_eq!(response, &done.response);
        }
        (Decision::Mismatch, Some(Record::InFlight(f))) => assert_ne!(f.fingerprint, fp),
        (Decision::Mismatch, Some(Record::Completed(done))) => assert_ne!(done.fingerprint, fp),
        (Decision::Mismatch, Some(Record::TokenUsed { .. })) => {}
        (d, found) => panic!("decided {d:?} on {found:?} at {now:?}"),
    }
    // The HTTP form.
    let http = match &decision {
        Decision::Conflict { retry_after } => Some(answer(&EdgeAnswer::Conflict {
            retry_after: *retry_after,
        })),
        Decision::Mismatch => Some(answer(&EdgeAnswer::Mismatch)),
        Decision::Replay(r) => Some(answer(&EdgeAnswer::Replay {
            stored: r,
            replay_headers: &policy.replay_headers,
        })),
        Decision::Claim { .. } => None,
    };
    if let (Some(http), Decision::Conflict { .. }) = (&http, &decision) {
        assert_eq!(http.status, 409);
        let secs: u64 = http
            .header("retry-after")
            .expect("409 without Retry-After")
            .parse()
            .unwrap();
        assert!(secs >= 1);
    }
    decision
}

fn safe_header(name: &str, value: &str) -> bool {
    !name.is_empty()
        && name.len() <= 256
        && value.len() <= 8192
        && name.bytes().all(|b| b.is_ascii_graphic() && b != b':')
        && !value.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0))
}

pub(crate) fn check_complete(
    claim: &InFlight,
    facts: ResponseFacts,
    at: UnixMillis,
    policy: &Policy,
) -> Completion {
    let completion = complete(claim, facts.clone(), at, policy);
    match (facts, &completion) {
        (ResponseFacts::NeverReached, Completion::Release)
        | (ResponseFacts::InDoubt, Completion::KeepInFlight) => {}
        // Finding 1: a fix may refuse to store a status the record format cannot hold.
        (
            ResponseFacts::Upstream { status, .. },
            Completion::Release | Completion::KeepInFlight,
        ) if !(100..=999).contains(&status) => {}
        (ResponseFacts::Upstream { status, .. }, Completion::Release) => {
            assert!(!policy.store_rule.stores(status))
        }
        (
            ResponseFacts::Upstream {
                status,
                headers,
                body,
            },
            Completion::Store(done),
        ) => {
            assert!(policy.store_rule.stores(status));
            assert_eq!(done.fingerprint, claim.fingerprint);
            assert_eq!(done.response.status, status);
            assert!(done.expires_at >= claim.expires_at && done.expires_at >= at.after(policy.ttl));
            let expected: Vec<(String, String)> = headers
                .into_iter()
                .filter(|(n, v)| policy.replays_header(n) && safe_header(n, v))
                .map(|(n, v)| (n.to_ascii_lowercase(), v))
                .take(idemgate_core::record::MAX_STORED_HEADERS)
                .collect();
            assert_eq!(done.response.headers, expected);
            for (name, _) in &done.response.headers {
                assert!(
                    !NEVER_REPLAYED.contains(&name.as_str()) && !name.starts_with("x-envoy-"),
                    "stored {name}"
                );
            }
            match (body, &done.response.body) {
                (Some(b), StoredBody::Kept(kept)) => {
                    assert!(b.len() as u64 <= policy.max_response_body && &b == kept)
                }
                (Some(b), StoredBody::NotKept) => {
                    assert!(b.len() as u64 > policy.max_response_body)
                }
                (None, StoredBody::NotKept) => {}
                (None, StoredBody::Kept(_)) => panic!("kept a body that was not there"),
            }
            // What `complete` decides to store must survive the store.
            let mut bucket = Bucket::default();
            bucket.put(
                StorageKey::from_stored([1; 32]),
                Record::Completed(done.clone()),
            );
            assert_eq!(
                Bucket::decode(&bucket.encode()),
                Ok(bucket),
                "a stored answer does not decode"
            );
            if at.0 < u64::MAX {
                let replayed = check_decide(
                    Some(&Record::Completed(done.clone())),
                    claim.fingerprint,
                    OwnerToken([0xee; 16]),
                    at,
                    policy,
                );
                assert!(
                    matches!(replayed, Decision::Replay(_)),
                    "just stored, not replayed: {replayed:?}"
                );
            }
        }
        (facts, c) => panic!("completed {facts:?} as {c:?}"),
    }
    completion
}
