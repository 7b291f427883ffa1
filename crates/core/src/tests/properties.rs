//! Property tests of the core's promises: storage keys never collide across part lists, concurrent
//! claims through the sans-IO protocol admit exactly one owner whatever the interleaving, a stale
//! owner never overwrites, a completed record never returns to in flight, and no parser or decoder
//! panics on arbitrary input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::client::payer::Payers;
use crate::client::scope::{Scope, StorageKey};
use crate::decision::ResponseFacts;
use crate::policy::Policy;
use crate::record::{Bucket, OwnerToken, Record};
use crate::request::fingerprint::Fingerprint;
use crate::request::key::IdempotencyKey;
use crate::store::protocol::{
    ClaimOutcome, Claiming, FinishOutcome, StoreReply, StoreRequest, Transaction, TransactionStep,
};
use crate::store::{Layout, MemoryStore, Store};
use crate::time::UnixMillis;
use crate::Protocol;
use proptest::prelude::*;
use std::prelude::rust_2021::{String, Vec};

fn key(text: &str) -> IdempotencyKey {
    IdempotencyKey::parse(text.as_bytes()).unwrap()
}

fn storage_key(n: u8) -> StorageKey {
    StorageKey::derive(
        Scope {
            source: "header:authorization",
            value: b"Bearer t",
        },
        "POST",
        "/orders",
        &key(&format!("key-{n}")),
    )
}

fn answer(store: &mut MemoryStore, request: &StoreRequest) -> StoreReply {
    match request {
        StoreRequest::Read { cell } => StoreReply::Read(store.read(cell).unwrap()),
        StoreRequest::Write {
            cell,
            bytes,
            expect,
        } => StoreReply::Write(store.write(cell, bytes, *expect).unwrap()),
    }
}

fn record_of(store: &mut MemoryStore, policy: &Policy, key: &StorageKey) -> Option<Record> {
    let cell = Layout {
        capacity: policy.capacity,
    }
    .cell_name(key);
    let snap = store.read(&cell).unwrap()?;
    Bucket::decode(&snap.bytes).unwrap().get(key).cloned()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Different part lists never meet, even when their concatenations are equal.
    #[test]
    fn distinct_parts_never_derive_one_storage_key(
        a in proptest::collection::vec("[!-~]{0,6}", 4),
        b in proptest::collection::vec("[!-~]{0,6}", 4),
        ka in "[A-Za-z0-9_.~-]{1,8}", kb in "[A-Za-z0-9_.~-]{1,8}",
    ) {
        let derive = |p: &[String], k: &str| StorageKey::derive(
            Scope { source: &p[0], value: p[1].as_bytes() }, &p[2], &p[3], &key(k));
        let same_parts = a == b && ka == kb;
        prop_assert_eq!(derive(&a, &ka) == derive(&b, &kb), same_parts);
    }

    /// N claims on one key, their store calls interleaved in any order: exactly one forwards, the
    /// others see it in flight.
    #[test]
    fn interleaved_claims_admit_exactly_one(n in 2usize..6, schedule in proptest::collection::vec(0usize..6, 0..64)) {
        let policy = Policy::defaults();
        let layout = Layout { capacity: policy.capacity };
        let key = storage_key(1);
        let mut store = MemoryStore::new();
        let mut txs = Vec::new();
        let mut pending = Vec::new();
        for i in 0..n {
            let claim = Claiming { key, fingerprint: Fingerprint([9; 32]), owner: OwnerToken([i as u8; 16]), payers: Payers::NONE, policy: &policy };
            let (tx, first) = Transaction::start(layout.cell_name(&key), claim, UnixMillis(1_000));
            txs.push(tx);
            pending.push(Some(first));
        }
        let mut outcomes = vec![None; n];
        // Follow the schedule, then run whatever is left round-robin.
        let order = schedule.into_iter().map(|i| i % n).chain((0..n).cycle().take(n * 40));
        for i in order {
            let Some(request) = pending[i].take() else { continue };
            match txs[i].resume(answer(&mut store, &request)) {
                TransactionStep::Need(next) => pending[i] = Some(next),
                TransactionStep::Done(outcome) => outcomes[i] = Some(outcome.unwrap()),
            }
        }
        let forwarded = outcomes.iter().filter(|o| matches!(o, Some(ClaimOutcome::Forward { .. }))).count();
        let conflicts = outcomes.iter().filter(|o| matches!(o, Some(ClaimOutcome::Conflict { .. }))).count();
        prop_assert_eq!(forwarded, 1);
        prop_assert_eq!(conflicts, n - 1);
    }

    /// After a take-over, the old owner's completion is refused and the new owner's record stands;
    /// a completed record is replayed by every later claim until it expires, never in flight again.
    #[test]
    fn stale_owner_never_overwrites_and_completed_stays_completed(
        status in 200u16..600, later in proptest::collection::vec(0u64..86_000_000, 1..8)
    ) {
        let policy = Policy::defaults();
        let key = storage_key(2);
        let fp = Fingerprint([3; 32]);
        let mut store = MemoryStore::new();
        let mut protocol = Protocol { store: &mut store, policy: &policy };
        let t0 = UnixMillis(1_000_000);
        let ClaimOutcome::Forward { owner: old, .. } = protocol.claim(key, fp, OwnerToken([1; 16]), Payers::NONE, t0).unwrap() else { panic!() };
        let after_lease = t0.after(policy.lease);
        let taken = protocol.claim(key, fp, OwnerToken([2; 16]), Payers::NONE, after_lease).unwrap();
        prop_assert_eq!(taken, ClaimOutcome::Forward { owner: OwnerToken([2; 16]), takeover: true });
        let facts = ResponseFacts::Upstream { status, headers: vec![], body: Some(b"x".to_vec()) };
        prop_assert_eq!(protocol.finish(key, old, Some(facts.clone()), after_lease).unwrap(), FinishOutcome::NotOwner);
        let still = record_of(protocol.store, &policy, &key);
        prop_assert!(matches!(still, Some(Record::InFlight(ref r)) if r.owner == OwnerToken([2; 16])));
        let outcome = protocol.finish(key, OwnerToken([2; 16]), Some(facts), after_lease).unwrap();
        if !policy.store_rule.stores(status) {
            prop_assert_eq!(outcome, FinishOutcome::Released);
            return Ok(());
        }
        prop_assert_eq!(outcome, FinishOutcome::Stored);
        for dt in later {
            let now = UnixMillis(after_lease.0 + dt);
            let again = protocol.claim(key, fp, OwnerToken([5; 16]), Payers::NONE, now).unwrap();
            prop_assert!(matches!(again, ClaimOutcome::Replay(ref r) if r.status == status), "{:?}", again);
            prop_assert!(matches!(record_of(protocol.store, &policy, &key), Some(Record::Completed(_))));
        }
    }

    #[test]
    fn decoding_arbitrary_cells_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = Bucket::decode(&bytes);
        let mut with_header = b"IG\x01".to_vec();
        with_header.extend_from_slice(&bytes);
        if let Ok(bucket) = Bucket::decode(&with_header) {
            prop_assert_eq!(Bucket::decode(&bucket.encode()).unwrap(), bucket);
        }
    }

    #[test]
    fn parsing_arbitrary_input_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300), text in ".{0,200}") {
        let _ = IdempotencyKey::parse(&bytes);
        let _ = IdempotencyKey::parse_all([bytes.as_slice(), text.as_bytes()]);
        let _ = Policy::from_json(&text, &|_| None);
        let _ = Policy::from_json(&String::from_utf8_lossy(&bytes), &|_| None);
        let _ = text.parse::<crate::time::Span>();
        let secret = crate::client::token::TokenSecret::new(b"0123456789abcdef").unwrap();
        let _ = crate::client::token::verify(&secret, &text, &[0; 32], UnixMillis(0));
    }
}

/// The store's cells are bounded: many distinct keys never create more cells than configured, and a
/// full cell refuses a new key instead of evicting a live one.
#[test]
fn capacity_bounds_cells_and_never_evicts_live_records() {
    // Nobody is charged here: this is about capacity, not shares (`tests/shares`). Each record
    // is still counted in its fill shard (the shard's bytes bound the store's memory), in the
    // store's one ledger cell.
    let policy = Policy::from_json(
        r#"{"capacity": 8, "records_per_cell": 2, "shares": {"identity": "off", "peer": "off"}}"#,
        &|_| None,
    )
    .unwrap();
    let mut store = MemoryStore::new();
    let mut protocol = Protocol {
        store: &mut store,
        policy: &policy,
    };
    let mut forwarded = Vec::new();
    let mut full = 0;
    for n in 0..=255u8 {
        match protocol
            .claim(
                storage_key(n),
                Fingerprint([1; 32]),
                OwnerToken([n; 16]),
                Payers::NONE,
                UnixMillis(0),
            )
            .unwrap()
        {
            ClaimOutcome::Forward { .. } => forwarded.push(n),
            ClaimOutcome::StoreFull { .. } => full += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(forwarded.len(), 8, "4 cells x 2 records");
    assert_eq!(full, 256 - 8);
    assert!(
        protocol.store.cell_count() <= 4 + 1,
        "4 record cells and 1 ledger cell"
    );
    for n in forwarded {
        assert!(matches!(
            record_of(protocol.store, &policy, &storage_key(n)),
            Some(Record::InFlight(_))
        ));
    }
    // Once the records expire, their space is reused.
    let later = UnixMillis(policy.ttl.as_millis());
    assert!(matches!(
        protocol
            .claim(
                storage_key(200),
                Fingerprint([1; 32]),
                OwnerToken([9; 16]),
                Payers::NONE,
                later
            )
            .unwrap(),
        ClaimOutcome::Forward { .. }
    ));
}
