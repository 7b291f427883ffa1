//! The sequencer's steps on each kind of store: what a host is told to do, count and log.

use super::*;
use crate::client::payer::Payers;
use crate::client::scope::{Scope, StorageKey};
use crate::events::Event;
use crate::order::transition::DeclaredTable;
use crate::order::OrderRule;
use crate::record::OwnerToken;
use crate::request::json::JsonPointer;
use crate::request::key_source::KeySource;
use crate::store::remote::client::CalloutReply;
use crate::store::remote::Request;
use crate::store::MemoryStore;
use crate::time::{Span, UnixMillis};
use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;

const TABLE: &str = r#"{"initial": "unpaid", "transitions": [
    ["unpaid", "payment.succeeded", "paid"], ["paid", "order.shipped", "shipped"]]}"#;

const T0: UnixMillis = UnixMillis(1_000_000);

fn ordered(event: &str) -> Ordered {
    let rule = OrderRule {
        resource: KeySource::Json(JsonPointer::parse("/data/order").unwrap()),
        event: KeySource::Json(JsonPointer::parse("/type").unwrap()),
        table: DeclaredTable::parse(TABLE).unwrap(),
        retry_after: Span::from_secs(10),
        forward_after: None,
    };
    let route = Scope {
        source: "route",
        value: b"/hooks",
    };
    Ordered {
        rule: Arc::new(rule),
        key: StorageKey::resource(route, "o_1"),
        event: String::from(event),
    }
}

fn events(events: crate::events::Events) -> Vec<Event> {
    events.iter().collect()
}

fn local_begin(store: &mut MemoryStore, event: &str, owner: u8) -> Begun {
    let at = OrderStore::Local { store, now: T0 };
    let step = begin(
        &Policy::defaults(),
        ordered(event),
        OwnerToken([owner; 16]),
        Payers::default(),
        at,
    );
    match step {
        BeginStep::Decided(begun) => begun,
        BeginStep::Send { .. } => panic!("the local store decides at once"),
    }
}

#[test]
fn on_the_local_store_an_event_applies_and_its_settle_advances_the_state() {
    let mut store = MemoryStore::new();
    let begun = local_begin(&mut store, "payment.succeeded", 1);
    assert_eq!(begun.outcome, Some("apply"));
    assert_eq!(events(begun.events), [Event::OrderForwarded]);
    assert_eq!(begun.note, None);
    let Ruling::Forward(Some(claim)) = begun.decision else {
        panic!("applies: {:?}", begun.decision)
    };
    assert_eq!((claim.to.as_str(), claim.version), ("paid", 0));
    let at = OrderStore::Local {
        store: &mut store,
        now: T0,
    };
    let SettleStep::Done(settled) = settle(&Policy::defaults(), claim, true, at) else {
        panic!("the local store settles at once")
    };
    assert_eq!(events(settled.events), [Event::OrderApplied]);
    assert_eq!((settled.outcome, settled.note), (None, None));
    // Applied before: acknowledged, not forwarded.
    let again = local_begin(&mut store, "payment.succeeded", 2);
    assert_eq!(again.outcome, Some("already_applied"));
    assert_eq!(events(again.events), [Event::OrderAlreadyApplied]);
}

#[test]
fn a_released_claim_names_its_outcome_and_an_early_event_waits() {
    let mut store = MemoryStore::new();
    let Ruling::Forward(Some(claim)) = local_begin(&mut store, "payment.succeeded", 1).decision
    else {
        panic!("applies")
    };
    let at = OrderStore::Local {
        store: &mut store,
        now: T0,
    };
    let SettleStep::Done(settled) = settle(&Policy::defaults(), claim, false, at) else {
        panic!("the local store settles at once")
    };
    assert_eq!(events(settled.events), [Event::OrderNotApplied]);
    assert_eq!(settled.outcome, Some("not_applied"));
    // Not paid yet: delivered again later.
    let early = local_begin(&mut store, "order.shipped", 2);
    assert_eq!(early.outcome, Some("early"));
    assert_eq!(events(early.events), [Event::OrderEarly]);
    assert!(matches!(early.decision, Ruling::Answer(_)));
}

#[test]
fn without_a_clock_nothing_is_decided_on_the_store() {
    let step = begin::<MemoryStore>(
        &Policy::defaults(),
        ordered("payment.succeeded"),
        OwnerToken([1; 16]),
        Payers::default(),
        OrderStore::NoClock,
    );
    let BeginStep::Decided(begun) = step else {
        panic!("answered at once")
    };
    assert!(matches!(begun.decision, Ruling::Answer(_)));
    assert_eq!((begun.outcome, events(begun.events)), (None, Vec::new()));
    let claim = Claimed {
        key: ordered("x").key,
        owner: OwnerToken([1; 16]),
        to: String::from("paid"),
        version: 0,
    };
    let SettleStep::Done(settled) =
        settle::<MemoryStore>(&Policy::defaults(), claim, true, OrderStore::NoClock)
    else {
        panic!("nothing to send")
    };
    assert_eq!(events(settled.events), [Event::StoreError]);
    assert_eq!(settled.note, Some(OrderNote::NoClock));
    assert!(settled.note.unwrap().is_warning());
}

#[test]
fn the_store_service_is_sent_a_begin_and_its_silence_is_a_store_failure() {
    let step = begin::<MemoryStore>(
        &Policy::defaults(),
        ordered("payment.succeeded"),
        OwnerToken([1; 16]),
        Payers::default(),
        OrderStore::Remote,
    );
    let BeginStep::Send { request, asked } = step else {
        panic!("asked of the store service")
    };
    assert!(matches!(request, Request::OrderBegin { .. }));
    let nothing = CalloutReply {
        status: None,
        body: &[],
    };
    // The defaults' store is local: an answer from a store service is a host bug.
    let begun = asked.clone().answered(&Policy::defaults(), nothing);
    assert_eq!(events(begun.events), [Event::StoreError]);
    assert!(matches!(begun.note, Some(OrderNote::StoreFailed(_))));
    let nothing = CalloutReply {
        status: None,
        body: &[],
    };
    let settled = settle_answered(nothing);
    assert_eq!(events(settled.events), [Event::StoreError]);
    let text = settled.note.unwrap().to_string();
    assert!(text.starts_with("order: store failed settling"), "{text}");
}
