//! Payers' shares through the remote protocol: a claim over its share is undone, and a share
//! binds only under pressure.

use super::engine::ModelEngine;
use super::support::{payers, secrets, skey};
use crate::client::payer::{Payers, Share, ShareReason, ShareRefusal};
use crate::decision::ResponseFacts;
use crate::policy::Policy;
use crate::record::OwnerToken;
use crate::request::fingerprint::Fingerprint;
use crate::store::protocol::{ClaimOutcome, FinishOutcome};
use crate::store::remote::{client, Response, StoredValue};
use crate::time::{Span, UnixMillis};

/// A claim over its payer's share is undone as if never written: a takeover of an abandoned claim
/// puts that claim back (a request with another payload still gets 422, not a fresh claim), and
/// the payer's charges stay as they were.
#[test]
fn a_claim_over_its_share_is_undone_as_if_never_written() {
    for speculate in [false, true] {
        let mut engine = if speculate {
            ModelEngine::speculative(0)
        } else {
            ModelEngine::default()
        };
        let mut policy = Policy::defaults();
        policy.shares.peer = Some(Share {
            records: 1,
            bytes: u64::MAX,
        });
        // Fixed caps: the share binds however empty the store is.
        policy.shares.pressure = 0;
        let payer = payers(1);
        let claim = |key: u8, fp: u8, owner: u8, payers: Payers| {
            client::claim(
                skey(key),
                Fingerprint([fp; 32]),
                OwnerToken([owner; 16]),
                payers,
                &policy,
            )
        };
        let now = UnixMillis(1_000_000);
        let forwarded = engine.run(claim(1, 1, 1, payer), now);
        assert!(matches!(
            forwarded,
            Response::Claim(ClaimOutcome::Forward { .. })
        ));
        // The lease is over: the payer's hold lapsed, and its next claim takes its one place.
        let later = now.after(Span::from_secs(61));
        let forwarded = engine.run(claim(2, 1, 2, payer), later);
        assert!(matches!(
            forwarded,
            Response::Claim(ClaimOutcome::Forward { .. })
        ));
        let abandoned = engine.keys[skey(1).as_bytes()].clone();
        // Taking over the abandoned claim would be a second record: refused, and undone.
        let refused = engine.run(claim(1, 1, 3, payer), later);
        assert_eq!(
            refused,
            Response::Claim(ClaimOutcome::QuotaExceeded {
                retry_after: Span::from_secs(60),
                share: Some(ShareRefusal {
                    reason: ShareReason::Address,
                    payer: payer.tags().next().unwrap(),
                }),
            }),
            "speculate: {speculate}"
        );
        let restored = &engine.keys[skey(1).as_bytes()];
        assert_eq!(
            restored.1, abandoned.1,
            "the abandoned claim's expiry is kept"
        );
        assert_eq!(
            StoredValue::decode(&skey(1), &restored.0).map(|v| v.record),
            StoredValue::decode(&skey(1), &abandoned.0).map(|v| v.record),
        );
        // So another payload for the key is still a mismatch, as on the local store.
        let other = engine.run(claim(1, 2, 4, Payers::NONE), later);
        assert_eq!(other, Response::Claim(ClaimOutcome::Mismatch));
        // And the payer's place frees when its claim is released.
        let release = client::finish(
            skey(2),
            OwnerToken([2; 16]),
            ResponseFacts::NeverReached,
            &policy,
            &secrets(),
        )
        .expect("a release is sent");
        assert_eq!(
            engine.run(release, later),
            Response::Finish(FinishOutcome::Released)
        );
        let taken = engine.run(claim(1, 1, 5, payer), later);
        assert!(matches!(
            taken,
            Response::Claim(ClaimOutcome::Forward { takeover: true, .. })
        ));
    }
}

/// The fleet's shares bind only under pressure: one address group claims far past its share
/// while the store's fill shard is below its pressure, and is refused once it is at it; another
/// payer below its share is served all the while.
#[test]
fn a_payer_over_its_share_is_refused_only_under_pressure() {
    for speculate in [false, true] {
        let mut engine = if speculate {
            ModelEngine::speculative(0)
        } else {
            ModelEngine::default()
        };
        let mut policy = Policy::defaults();
        // One fill shard of 16 cells of 8 records: 128 records, under pressure from 26 (20 %).
        policy.capacity.cells = 16;
        policy.capacity.per_cell = 8;
        policy.shares.pressure = 20;
        policy.shares.peer = Some(Share {
            records: 5,
            bytes: u64::MAX,
        });
        let now = UnixMillis(1_000_000);
        let claim = |key: u8, owner: u8, payers: Payers| {
            client::claim(
                skey(key),
                Fingerprint([1; 32]),
                OwnerToken([owner; 16]),
                payers,
                &policy,
            )
        };
        let forwarded =
            |response: &Response| matches!(response, Response::Claim(ClaimOutcome::Forward { .. }));
        let flooder = payers(1);
        assert!(forwarded(&engine.run(claim(0, 1, flooder), now)));
        // 26 records put the shard at its pressure: each of them is served, far past the share.
        for key in 1..26 {
            assert!(
                forwarded(&engine.run(claim(key, 1, flooder), now)),
                "record {key} of a store below its pressure (speculate: {speculate})"
            );
        }
        let refused = engine.run(claim(26, 1, flooder), now);
        assert_eq!(
            refused,
            Response::Claim(ClaimOutcome::QuotaExceeded {
                retry_after: Span::from_secs(60),
                share: Some(ShareRefusal {
                    reason: ShareReason::Address,
                    payer: flooder.tags().next().unwrap(),
                }),
            }),
            "speculate: {speculate}"
        );
        assert!(
            engine.get(&skey(26), now).is_none(),
            "the refused claim is undone"
        );
        // Another payer below its share is served under pressure.
        assert!(forwarded(&engine.run(claim(27, 2, payers(3)), now)));
        // The flooder's releases bring the shard below its pressure: it is served again.
        for key in 0..3 {
            let release = client::finish(
                skey(key),
                OwnerToken([1; 16]),
                ResponseFacts::NeverReached,
                &policy,
                &secrets(),
            )
            .expect("a release is sent");
            assert_eq!(
                engine.run(release, now),
                Response::Finish(FinishOutcome::Released)
            );
        }
        assert!(forwarded(&engine.run(claim(26, 1, flooder), now)));
        // With fixed caps (a pressure of 0) it is refused however empty the store.
        policy.shares.pressure = 0;
        let capped = client::claim(
            skey(28),
            Fingerprint([1; 32]),
            OwnerToken([1; 16]),
            flooder,
            &policy,
        );
        assert!(matches!(
            engine.run(capped, now),
            Response::Claim(ClaimOutcome::QuotaExceeded { .. })
        ));
    }
}
