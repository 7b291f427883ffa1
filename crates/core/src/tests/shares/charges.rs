//! What a share counts: bytes as well as records, only space held, never a replay, the payer
//! once for the record written, nothing to a share turned off.

use super::support::{owner, policy, request, run, Request, T0};
use crate::client::payer::{Payers, ShareReason, ShareRefusal};
use crate::client::scope::{Scope, StorageKey};
use crate::decision::ResponseFacts;
use crate::policy::Policy;
use crate::request::fingerprint::Fingerprint;
use crate::request::key::IdempotencyKey;
use crate::store::protocol::{ClaimOutcome, ConsumeOutcome, FinishOutcome};
use crate::store::{share, Layout, MemoryStore};
use crate::time::Span;
use crate::Protocol;
use std::prelude::rust_2021::Vec;

/// Shares count bytes as well as records: a client whose answers are large reaches its
/// byte share long before its record share, and then gets 429 until its answers lapse, while a
/// client with small answers keeps its whole record share. An answer is never refused once its
/// request ran: the share binds the next claim.
#[test]
fn large_answers_reach_the_byte_share_first() {
    let policy = policy(
        r#"{"capacity": 1000, "ttl": "1h", "scope": ["peer"],
            "shares": {"peer": 100, "peer_bytes": "1MiB", "pressure": "0%"}}"#,
    );
    let mut store = MemoryStore::new();
    let mut protocol = Protocol {
        store: &mut store,
        policy: &policy,
    };
    let answer = |size: usize| ResponseFacts::Upstream {
        status: 201,
        headers: Vec::new(),
        body: Some(vec![b'x'; size]),
    };
    let serve = |protocol: &mut Protocol<'_, MemoryStore>, from: &str, n: usize, size: usize| {
        let r = request(&policy, None, from, n);
        let outcome = protocol
            .claim(r.key, Fingerprint([1; 32]), owner(n), r.payers, T0)
            .unwrap();
        if let ClaimOutcome::Forward { owner, .. } = outcome {
            let done = protocol
                .finish(r.key, owner, Some(answer(size)), T0)
                .unwrap();
            assert_eq!(done, FinishOutcome::Stored);
        }
        outcome
    };
    // 60,000-byte answers, each taking 60,160 bytes with its record: 17 leave the client below
    // 1 MiB (1,022,720), the 18th takes it over (1,082,880), and the 19th claim is refused.
    let mut stored = 0;
    let refused = loop {
        match serve(&mut protocol, "10.0.0.66", stored, 60_000) {
            ClaimOutcome::Forward { .. } => stored += 1,
            ClaimOutcome::QuotaExceeded { retry_after, share } => {
                // Counted and logged as the bytes' refusal, the records being within theirs.
                assert_eq!(share.map(|s| s.reason), Some(ShareReason::Bytes));
                break retry_after;
            }
            other => panic!("{other:?}"),
        }
        assert!(stored <= 100, "the byte share never bound");
    };
    assert_eq!(stored, 18);
    assert_eq!(
        refused,
        Span::from_secs(3600),
        "until its first answer lapses"
    );
    let layout = Layout {
        capacity: policy.capacity,
    };
    let big = request(&policy, None, "10.0.0.66", 0).payers;
    let held = share::held(protocol.store, &layout, big.tags().next().unwrap(), T0).unwrap();
    assert_eq!((held.records, held.bytes), (18, 18 * 60_160));
    // Small answers: the whole record share, and the byte share far from reached.
    for n in 0..100 {
        let outcome = serve(&mut protocol, "10.0.0.1", 1_000 + n, 10);
        assert!(
            matches!(outcome, ClaimOutcome::Forward { .. }),
            "{n}: {outcome:?}"
        );
    }
    assert!(matches!(
        serve(&mut protocol, "10.0.0.1", 1_100, 10),
        ClaimOutcome::QuotaExceeded { .. }
    ));
    // An hour on, the large answers have lapsed: the client has room again.
    let later = T0.after(Span::from_secs(3600));
    let r = request(&policy, None, "10.0.0.66", 5_000);
    let outcome = protocol
        .claim(r.key, Fingerprint([1; 32]), owner(5_000), r.payers, later)
        .unwrap();
    assert!(
        matches!(outcome, ClaimOutcome::Forward { .. }),
        "{outcome:?}"
    );
}

/// A claim holds its share only until its lease ends; a released claim gives it back at once;
/// a replay, a 409 or a token used twice charges nothing.
#[test]
fn only_space_held_is_charged() {
    let policy = policy(
        r#"{"capacity": 1000, "ttl": "1h", "lease": "5s", "shares": {"peer": 2, "pressure": "0%"}}"#,
    );
    let mut store = MemoryStore::new();
    let mut protocol = Protocol {
        store: &mut store,
        policy: &policy,
    };
    let fp = Fingerprint([1; 32]);
    let r = |n| request(&policy, None, "10.0.0.9", n);
    let (a, b, c) = (r(1), r(2), r(3));
    let ClaimOutcome::Forward { owner: first, .. } =
        protocol.claim(a.key, fp, owner(1), a.payers, T0).unwrap()
    else {
        panic!()
    };
    // A duplicate while in flight: 409, nothing charged.
    for n in 0..5 {
        let again = protocol
            .claim(a.key, fp, owner(100 + n), a.payers, T0)
            .unwrap();
        assert!(matches!(again, ClaimOutcome::Conflict { .. }), "{again:?}");
    }
    assert!(matches!(
        protocol.claim(b.key, fp, owner(2), b.payers, T0).unwrap(),
        ClaimOutcome::Forward { .. }
    ));
    // Two claims in flight: the share is held until their lease ends, 5 s.
    assert_eq!(
        protocol
            .claim(c.key, fp, owner(3), c.payers, T0.after(Span(1000)))
            .unwrap(),
        ClaimOutcome::QuotaExceeded {
            retry_after: Span(4000),
            share: Some(ShareRefusal {
                reason: ShareReason::Address,
                payer: c.payers.tags().next().unwrap(),
            }),
        }
    );
    // Released: room at once.
    assert_eq!(
        protocol
            .finish(a.key, first, None, T0.after(Span(1000)))
            .unwrap(),
        FinishOutcome::Released
    );
    assert!(matches!(
        protocol
            .claim(c.key, fp, owner(3), c.payers, T0.after(Span(1000)))
            .unwrap(),
        ClaimOutcome::Forward { .. }
    ));
    // After the lease, the abandoned claims no longer count.
    let later = T0.after(Span::from_secs(5));
    assert!(matches!(
        protocol
            .claim(a.key, fp, owner(4), a.payers, later)
            .unwrap(),
        ClaimOutcome::Forward { .. }
    ));
    // A token use is charged while it is remembered; its second use charges nothing. At 6 s
    // the peer holds one claim (`a`, taken over at 5 s, until 10 s): room for one token use.
    let token = r(9);
    let at = T0.after(Span::from_secs(6));
    let expires = at.after(Span::from_secs(600));
    assert_eq!(
        protocol
            .consume(token.key, expires, token.payers, at)
            .unwrap(),
        ConsumeOutcome::Consumed
    );
    assert_eq!(
        protocol
            .consume(token.key, expires, token.payers, at)
            .unwrap(),
        ConsumeOutcome::AlreadyUsed
    );
    assert_eq!(
        protocol
            .consume(r(10).key, expires, token.payers, at)
            .unwrap(),
        ConsumeOutcome::QuotaExceeded {
            retry_after: Span::from_secs(4),
            share: Some(ShareRefusal {
                reason: ShareReason::Address,
                payer: r(10).payers.tags().next().unwrap(),
            }),
        }
    );
}

/// A completed answer stays charged until it expires, a duplicate of it is replayed (never 429,
/// even with the payer at its share), and a verified identity is not charged to its address.
#[test]
fn replays_are_never_refused_and_verified_identities_pay_alone() {
    let policy = policy(
        r#"{"capacity": 1000, "ttl": "1h", "shares": {"peer": 1, "identity": 3, "pressure": "0%"}}"#,
    );
    let mut store = MemoryStore::new();
    let mut protocol = Protocol {
        store: &mut store,
        policy: &policy,
    };
    let first = request(&policy, None, "10.0.0.5", 1);
    assert!(matches!(
        run(&mut protocol, &first, 1, T0),
        ClaimOutcome::Forward { .. }
    ));
    assert!(matches!(
        run(&mut protocol, &first, 2, T0),
        ClaimOutcome::Replay(_)
    ));
    assert_eq!(
        run(&mut protocol, &request(&policy, None, "10.0.0.5", 2), 3, T0),
        ClaimOutcome::QuotaExceeded {
            retry_after: Span::from_secs(3600),
            share: Some(ShareRefusal {
                reason: ShareReason::Address,
                payer: request(&policy, None, "10.0.0.5", 2)
                    .payers
                    .tags()
                    .next()
                    .unwrap(),
            }),
        }
    );
    // The same address with a verified identity: charged to the identity only (share 3).
    let scope = Scope {
        source: "property:metadata\u{1f}jwt\u{1f}sub",
        value: b"alice",
    };
    for n in 0..3 {
        let key = IdempotencyKey::parse(format!("v-{n}").as_bytes()).unwrap();
        let r = Request {
            key: StorageKey::derive(scope, "POST", "/orders", &key),
            payers: Payers::of(scope, true, Some(&[4, 32, 10, 0, 0, 5])),
        };
        assert!(matches!(
            run(&mut protocol, &r, 10 + n, T0),
            ClaimOutcome::Forward { .. }
        ));
    }
}

/// A store that lets another request win the key between the engine's look and its write: the
/// loser's charge is given back, so the payer is counted once for the one record written.
struct Interfering {
    inner: MemoryStore,
    policy: Policy,
    rival: Option<(StorageKey, Payers)>,
}

impl crate::store::Store for Interfering {
    fn read(
        &mut self,
        cell: &str,
    ) -> Result<Option<crate::store::Snapshot>, crate::store::StoreError> {
        self.inner.read(cell)
    }

    fn write(
        &mut self,
        cell: &str,
        bytes: &[u8],
        expect: crate::store::Expect,
    ) -> Result<crate::store::WriteOutcome, crate::store::StoreError> {
        let layout = Layout {
            capacity: self.policy.capacity,
        };
        if let Some((key, payers)) = self.rival {
            if cell == layout.cell_name(&key) {
                self.rival = None;
                let mut rival = Protocol {
                    store: &mut self.inner,
                    policy: &self.policy,
                };
                let won = rival
                    .claim(key, Fingerprint([1; 32]), owner(999), payers, T0)
                    .unwrap();
                assert!(matches!(won, ClaimOutcome::Forward { .. }), "{won:?}");
            }
        }
        self.inner.write(cell, bytes, expect)
    }
}

#[test]
fn a_request_that_loses_the_key_to_another_is_not_charged() {
    let policy = policy(r#"{"capacity": 1000, "shares": {"peer": 5}}"#);
    let r = request(&policy, None, "10.0.0.7", 1);
    let mut store = Interfering {
        inner: MemoryStore::new(),
        policy: policy.clone(),
        rival: Some((r.key, r.payers)),
    };
    let mut protocol = Protocol {
        store: &mut store,
        policy: &policy,
    };
    // Charged, then the rival claims the key before this write: 409, and the charge refunded.
    let lost = protocol
        .claim(r.key, Fingerprint([1; 32]), owner(1), r.payers, T0)
        .unwrap();
    assert!(matches!(lost, ClaimOutcome::Conflict { .. }), "{lost:?}");
    let layout = Layout {
        capacity: policy.capacity,
    };
    let group = r.payers.tags().next().unwrap();
    let held = share::held(&mut store.inner, &layout, group, T0).unwrap();
    assert_eq!(held.records, 1);
}

/// `"off"`: a kind of payer not counted — no limit and nothing charged to it.
#[test]
fn a_share_turned_off_charges_nothing() {
    // 100 records at their largest (1 MiB of body, headers, overhead) fit the default 256 MiB:
    // no byte count is needed, so a record costs no ledger operation at all. With 8 MiB they do
    // not: the fill shard counts every record, its bytes bounding the store's memory.
    for (max_memory, shard_counts) in [("256MiB", false), ("8MiB", true)] {
        let off = policy(&format!(
            r#"{{"capacity": 100, "max_memory": "{max_memory}", "shares": {{"identity": "off", "peer": "off"}}}}"#
        ));
        assert_eq!((off.shares.identity, off.shares.peer), (None, None));
        assert_eq!(off.shares.memory_counted, shard_counts);
        let mut store = MemoryStore::new();
        let mut protocol = Protocol {
            store: &mut store,
            policy: &off,
        };
        for n in 0..100 {
            let r = request(&off, Some("Bearer one"), "10.0.0.8", n);
            assert!(r.payers.is_empty());
            assert!(matches!(
                run(&mut protocol, &r, n, T0),
                ClaimOutcome::Forward { .. } | ClaimOutcome::StoreFull { .. }
            ));
        }
        let layout = Layout {
            capacity: off.capacity,
        };
        // Neither the identity nor the address group holds anything.
        let group = off.shares.peer_group("10.0.0.8");
        let identity = crate::client::payer::PayerTag::of(Scope {
            source: "header:authorization",
            value: b"Bearer one",
        });
        let address = crate::client::payer::PayerTag::of(Scope {
            source: "peer",
            value: &group,
        });
        for tag in [identity, address] {
            let held = share::held(protocol.store, &layout, tag, T0).unwrap();
            assert_eq!((held.records, held.bytes), (0, 0));
        }
        let shard = layout.fill_shard(&request(&off, Some("Bearer one"), "10.0.0.8", 0).key);
        let counted = share::held(protocol.store, &layout, shard.tag, T0)
            .unwrap()
            .records;
        assert_eq!(
            counted > 0,
            shard_counts,
            "max_memory {max_memory}: {counted}"
        );
    }
    // Only the address group counted: an identity pays nothing, its address does.
    let group_only = policy(r#"{"capacity": 100, "shares": {"identity": "off", "peer": 2}}"#);
    let r = request(&group_only, Some("Bearer one"), "10.0.0.8", 0);
    assert_eq!(r.payers.tags().count(), 1);
    assert!(r.payers.tags().all(|t| t.is_address_group()));
}
