//! Over the model of the engine, the remote protocol gives the same outcomes as the local one
//! for any sequence of operations.

use super::engine::ModelEngine;
use super::support::{payers, remote_claim, remote_finish, skey, unsealed};
use crate::client::payer::Share;
use crate::decision::ResponseFacts;
use crate::policy::Policy;
use crate::record::OwnerToken;
use crate::request::fingerprint::Fingerprint;
use crate::store::remote::{client, Response};
use crate::store::MemoryStore;
use crate::time::{Span, UnixMillis};
use crate::Protocol;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// A claim by `payer`'s client (see `payers`).
    Claim {
        key: u8,
        fp: u8,
        payer: u8,
    },
    Finish {
        key: u8,
        owner: u8,
        status: u16,
    },
    /// A one-time token's use, the token expiring `expires_in` ms from now.
    Consume {
        token: u8,
        expires_in: u64,
        payer: u8,
    },
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3u8, 0..2u8, 0..4u8).prop_map(|(key, fp, payer)| Op::Claim { key, fp, payer }),
        (
            0..3u8,
            0..6u8,
            prop_oneof![Just(0u16), Just(201), Just(503), Just(500)]
        )
            .prop_map(|(key, owner, status)| Op::Finish { key, owner, status }),
        (0..2u8, prop_oneof![Just(1_000u64), Just(30_000)], 0..4u8).prop_map(
            |(token, expires_in, payer)| Op::Consume {
                token,
                expires_in,
                payer
            }
        ),
        prop_oneof![Just(1u64), Just(30_000), Just(61_000), Just(90_000_000)].prop_map(Op::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any sequence of claims, finishes, token uses and time passing gives the same outcomes
    /// through the remote protocol as through the local one: the core decides both, with one set
    /// of rules (`rule`) — a token's use is remembered as long in either, and a client at its
    /// share of the store is refused by both only while the store is under pressure (small
    /// shares and a small store, so the ops reach both).
    #[test]
    fn remote_and_local_agree(ops in proptest::collection::vec(op(), 1..40)) {
        let mut policy = Policy::defaults();
        // One cell of 8 records, so one fill shard: 4 records are its pressure of 50 %. The ops
        // touch five keys, so the cell never fills.
        policy.capacity.cells = 1;
        policy.capacity.per_cell = 8;
        policy.shares.pressure = 50;
        // Bytes bind the identity before records do: two stored answers of 3 bytes (163 bytes
        // each with their record) and a claim (160) are past 400 bytes; the peer counts records.
        policy.shares.identity = Some(Share { records: 3, bytes: 400 });
        policy.shares.peer = Some(Share { records: 3, bytes: u64::MAX });
        let mut local = MemoryStore::new();
        // Read first; speculate on the engine's clock; speculate off it (always refused).
        let mut remotes = [
            ModelEngine::default(),
            ModelEngine::speculative(0),
            ModelEngine::speculative(5_000),
        ];
        let mut now = UnixMillis(1_700_000_000_000);
        let mut next_owner = 0u8;
        for op in ops {
            match op {
                Op::Advance(ms) => now = now.after(Span(ms)),
                Op::Claim { key, fp, payer } => {
                    next_owner = next_owner.wrapping_add(1);
                    let owner = OwnerToken([next_owner % 6; 16]);
                    let mut engine = Protocol { store: &mut local, policy: &policy };
                    // The remote store's refusal names the same share, and the same payer.
                    let l = engine.claim(skey(key), Fingerprint([fp; 32]), owner, payers(payer), now).unwrap();
                    let request = client::claim(skey(key), Fingerprint([fp; 32]), owner, payers(payer), &policy);
                    // Through the filter's check: a replay's seal holds, and is all that differs.
                    for remote in &mut remotes {
                        let r = remote_claim(remote, request.clone(), now).map(unsealed).unwrap();
                        prop_assert_eq!(&l, &r);
                    }
                }
                Op::Consume { token, expires_in, payer } => {
                    // Token uses live in a hash domain of their own: keys apart from requests'.
                    let key = skey(100 + token);
                    let expires_at = now.after(Span(expires_in));
                    let mut engine = Protocol { store: &mut local, policy: &policy };
                    let l = engine.consume(key, expires_at, payers(payer), now).unwrap();
                    for remote in &mut remotes {
                        let request = client::consume(key, expires_at, payers(payer), &policy);
                        let r = remote.run(request, now);
                        prop_assert_eq!(Response::Consume(l), r);
                    }
                }
                Op::Finish { key, owner, status } => {
                    let facts = if status == 0 {
                        ResponseFacts::NeverReached
                    } else {
                        ResponseFacts::Upstream {
                            status,
                            headers: vec![("content-type".into(), "text/plain".into())],
                            body: Some(vec![status as u8; 3]),
                        }
                    };
                    let owner = OwnerToken([owner; 16]);
                    let mut engine = Protocol { store: &mut local, policy: &policy };
                    let l = engine.finish(skey(key), owner, Some(facts.clone()), now).unwrap();
                    for remote in &mut remotes {
                        let r = remote_finish(remote, &policy, skey(key), owner, facts.clone(), now);
                        prop_assert_eq!(&l, &r);
                    }
                }
            }
        }
    }
}
