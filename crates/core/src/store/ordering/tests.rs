use super::*;
use crate::client::payer::PEER_GROUP_SOURCE;
use crate::client::scope::Scope;
use crate::order::transition::DeclaredTable;
use crate::store::share::{PayerTag, Share, ShareReason, ShareRefusal};
use crate::store::MemoryStore;

const TABLE: &str = r#"{"initial": "unpaid", "transitions": [
    ["unpaid", "payment.succeeded", "paid"], ["paid", "order.shipped", "shipped"]]}"#;

const T0: UnixMillis = UnixMillis(1_000_000);

/// Fixed caps (a pressure of 0): an address group may hold 2 records, however empty the store.
fn policy() -> Policy {
    let mut policy = Policy::defaults();
    policy.shares.peer = Some(Share {
        records: 2,
        bytes: u64::MAX,
    });
    policy.shares.pressure = 0;
    policy
}

fn sender() -> Payers {
    let group = Scope {
        source: PEER_GROUP_SOURCE,
        value: &[4, 32, 10, 0, 0, 1],
    };
    Payers::of(group, false, None)
}

fn key(resource: &str) -> StorageKey {
    let route = Scope {
        source: "route",
        value: b"/hooks",
    };
    StorageKey::resource(route, resource)
}

fn begin_on(
    store: &mut MemoryStore,
    policy: &Policy,
    resource: &str,
    event: &str,
    payers: Payers,
) -> BeginOutcome {
    begin_by(store, policy, (resource, event, 1), payers)
}

/// [`begin_on`] by the delivery of `owner`.
fn begin_by(
    store: &mut MemoryStore,
    policy: &Policy,
    (resource, event, owner): (&str, &str, u8),
    payers: Payers,
) -> BeginOutcome {
    let table = DeclaredTable::parse(TABLE).unwrap();
    let begin_input = Begin {
        table: &table,
        event,
        owner: OwnerToken([owner; 16]),
        lease: Span::from_secs(60),
        ttl: Span::from_secs(86_400),
        retry_after: Span::from_secs(10),
        forward_after: None,
    };
    begin(store, policy, key(resource), begin_input, payers, T0).unwrap()
}

fn held(store: &mut MemoryStore, policy: &Policy, tag: PayerTag) -> u64 {
    let layout = Layout {
        capacity: policy.capacity,
    };
    share::held(store, &layout, tag, T0).unwrap().records
}

#[test]
fn a_new_resource_record_is_charged_and_refused_over_its_share() {
    let policy = policy();
    let mut store = MemoryStore::new();
    let payers = sender();
    let group = payers.tags().next().unwrap();
    for resource in ["1", "22"] {
        assert!(matches!(
            begin_on(&mut store, &policy, resource, "payment.succeeded", payers),
            BeginOutcome::Apply { .. }
        ));
    }
    assert_eq!(
        held(&mut store, &policy, group),
        2,
        "each new record charged"
    );
    // A third made-up resource: the address group holds its share.
    let refused = begin_on(&mut store, &policy, "333", "payment.succeeded", payers);
    assert_eq!(
        refused,
        BeginOutcome::QuotaExceeded {
            retry_after: Span::from_secs(86_400),
            share: Some(ShareRefusal {
                reason: ShareReason::Address,
                payer: group,
            }),
        }
    );
    assert_eq!(held(&mut store, &policy, group), 2, "nothing charged");
    let cell = Layout {
        capacity: policy.capacity,
    }
    .cell_name(&key("333"));
    let written = store
        .read(&cell)
        .unwrap()
        .map(|snap| Bucket::decode(&snap.bytes).unwrap());
    assert!(
        written.is_none_or(|bucket| bucket.get(&key("333")).is_none()),
        "a refused begin writes nothing"
    );
    // A live record is not charged again: another delivery for it is decided at the share.
    assert!(matches!(
        begin_by(&mut store, &policy, ("1", "payment.succeeded", 2), payers),
        BeginOutcome::Busy { .. }
    ));
    // Nobody to charge (a signed route without a share): never refused for a share.
    assert!(matches!(
        begin_on(
            &mut store,
            &policy,
            "4444",
            "payment.succeeded",
            Payers::NONE
        ),
        BeginOutcome::Apply { .. }
    ));
}

#[test]
fn a_begin_that_writes_nothing_new_is_not_charged() {
    let policy = policy();
    let mut store = MemoryStore::new();
    let payers = sender();
    let group = payers.tags().next().unwrap();
    // Early without patience: answered 409, no record made, nothing charged.
    assert!(matches!(
        begin_on(&mut store, &policy, "1", "order.shipped", payers),
        BeginOutcome::Early { .. }
    ));
    assert_eq!(held(&mut store, &policy, group), 0);
}
