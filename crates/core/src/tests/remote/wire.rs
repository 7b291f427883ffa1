//! The wire codec: messages round-trip, garbage and damage get typed errors, a stored value
//! belongs to its key, and a callout's answer is decoded or refused.

use super::engine::ModelEngine;
use super::support::{claim, finish_store, sample_responses, samples, secrets, skey};
use crate::client::payer::{Billed, PayerTag, Share};
use crate::record::{Record, StoredBody, StoredResponse};
use crate::store::protocol::{ClaimOutcome, FinishOutcome};
use crate::store::remote::client::CalloutReply;
use crate::store::remote::{
    client, Failure, Request, Response, StoredValue, ValueVersion, WireError,
};
use crate::store::share::{Fill, FillShard};
use crate::time::UnixMillis;
use proptest::prelude::*;
use std::prelude::rust_2021::{ToString, Vec};

#[test]
fn messages_round_trip() {
    for request in samples() {
        assert_eq!(Request::decode(&request.encode()), Ok(request));
    }
    for response in sample_responses() {
        assert_eq!(Response::decode(&response.encode()), Ok(response));
    }
}

#[test]
fn a_claim_request_is_compact() {
    // magic 2 + version 1 + op 1 + key 32 + fingerprint 32 + owner 16 + lease 8 + ttl 8
    assert_eq!(claim(1, 2, 3).encode().len(), 100);
}

#[test]
fn garbage_gets_typed_errors() {
    let good = claim(1, 2, 3).encode();
    assert_eq!(Request::decode(b""), Err(WireError::Truncated));
    assert_eq!(Request::decode(b"GET / HTTP/1.1"), Err(WireError::BadMagic));
    // Version 1 (before sealed answers), 2 (before shares in bytes), 3 (before sealed resource
    // states), 4 (before fill shards), 5 (before refusals named their share) and a future
    // version are refused alike.
    for version in [1, 2, 3, 4, 5, 7] {
        let mut other = good.clone();
        other[2] = version;
        assert_eq!(
            Request::decode(&other),
            Err(WireError::UnsupportedVersion(version))
        );
    }
    let mut op = good.clone();
    op[3] = 99;
    assert_eq!(Request::decode(&op), Err(WireError::UnknownOp(99)));
    assert_eq!(
        Request::decode(&good[..good.len() - 1]),
        Err(WireError::Truncated)
    );
    // After a claim come its payers (a count of 0 only before a fill shard); after a finish,
    // its shard.
    let mut long = good.clone();
    long.push(0);
    assert_eq!(Request::decode(&long), Err(WireError::OutOfRange));
    let mut long = finish_store(1, 3, b"x").encode();
    long.push(0);
    assert_eq!(Request::decode(&long), Err(WireError::Truncated));
    let billed = |tags: &[u8], fill: Option<Fill>| {
        let payers: Vec<Billed> = tags
            .iter()
            .map(|&t| Billed {
                tag: PayerTag([t; 8]),
                share: Share {
                    records: 5,
                    bytes: 1 << 20,
                },
            })
            .collect();
        match claim(1, 2, 3) {
            Request::Claim {
                key,
                fingerprint,
                owner,
                lease,
                ttl,
                ..
            } => Request::Claim {
                key,
                fingerprint,
                owner,
                lease,
                ttl,
                payers,
                fill,
            },
            other => other,
        }
    };
    let two = billed(&[1, 2], None);
    assert_eq!(Request::decode(&two.encode()), Ok(two));
    let twice = billed(&[1, 1], None).encode();
    assert_eq!(Request::decode(&twice), Err(WireError::OutOfRange));
    let three = billed(&[1, 2, 3], None).encode();
    assert_eq!(Request::decode(&three), Err(WireError::OutOfRange));
    let fill = |capacity, pressure| Fill {
        shard: FillShard {
            tag: PayerTag([7; 8]),
            capacity,
        },
        pressure,
    };
    for payers in [&[][..], &[1], &[1, 2]] {
        let counted = billed(payers, Some(fill(1_024, 20)));
        assert_eq!(Request::decode(&counted.encode()), Ok(counted));
    }
    let overpressed = billed(&[1], Some(fill(1_024, 101))).encode();
    assert_eq!(Request::decode(&overpressed), Err(WireError::OutOfRange));
    let empty_shard = billed(&[], Some(fill(0, 20))).encode();
    assert_eq!(Request::decode(&empty_shard), Err(WireError::OutOfRange));
    let mut finish = finish_store(1, 3, b"x");
    if let Request::Finish { shard, .. } = &mut finish {
        *shard = Some(fill(1_024, 0).shard);
    }
    assert_eq!(Request::decode(&finish.encode()), Ok(finish));
    let mut zero_ttl = good.clone();
    let n = zero_ttl.len();
    zero_ttl[n - 8..].fill(0);
    assert_eq!(Request::decode(&zero_ttl), Err(WireError::ZeroTtl));
    let mut huge_ttl = good.clone();
    huge_ttl[n - 8..].fill(0xff);
    assert_eq!(Request::decode(&huge_ttl), Err(WireError::OutOfRange));
    let far = Request::Consume {
        key: skey(1),
        expires_at: UnixMillis(u64::MAX / 2),
        payers: vec![],
        fill: None,
    };
    assert_eq!(Request::decode(&far.encode()), Err(WireError::OutOfRange));
    // A response is not a request, and the other way round.
    assert_eq!(
        Request::decode(&Response::Failed(Failure::Timeout).encode()),
        Err(WireError::BadMagic)
    );
    assert_eq!(Response::decode(&good), Err(WireError::BadMagic));
}

#[test]
fn a_replay_cannot_smuggle_a_header() {
    let bad = Response::Claim(ClaimOutcome::Replay(StoredResponse {
        status: 200,
        headers: vec![("set-cookie".into(), "session=stolen".into())],
        body: StoredBody::NotKept,
        seal: None,
    }));
    assert_eq!(
        Response::decode(&bad.encode()),
        Err(WireError::InvalidHeader)
    );
    let split = Response::Claim(ClaimOutcome::Replay(StoredResponse {
        status: 200,
        headers: vec![("location".into(), "/a\r\nx-evil: 1".into())],
        body: StoredBody::NotKept,
        seal: None,
    }));
    assert_eq!(
        Response::decode(&split.encode()),
        Err(WireError::InvalidHeader)
    );
    let status = Response::Claim(ClaimOutcome::Replay(StoredResponse {
        status: 42,
        headers: vec![],
        body: StoredBody::NotKept,
        seal: None,
    }));
    assert_eq!(
        Response::decode(&status.encode()),
        Err(WireError::InvalidStatus(42))
    );
}

#[test]
fn a_failure_is_an_error_for_the_failure_mode() {
    let err = Response::Failed(Failure::Timeout).into_claim().unwrap_err();
    assert_eq!(err.code(), "store_unavailable");
    assert!(err.to_string().contains("remote_timeout"));
    let confused = Response::Finish(FinishOutcome::Stored).into_claim();
    assert_eq!(confused.unwrap_err().code(), "store_unexpected_reply");
}

#[test]
fn a_stored_value_belongs_to_its_key() {
    let value = StoredValue {
        version: ValueVersion([5; 16]),
        record: Record::TokenUsed {
            expires_at: UnixMillis(10),
        },
    };
    let bytes = value.encode(&skey(1));
    assert_eq!(StoredValue::decode(&skey(1), &bytes), Ok(value));
    assert_eq!(
        StoredValue::decode(&skey(2), &bytes),
        Err(WireError::KeyMismatch)
    );
    assert_eq!(
        StoredValue::decode(&skey(1), &bytes[..10]),
        Err(WireError::Truncated)
    );
}

#[test]
fn an_unreadable_value_is_never_overwritten() {
    let mut engine = ModelEngine::default();
    let now = UnixMillis(1000);
    engine.keys.insert(
        *skey(1).as_bytes(),
        (b"not a record at all".to_vec(), UnixMillis(5000)),
    );
    assert_eq!(
        engine.run(claim(1, 1, 1), now),
        Response::Failed(Failure::Corrupt)
    );
    assert_eq!(engine.keys[skey(1).as_bytes()].0, b"not a record at all");
}

#[test]
fn callout_answers_are_decoded_or_refused() {
    let ok = Response::Claim(ClaimOutcome::Mismatch).encode();
    let failed = Response::Failed(Failure::Timeout).encode();
    let answer =
        |status, body| client::claim_outcome(CalloutReply { status, body }, &skey(1), &secrets());
    assert_eq!(answer(Some(200), &ok), Ok(ClaimOutcome::Mismatch));
    // No answer, a proxy's error page, a truncated body: store errors for the failure mode.
    assert_eq!(answer(None, &ok).unwrap_err().code(), "store_unavailable");
    assert_eq!(
        answer(Some(503), b"upstream connect error")
            .unwrap_err()
            .code(),
        "store_unavailable"
    );
    assert_eq!(
        answer(Some(200), &ok[..ok.len() - 1]).unwrap_err().code(),
        "store_unavailable"
    );
    assert_eq!(
        answer(Some(503), &failed).unwrap_err().to_string(),
        "store unavailable: remote_timeout"
    );
    // A status that contradicts the body is not trusted either way.
    assert_eq!(
        answer(Some(503), &ok).unwrap_err().code(),
        "store_unexpected_reply"
    );
    assert_eq!(
        answer(Some(200), &failed).unwrap_err().code(),
        "store_unexpected_reply"
    );
    // An answer to another operation.
    let finish = Response::Finish(FinishOutcome::Stored).encode();
    assert_eq!(
        answer(Some(200), &finish).unwrap_err().code(),
        "store_unexpected_reply"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Arbitrary bytes never panic a decoder.
    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = Request::decode(&bytes);
        let _ = Response::decode(&bytes);
        let _ = StoredValue::decode(&skey(1), &bytes);
    }

    /// Damaging any byte of a valid message gives a typed error or another valid message, never a
    /// panic; cutting it short is always `Truncated`.
    #[test]
    fn damaged_messages_fail_cleanly(index in 0usize..100, byte in any::<u8>(), cut in 0usize..100) {
        for request in samples() {
            let mut bytes = request.encode();
            let i = index % bytes.len();
            bytes[i] = byte;
            let _ = Request::decode(&bytes);
            let whole = request.encode();
            let cut = cut % whole.len();
            prop_assert_eq!(Request::decode(&whole[..cut]), Err(WireError::Truncated));
        }
    }
}
