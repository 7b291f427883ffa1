//! A stored answer through the service is sealed, and replays only while its seal holds.

use super::engine::ModelEngine;
use super::support::{remote_claim, remote_finish, secrets, skey};
use crate::client::payer::Payers;
use crate::decision::ResponseFacts;
use crate::policy::Policy;
use crate::record::seal::{RecordSecrets, SealError};
use crate::record::{OwnerToken, Record, StoredBody, StoredResponse};
use crate::request::fingerprint::Fingerprint;
use crate::store::protocol::{ClaimOutcome, FinishOutcome, ProtocolError};
use crate::store::remote::{client, StoredValue};
use crate::time::UnixMillis;

#[test]
fn a_stored_answer_is_sealed_and_replays_only_while_its_seal_holds() {
    let policy = Policy::defaults();
    let mut engine = ModelEngine::default();
    let now = UnixMillis(1_000_000);
    let key = skey(4);
    let claim = |owner: u8| {
        client::claim(
            key,
            Fingerprint([1; 32]),
            OwnerToken([owner; 16]),
            Payers::NONE,
            &policy,
        )
    };
    assert!(matches!(
        remote_claim(&mut engine, claim(1), now),
        Ok(ClaimOutcome::Forward { .. })
    ));
    let facts = ResponseFacts::Upstream {
        status: 201,
        headers: vec![("content-type".into(), "application/json".into())],
        body: Some(b"{\"id\":1}".to_vec()),
    };
    let finished = remote_finish(&mut engine, &policy, key, OwnerToken([1; 16]), facts, now);
    assert_eq!(finished, FinishOutcome::Stored);
    let Ok(ClaimOutcome::Replay(stored)) = remote_claim(&mut engine, claim(2), now) else {
        panic!("the sealed answer replays")
    };
    assert_eq!(secrets().check(&key, &stored), Ok(()));

    // Whoever can write the engine rewrites the value: a planted header, another body, another
    // status, no seal at all. Each keeps the value's framing (version, key, record), so the
    // service reads it and sends it on; the filter's check refuses it.
    let value = engine.keys[key.as_bytes()].0.clone();
    let original = StoredValue::decode(&key, &value).unwrap();
    let Record::Completed(done) = &original.record else {
        panic!("a completed record")
    };
    let forged: [fn(&mut StoredResponse); 5] = [
        |r| {
            r.headers
                .push(("access-control-allow-origin".into(), "*".into()))
        },
        |r| r.body = StoredBody::Kept(b"{\"id\":2}".to_vec()),
        |r| r.status = 200,
        |r| r.seal = None,
        |r| {
            // Sealed, but with another secret.
            let other = RecordSecrets::new(&[b"not-the-fleet-secret-0123456789abcd"]).unwrap();
            *r = other.seal(&skey(4), r.clone());
        },
    ];
    for forge in &forged {
        let mut response = done.response.clone();
        forge(&mut response);
        let mut record = done.clone();
        record.response = response;
        let planted = StoredValue {
            version: original.version,
            record: Record::Completed(record),
        };
        let expiry = engine.keys[key.as_bytes()].1;
        engine
            .keys
            .insert(*key.as_bytes(), (planted.encode(&key), expiry));
        let refused = remote_claim(&mut engine, claim(3), now).unwrap_err();
        assert!(matches!(refused, ProtocolError::Tampered(_)), "{refused:?}");
        assert!(!refused.allows_failure_mode());
        assert_eq!(refused.code(), "record_corrupt");
    }

    // The genuine answer of one key, copied under another key (re-framed for that key): its
    // seal names the first key.
    let other = skey(5);
    let moved = StoredValue {
        version: original.version,
        record: original.record.clone(),
    };
    engine.keys.insert(
        *other.as_bytes(),
        (moved.encode(&other), UnixMillis(u64::MAX)),
    );
    let claim_other = client::claim(
        other,
        Fingerprint([1; 32]),
        OwnerToken([4; 16]),
        Payers::NONE,
        &policy,
    );
    assert_eq!(
        remote_claim(&mut engine, claim_other, now),
        Err(ProtocolError::Tampered(SealError::Mismatch))
    );
}
