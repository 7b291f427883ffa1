use super::*;
use crate::client::scope::Scope;
use crate::policy::Capacity;
use crate::store::MemoryStore;
use alloc::vec::Vec;

const T0: UnixMillis = UnixMillis(1_700_000_000_000);

fn shares(identity: u64, peer: u64) -> Shares {
    Shares {
        identity: Some(Share {
            records: identity,
            bytes: u64::MAX,
        }),
        peer: Some(Share {
            records: peer,
            bytes: u64::MAX,
        }),
        ipv4_prefix: 32,
        ipv6_prefix: 64,
        pressure: 0,
        memory: u64::MAX,
        memory_counted: true,
    }
}

/// A bill to `payers` alone, counted in no fill shard: the shares bind whatever the fill.
fn bill(payers: Payers) -> Bill {
    Bill {
        payers,
        shard: None,
    }
}

/// Records `tag` holds at `now`.
fn records(store: &mut MemoryStore, layout: &Layout, tag: PayerTag, now: UnixMillis) -> u64 {
    held(store, layout, tag, now).unwrap().records
}

fn layout() -> Layout {
    Layout {
        capacity: Capacity {
            cells: 64,
            per_cell: 8,
        },
    }
}

fn v4(prefix: u8, a: [u8; 4]) -> Vec<u8> {
    let mut group = alloc::vec![4, prefix];
    group.extend_from_slice(&a);
    group
}

fn v6(prefix: u8, a: [u16; 8]) -> Vec<u8> {
    let mut group = alloc::vec![6, prefix];
    for part in a {
        group.extend_from_slice(&part.to_be_bytes());
    }
    group
}

#[test]
fn peer_groups_keep_the_prefix_only() {
    let s = Shares {
        ipv4_prefix: 24,
        ..shares(1, 1)
    };
    assert_eq!(s.peer_group("10.1.2.3"), v4(24, [10, 1, 2, 0]));
    assert_eq!(s.peer_group("10.1.2.200"), s.peer_group("10.1.2.3"));
    assert_ne!(s.peer_group("10.1.3.3"), s.peer_group("10.1.2.3"));
    let s = shares(1, 1);
    assert_eq!(s.peer_group("10.1.2.3"), v4(32, [10, 1, 2, 3]));
    // Every address of one /64 is one peer; the next /64 is another.
    assert_eq!(
        s.peer_group("[2001:db8:0:1::1]"),
        v6(64, [0x2001, 0xdb8, 0, 1, 0, 0, 0, 0])
    );
    assert_eq!(
        s.peer_group("[2001:db8:0:1:ffff::9]"),
        s.peer_group("2001:db8:0:1::1")
    );
    assert_ne!(
        s.peer_group("2001:db8:0:2::1"),
        s.peer_group("2001:db8:0:1::1")
    );
    // However it is written.
    for spelling in [
        "[2001:0db8:0000:0001:0:0:0:7]",
        "2001:DB8:0:1::abcd",
        "[2001:db8:0:1::1%eth0]",
    ] {
        assert_eq!(
            s.peer_group(spelling),
            s.peer_group("2001:db8:0:1::1"),
            "{spelling}"
        );
    }
    // An IPv4-mapped address is its IPv4 peer.
    assert_eq!(s.peer_group("[::ffff:10.1.2.3]"), v4(32, [10, 1, 2, 3]));
    // Not an address: its own group, apart from any address's.
    assert_eq!(
        s.peer_group("/run/envoy.sock"),
        b"\0/run/envoy.sock".to_vec()
    );
    let all = Shares {
        ipv4_prefix: 0,
        ipv6_prefix: 128,
        ..shares(1, 1)
    };
    assert_eq!(all.peer_group("10.1.2.3"), v4(0, [0; 4]));
    assert_eq!(all.peer_group("::1"), v6(128, [0, 0, 0, 0, 0, 0, 0, 1]));
}

#[test]
fn an_unverified_scope_pays_with_its_address() {
    let alice = Scope {
        source: "header:authorization",
        value: b"Bearer alice",
    };
    let payers = Payers::of(alice, false, Some(&b"10.0.0.1/32"[..]));
    let tags: Vec<PayerTag> = payers.tags().collect();
    assert_eq!(tags.len(), 2);
    // The address group first: a group at its share is refused before the identity is charged.
    assert!(tags[0].is_address_group());
    assert_eq!(tags[1], PayerTag::of(alice));
    assert!(!tags[1].is_address_group());
    // Verified: the scope alone. No address known: the scope alone.
    assert_eq!(
        Payers::of(alice, true, Some(&b"10.0.0.1/32"[..]))
            .tags()
            .count(),
        1
    );
    assert_eq!(Payers::of(alice, false, None).tags().count(), 1);
    // A peer scope pays once, as its address group.
    let peer = Scope {
        source: "peer",
        value: b"10.0.0.1",
    };
    let paid: Vec<PayerTag> = Payers::of(peer, false, Some(&b"10.0.0.1/32"[..]))
        .tags()
        .collect();
    assert_eq!(paid, [tags[0]]);
    assert!(Payers::NONE.is_empty());
    assert_eq!(Payers::NONE.tags().count(), 0);
}

#[test]
fn a_charge_is_refused_at_the_share_and_leaves_nothing_charged() {
    let mut store = MemoryStore::new();
    let layout = layout();
    let alice = Scope {
        source: "header:authorization",
        value: b"Bearer alice",
    };
    let payers = Payers::of(alice, false, Some(&b"10.0.0.1/32"[..]));
    let peer = payers.tags().next().unwrap();
    let until = Space::bare(T0.after(Span::from_secs(60)));
    // The peer's share (2) binds before the identity's (5).
    for _ in 0..2 {
        let charged = charge(&mut store, &layout, &shares(5, 2), bill(payers), until, T0).unwrap();
        assert!(charged.is_ok());
    }
    let refused = charge(&mut store, &layout, &shares(5, 2), bill(payers), until, T0).unwrap();
    assert_eq!(
        refused,
        Err(OverShare {
            retry_after: Span::from_secs(60),
            refusal: ShareRefusal {
                reason: ShareReason::Address,
                payer: peer,
            },
        })
    );
    // The identity was charged for the two that went through, not for the refused one.
    assert_eq!(records(&mut store, &layout, PayerTag::of(alice), T0), 2);
    assert_eq!(records(&mut store, &layout, peer, T0), 2);
    // A refund gives one back; once the holds lapse, all of it.
    let one = Charge {
        bill: bill(payers),
        space: until,
    };
    refund(&mut store, &layout, one, T0).unwrap();
    assert_eq!(records(&mut store, &layout, peer, T0), 1);
    assert_eq!(records(&mut store, &layout, peer, until.until), 0);
    // A refund after the hold lapsed takes nothing from a later one.
    let later = Space::bare(T0.after(Span::from_secs(600)));
    // (A shift from a moment already past takes nothing and adds the new hold.)
    shift(
        &mut store,
        &layout,
        bill(payers),
        (Space::bare(T0), later),
        T0,
    )
    .unwrap();
    refund(&mut store, &layout, one, until.until).unwrap();
    assert_eq!(records(&mut store, &layout, peer, until.until), 1);
    // A shift moves the record's hold: counted the same now, and until the new moment.
    let stored = Space::bare(later.until.after(Span::from_secs(3600)));
    shift(
        &mut store,
        &layout,
        bill(payers),
        (later, stored),
        until.until,
    )
    .unwrap();
    assert_eq!(records(&mut store, &layout, peer, until.until), 1);
    assert_eq!(records(&mut store, &layout, peer, later.until), 1);
    assert_eq!(
        records(&mut store, &layout, PayerTag::of(alice), later.until),
        1
    );
    assert_eq!(records(&mut store, &layout, peer, stored.until), 0);
}

#[test]
fn an_identity_at_its_share_leaves_its_address_group_uncharged() {
    let mut store = MemoryStore::new();
    let layout = layout();
    let bob = Scope {
        source: "header:authorization",
        value: b"Bearer bob",
    };
    let payers = Payers::of(bob, false, Some(&b"10.0.0.2/32"[..]));
    let group = payers.tags().next().unwrap();
    let until = Space::bare(T0.after(Span::from_secs(60)));
    let shares = shares(1, 5);
    assert!(
        charge(&mut store, &layout, &shares, bill(payers), until, T0)
            .unwrap()
            .is_ok()
    );
    // The group is charged first, then the identity refuses: the group's charge is undone.
    assert!(
        charge(&mut store, &layout, &shares, bill(payers), until, T0)
            .unwrap()
            .is_err()
    );
    assert_eq!(records(&mut store, &layout, group, T0), 1);
    assert_eq!(records(&mut store, &layout, PayerTag::of(bob), T0), 1);
}

#[test]
fn a_corrupt_ledger_cell_is_a_typed_error_not_a_reset() {
    let mut store = MemoryStore::new();
    let layout = layout();
    let tag = PayerTag([1, 2, 3, 4, 5, 6, 7, 1]);
    let cell = layout.ledger_cell_name(tag);
    assert_eq!(
        store.write(&cell, b"not a ledger", Expect::Absent),
        Ok(WriteOutcome::Written)
    );
    let payers = Payers::from_tags(Some(tag), None);
    let result = charge(
        &mut store,
        &layout,
        &shares(5, 5),
        bill(payers),
        Space::bare(T0.after(Span(1))),
        T0,
    );
    assert!(
        matches!(result, Err(ProtocolError::Corrupt(_))),
        "{result:?}"
    );
    assert_eq!(
        store.read(&cell).unwrap().map(|s| s.bytes),
        Some(b"not a ledger".to_vec()),
        "left as found"
    );
}

/// A store of two fill shards of 128 cells of 8 records: 1,024 records each.
fn two_shards() -> Layout {
    Layout {
        capacity: Capacity {
            cells: 256,
            per_cell: 8,
        },
    }
}

/// Keys whose cells fall in fill shard 0 (the first 128 cells).
fn keys_in_first_shard() -> impl Iterator<Item = StorageKey> {
    (0u32..).map(|n| {
        let mut key = [0; 32];
        key[..4].copy_from_slice(&(n % 128).to_be_bytes());
        key[4..8].copy_from_slice(&n.to_be_bytes());
        StorageKey(key)
    })
}

#[test]
fn shares_bind_only_while_the_records_fill_shard_is_under_pressure() {
    let mut store = MemoryStore::new();
    let layout = two_shards();
    let shares = Shares {
        pressure: 50,
        ..shares(3, 3)
    };
    let mallory = Payers::from_tags(Some(PayerTag([6; 8])), None);
    let until = Space::bare(T0.after(Span::from_secs(60)));
    let shard = layout.fill_shard(&StorageKey([0; 32]));
    // Under pressure from 512 records of its 1,024.
    assert_eq!(layout.fill_shards(), 2);
    assert_eq!(shard.capacity, 1_024);
    let mut other = [0; 32];
    other[..4].copy_from_slice(&200u32.to_be_bytes());
    let other = StorageKey(other);
    assert_ne!(shard.tag, layout.fill_shard(&other).tag);
    let mut keys = keys_in_first_shard();
    let mut next = |store: &mut MemoryStore, payers| {
        let key = keys.next().unwrap();
        let bill = Bill::of(&layout, &shares, payers, &key);
        charge(store, &layout, &shares, bill, until, T0).unwrap()
    };
    // Far beyond its share of 3, while the shard has room: served.
    for n in 0..511 {
        assert!(next(&mut store, mallory).is_ok(), "record {n}");
    }
    assert_eq!(records(&mut store, &layout, PayerTag([6; 8]), T0), 511);
    assert_eq!(records(&mut store, &layout, shard.tag, T0), 511);
    // The 512th makes the shard half full: from then on, over its share is refused, and
    // nothing is charged (neither the payer nor the shard).
    assert!(next(&mut store, mallory).is_ok());
    let over = OverShare {
        retry_after: Span::from_secs(60),
        refusal: ShareRefusal {
            reason: ShareReason::Identity,
            payer: PayerTag([6; 8]),
        },
    };
    assert_eq!(next(&mut store, mallory), Err(over));
    let bill = Bill::of(&layout, &shares, mallory, &StorageKey([0; 32]));
    assert_eq!(
        refusal(&mut store, &layout, &shares, bill, T0).unwrap(),
        Some(over)
    );
    assert_eq!(records(&mut store, &layout, PayerTag([6; 8]), T0), 512);
    assert_eq!(records(&mut store, &layout, shard.tag, T0), 512);
    // A payer within its share is served under pressure, and counted in the shard.
    let alice = Payers::from_tags(Some(PayerTag([7; 8])), None);
    let alice_bill = Bill::of(&layout, &shares, alice, &StorageKey([0; 32]));
    assert_eq!(
        refusal(&mut store, &layout, &shares, alice_bill, T0).unwrap(),
        None
    );
    for _ in 0..3 {
        assert!(next(&mut store, alice).is_ok());
    }
    assert!(next(&mut store, alice).is_err());
    assert_eq!(records(&mut store, &layout, shard.tag, T0), 515);
    // The other shard is not under pressure: a flooder is served there until it is. (That is
    // all grinding keys into the emptiest shard buys: each shard keeps half for shares.)
    let there = Bill::of(&layout, &shares, mallory, &other);
    assert_eq!(
        refusal(&mut store, &layout, &shares, there, T0).unwrap(),
        None
    );
    assert!(charge(&mut store, &layout, &shares, there, until, T0)
        .unwrap()
        .is_ok());
    // A refund gives the shard's count back too; once the holds lapse, the shard is empty.
    let one = Charge {
        bill: alice_bill,
        space: until,
    };
    refund(&mut store, &layout, one, T0).unwrap();
    assert_eq!(records(&mut store, &layout, shard.tag, T0), 514);
    assert!(next(&mut store, alice).is_ok());
    assert_eq!(records(&mut store, &layout, shard.tag, until.until), 0);
}

#[test]
fn pressure_zero_makes_shares_fixed_caps_and_a_record_is_counted_in_its_shard_without_shares() {
    let layout = layout();
    let capped = shares(2, 2);
    let mut store = MemoryStore::new();
    let payers = Payers::from_tags(Some(PayerTag([6; 8])), None);
    let until = Space::bare(T0.after(Span::from_secs(60)));
    let key = StorageKey([0; 32]);
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        let bill = Bill::of(&layout, &capped, payers, &key);
        outcomes.push(
            charge(&mut store, &layout, &capped, bill, until, T0)
                .unwrap()
                .is_ok(),
        );
    }
    assert_eq!(outcomes, [true, true, false]);
    // With no share counted, the record's shard still counts it where its bytes bound the
    // memory.
    let off = Shares {
        identity: None,
        peer: None,
        ..capped
    };
    let bill = Bill::of(&layout, &off, Payers::NONE, &key);
    assert_eq!(bill.shard, Some(layout.fill_shard(&key)));
    assert!(charge(&mut store, &layout, &off, bill, until, T0)
        .unwrap()
        .is_ok());
    assert_eq!(
        records(&mut store, &layout, layout.fill_shard(&key).tag, T0),
        3
    );
}
