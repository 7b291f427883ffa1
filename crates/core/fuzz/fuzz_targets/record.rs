//! `Bucket::decode` and `Ledger::decode` on arbitrary cell bytes (a tampered or corrupted store
//! cell, a ledger cell of the shares).
//!
//! Checks: never panics; a decoded bucket round-trips through `encode` (and a non-empty one
//! re-encodes to exactly the input: one spelling per bucket); stored header names and values hold
//! no CR, LF or NUL, also after `answer` turns a replay into HTTP; the claim protocol reading this
//! cell either refuses it as `Corrupt` with the decoder's error or decides on it without panicking.
#![no_main]

use idemgate_core::answer::{answer, EdgeAnswer};
use idemgate_core::client::scope::StorageKey;
use idemgate_core::decision::decide;
use idemgate_core::policy::Policy;
use idemgate_core::record::{Bucket, OwnerToken, Record, StoredBody};
use idemgate_core::request::fingerprint::Fingerprint;
use idemgate_core::store::protocol::{Claiming, StoreReply, StoreRequest, Transaction, TransactionStep};
use idemgate_core::ProtocolError;
use idemgate_core::store::share::ledger::Ledger;
use idemgate_core::store::Snapshot;
use idemgate_core::time::UnixMillis;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn policy() -> &'static Policy {
    static POLICY: OnceLock<Policy> = OnceLock::new();
    POLICY.get_or_init(Policy::defaults)
}

fn unsafe_text(text: &str) -> bool {
    text.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0))
}

fuzz_target!(|data: &[u8]| {
    // A ledger cell: never a panic; what decodes re-encodes to exactly the input — except a
    // cell of version 1 (before bytes were counted), which is written back in the current one.
    if let Ok(ledger) = Ledger::decode(data) {
        let encoded = ledger.encode();
        assert_eq!(
            Ledger::decode(&encoded).as_ref(),
            Ok(&ledger),
            "ledger round trip"
        );
        if data.get(2) != Some(&1) {
            assert_eq!(encoded, data, "a decoded ledger re-encodes to other bytes");
        }
    }
    let decoded = Bucket::decode(data);
    let now = UnixMillis(1_700_000_000_000);

    if let Ok(bucket) = &decoded {
        let encoded = bucket.encode();
        assert_eq!(
            Bucket::decode(&encoded).as_ref(),
            Ok(bucket),
            "encode/decode round trip"
        );
        if !bucket.entries.is_empty() {
            assert_eq!(encoded, data, "a decoded bucket re-encodes to other bytes");
        }
        for (key, record) in &bucket.entries {
            assert!(bucket.get(key).is_some());
            if let Record::Completed(done) = record {
                for (name, value) in &done.response.headers {
                    assert!(
                        !unsafe_text(name) && !unsafe_text(value),
                        "unsafe stored header {name:?}: {value:?}"
                    );
                }
                let http = answer(&EdgeAnswer::Replay {
                    stored: &done.response,
                    replay_headers: &policy().replay_headers,
                });
                assert_eq!(http.status, done.response.status);
                // Only what today's allow-list replays, whatever the record holds.
                assert!(http
                    .headers
                    .iter()
                    .filter(|(n, _)| n != "idempotent-replayed"
                        && n != "idempotent-body-omitted"
                        && n != "stripe-should-retry")
                    .all(|(n, _)| policy().replays_header(n)));
                // A replay is final: Stripe's SDKs are told not to ask again.
                assert_eq!(http.header("stripe-should-retry"), Some("false"));
                assert!(http
                    .headers
                    .iter()
                    .all(|(n, v)| !unsafe_text(n) && !unsafe_text(v)));
                assert_eq!(http.header("idempotent-replayed"), Some("true"));
                match &done.response.body {
                    StoredBody::Kept(body) => assert_eq!(&http.body, body),
                    StoredBody::NotKept => assert!(http.body.is_empty()),
                }
            }
            // Deciding on any decoded record must not panic, whatever its times say.
            for at in [
                now,
                record.expires_at(),
                UnixMillis(0),
                UnixMillis(u64::MAX),
            ] {
                let _ = decide(
                    Some(record),
                    Fingerprint([0x41; 32]),
                    OwnerToken([9; 16]),
                    at,
                    policy(),
                );
            }
        }
    }

    // The protocol reading this cell: Corrupt with the same error, or a decision.
    let key = match &decoded {
        Ok(bucket) => bucket
            .entries
            .first()
            .map(|(k, _)| *k)
            .unwrap_or(StorageKey::from_stored([0x11; 32])),
        Err(_) => StorageKey::from_stored([0x11; 32]),
    };
    let claim = Claiming {
        key,
        fingerprint: Fingerprint([0x41; 32]),
        owner: OwnerToken([7; 16]),
        payers: idemgate_core::client::payer::Payers::NONE,
        policy: policy(),
    };
    let (mut tx, first) = Transaction::start("cell".into(), claim, now);
    assert!(matches!(first, StoreRequest::Read { .. }));
    let step = tx.resume(StoreReply::Read(Some(Snapshot {
        bytes: data.to_vec(),
        version: 3,
    })));
    match (&decoded, step) {
        (Err(e), TransactionStep::Done(Err(ProtocolError::Corrupt(got)))) => assert_eq!(&got, e),
        (Err(e), other) => panic!("a corrupt cell ({e:?}) was decided on: {other:?}"),
        (Ok(_), TransactionStep::Need(StoreRequest::Write { bytes, .. })) => {
            // What the claim writes back is itself a valid bucket holding our claim.
            let written = Bucket::decode(&bytes).expect("the protocol wrote an undecodable cell");
            assert!(
                matches!(written.get(&key), Some(Record::InFlight(f)) if f.owner == OwnerToken([7; 16]))
            );
        }
        (Ok(_), TransactionStep::Done(Ok(_))) => {}
        (Ok(_), other) => panic!("unexpected step on a valid cell: {other:?}"),
    }
});
