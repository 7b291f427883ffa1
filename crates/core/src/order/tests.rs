use super::*;
use crate::answer::order::{order_answer, OrderAnswer};
use crate::record::resource::ResourceClaim;
use crate::record::{Bucket, OwnerToken, Record};
use crate::request::json::JsonPointer;
use crate::store::ordering::{BeginEvent, SettleEvent};
use crate::store::protocol::run;
use crate::store::MemoryStore;
use crate::time::UnixMillis;
use alloc::format;
use alloc::string::ToString;
use alloc::vec;

const TABLE: &str = r#"{"initial": "unpaid", "transitions": [
    ["unpaid", "payment.succeeded", "paid"], ["paid", "order.shipped", "shipped"],
    ["unpaid", "order.cancelled", "cancelled"], ["paid", "order.cancelled", "cancelled"]]}"#;

fn rule(forward_after: Option<Span>) -> OrderRule {
    OrderRule {
        resource: KeySource::Json(JsonPointer::parse("/data/order").unwrap()),
        event: KeySource::Json(JsonPointer::parse("/type").unwrap()),
        table: DeclaredTable::parse(TABLE).unwrap(),
        retry_after: Span::from_secs(10),
        forward_after,
    }
}

fn begin_for<'a>(rule: &'a OrderRule, event: &'a str, owner: u8) -> Begin<'a> {
    Begin {
        table: &rule.table,
        event,
        owner: OwnerToken([owner; 16]),
        lease: Span::from_secs(60),
        ttl: Span::from_secs(3600),
        retry_after: rule.retry_after,
        forward_after: rule.forward_after,
    }
}

const T0: UnixMillis = UnixMillis(1_000_000);

fn no_headers(_: &str) -> Vec<&'static [u8]> {
    Vec::new()
}

#[test]
fn reads_the_event_and_the_resource() {
    let r = rule(None);
    let facts = r.read(
        &no_headers,
        br#"{"type":"order.shipped","data":{"order":7}}"#,
    );
    assert_eq!(
        facts,
        OrderFacts::Ordered {
            resource: "7".into(),
            event: "order.shipped".into()
        }
    );
    let read = |body: &str| r.read(&no_headers, body.as_bytes());
    assert_eq!(
        read(r#"{"type":"ping","data":{"order":7}}"#),
        OrderFacts::NotOrdered
    );
    assert_eq!(read(r#"{"data":{"order":7}}"#), OrderFacts::NotOrdered);
    assert_eq!(read("not json"), OrderFacts::NotOrdered);
    assert_eq!(
        read(r#"{"type":"order.shipped"}"#),
        OrderFacts::ResourceMissing
    );
    assert_eq!(
        read(r#"{"type":"order.shipped","data":{"order":""}}"#),
        OrderFacts::ResourceMissing
    );
    assert_eq!(
        read(r#"{"type":"order.shipped","data":{"order":{"id":1}}}"#),
        OrderFacts::ResourceMissing
    );
}

#[test]
fn reads_headers_and_form_fields() {
    let r = OrderRule {
        resource: KeySource::Header("x-order".into()),
        event: KeySource::Form("event".into()),
        ..rule(None)
    };
    let headers = |name: &str| -> Vec<&'static [u8]> {
        match name {
            "x-order" => vec![&b" A-1 "[..]],
            _ => Vec::new(),
        }
    };
    assert_eq!(
        r.read(&headers, b"x=1&event=payment%2Esucceeded"),
        OrderFacts::Ordered {
            resource: "A-1".into(),
            event: "payment.succeeded".into()
        }
    );
    assert!(r.needs_body());
    let headers_only = OrderRule {
        event: KeySource::Header("x-event".into()),
        ..r
    };
    assert!(!headers_only.needs_body());
}

#[test]
fn an_event_applies_then_is_already_applied() {
    let r = rule(None);
    let (outcome, write) = begin(None, &begin_for(&r, "payment.succeeded", 1), T0);
    assert_eq!(outcome, BeginOutcome::Apply { to: "paid".into() });
    let claimed = write.unwrap();
    assert_eq!(claimed.state, "unpaid");
    assert_eq!(claimed.claim.as_ref().unwrap().owner, OwnerToken([1; 16]));

    let (settled, write) = settle(
        Some(&claimed),
        OwnerToken([1; 16]),
        "paid",
        true,
        Span::from_secs(3600),
        T0,
    );
    assert_eq!(settled, SettleOutcome::Advanced { version: 1 });
    let paid = write.unwrap();
    assert_eq!((paid.state.as_str(), paid.claim.is_none()), ("paid", true));

    let (again, write) = begin(Some(&paid), &begin_for(&r, "payment.succeeded", 2), T0);
    assert_eq!(
        again,
        BeginOutcome::AlreadyApplied {
            state: "paid".into()
        }
    );
    assert!(write.is_none());
}

#[test]
fn a_failed_upstream_leaves_the_state_and_frees_the_resource() {
    let r = rule(None);
    let (_, write) = begin(None, &begin_for(&r, "payment.succeeded", 1), T0);
    let claimed = write.unwrap();
    let ttl = Span::from_secs(3600);
    let (released, write) = settle(Some(&claimed), OwnerToken([1; 16]), "paid", false, ttl, T0);
    assert_eq!(released, SettleOutcome::Released);
    let free = write.unwrap();
    assert_eq!((free.state.as_str(), free.version), ("unpaid", 0));
    let (next, _) = begin(Some(&free), &begin_for(&r, "payment.succeeded", 2), T0);
    assert_eq!(next, BeginOutcome::Apply { to: "paid".into() });
}

#[test]
fn a_second_event_waits_for_the_first_and_is_decided_against_its_result() {
    let r = rule(None);
    let (_, write) = begin(None, &begin_for(&r, "payment.succeeded", 1), T0);
    let claimed = write.unwrap();
    let later = T0.after(Span::from_secs(20));
    let (busy, write) = begin(Some(&claimed), &begin_for(&r, "order.cancelled", 2), later);
    assert_eq!(
        busy,
        BeginOutcome::Busy {
            retry_after: Span::from_secs(40)
        }
    );
    assert!(write.is_none());
    let ttl = Span::from_secs(3600);
    let (_, write) = settle(
        Some(&claimed),
        OwnerToken([1; 16]),
        "paid",
        true,
        ttl,
        later,
    );
    let paid = write.unwrap();
    let (next, _) = begin(Some(&paid), &begin_for(&r, "order.cancelled", 2), later);
    assert_eq!(
        next,
        BeginOutcome::Apply {
            to: "cancelled".into()
        }
    );
}

#[test]
fn a_lapsed_claim_is_free_and_its_owner_can_no_longer_settle() {
    let r = rule(None);
    let (_, write) = begin(None, &begin_for(&r, "payment.succeeded", 1), T0);
    let claimed = write.unwrap();
    let after_lease = T0.after(Span::from_secs(61));
    let (taken, write) = begin(
        Some(&claimed),
        &begin_for(&r, "payment.succeeded", 2),
        after_lease,
    );
    assert_eq!(taken, BeginOutcome::Apply { to: "paid".into() });
    let retaken = write.unwrap();
    let ttl = Span::from_secs(3600);
    let (stale, write) = settle(
        Some(&retaken),
        OwnerToken([1; 16]),
        "paid",
        true,
        ttl,
        after_lease,
    );
    assert_eq!((stale, write), (SettleOutcome::NotOwner, None));
    let (none, _) = settle(None, OwnerToken([2; 16]), "paid", true, ttl, after_lease);
    assert_eq!(none, SettleOutcome::NotOwner);
}

#[test]
fn early_illegal_and_an_expired_record() {
    let r = rule(None);
    let (early, write) = begin(None, &begin_for(&r, "order.shipped", 1), T0);
    assert_eq!(
        early,
        BeginOutcome::Early {
            retry_after: Span::from_secs(10)
        }
    );
    assert!(write.is_none(), "without forward_after nothing is written");
    let shipped = Resource {
        state: "shipped".into(),
        version: 2,
        claim: None,
        early: Vec::new(),
        seal: None,
        expires_at: T0.after(Span::from_secs(10)),
    };
    let (illegal, _) = begin(Some(&shipped), &begin_for(&r, "order.cancelled", 1), T0);
    assert_eq!(
        illegal,
        BeginOutcome::Illegal {
            state: "shipped".into(),
            terminal: true
        }
    );
    // Expired: as if absent, the initial state.
    let expired_at = T0.after(Span::from_secs(10));
    let (fresh, _) = begin(
        Some(&shipped),
        &begin_for(&r, "order.shipped", 1),
        expired_at,
    );
    assert!(matches!(fresh, BeginOutcome::Early { .. }));
    let odd = Resource {
        state: "lost".into(),
        ..shipped
    };
    let (unknown, _) = begin(Some(&odd), &begin_for(&r, "order.shipped", 1), T0);
    assert_eq!(
        unknown,
        BeginOutcome::UnknownState {
            state: "lost".into()
        }
    );
}

#[test]
fn an_early_event_is_forwarded_once_its_patience_is_over() {
    let r = rule(Some(Span::from_secs(3600)));
    let (first, write) = begin(None, &begin_for(&r, "order.shipped", 1), T0);
    assert!(matches!(first, BeginOutcome::Early { .. }));
    let seen = write.unwrap();
    assert_eq!(seen.early, vec![("order.shipped".to_string(), T0)]);
    let soon = T0.after(Span::from_secs(3599));
    let (still, write) = begin(Some(&seen), &begin_for(&r, "order.shipped", 2), soon);
    assert!(matches!(still, BeginOutcome::Early { .. }));
    assert!(write.is_none());
    let late = T0.after(Span::from_secs(3600));
    let (forward, write) = begin(Some(&seen), &begin_for(&r, "order.shipped", 3), late);
    assert_eq!((forward, write), (BeginOutcome::ForwardEarly, None));
    // Once it applies, it is no longer remembered as early.
    let paid = Resource {
        state: "paid".into(),
        ..seen
    };
    let (apply, write) = begin(Some(&paid), &begin_for(&r, "order.shipped", 4), late);
    assert_eq!(
        apply,
        BeginOutcome::Apply {
            to: "shipped".into()
        }
    );
    assert!(write.unwrap().early.is_empty());
}

#[test]
fn a_resource_record_round_trips_in_a_bucket() {
    let record = Resource {
        state: "paid".into(),
        version: 3,
        claim: Some(ResourceClaim {
            owner: OwnerToken([7; 16]),
            lease_until: UnixMillis(5),
            version: 3,
        }),
        early: vec![("order.shipped".into(), UnixMillis(9))],
        seal: None,
        expires_at: UnixMillis(99),
    };
    let mut bucket = Bucket::default();
    bucket.put(StorageKey([1; 32]), Record::Resource(record.clone()));
    let unsealed = bucket.encode();
    // A sealed one beside it: its own tag, so an unsealed record's bytes are what they were
    // before states were sealed (and such a record reads as unsealed).
    let sealed = Resource {
        seal: Some(crate::record::seal::Seal([4; 32])),
        ..record
    };
    bucket.put(StorageKey([2; 32]), Record::Resource(sealed));
    let bytes = bucket.encode();
    assert_eq!(Bucket::decode(&bytes).unwrap(), bucket);
    assert_eq!(bytes[..unsealed.len()][5..], unsealed[5..]);
    for cut in 0..bytes.len() {
        assert!(Bucket::decode(&bytes[..cut]).is_err() || cut == 0);
    }
}

#[test]
fn settling_an_applied_event_drops_the_seal_of_the_state_it_left() {
    let paid = Resource {
        state: "paid".into(),
        version: 1,
        claim: Some(ResourceClaim {
            owner: OwnerToken([7; 16]),
            lease_until: T0.after(Span::from_secs(30)),
            version: 1,
        }),
        early: Vec::new(),
        seal: Some(crate::record::seal::Seal([4; 32])),
        expires_at: T0.after(Span::from_secs(60)),
    };
    let ttl = Span::from_secs(60);
    let (_, released) = settle(Some(&paid), OwnerToken([7; 16]), "shipped", false, ttl, T0);
    assert_eq!(
        released.unwrap().seal,
        paid.seal,
        "the state stays, and its seal"
    );
    let (_, advanced) = settle(Some(&paid), OwnerToken([7; 16]), "shipped", true, ttl, T0);
    assert_eq!(advanced.unwrap().seal, None);
}

#[test]
fn the_local_store_runs_the_same_rules_and_counts_the_record() {
    let r = rule(None);
    let mut store = MemoryStore::new();
    let key = StorageKey::resource(
        Scope {
            source: "route",
            value: b"/hooks",
        },
        "7",
    );
    let start = |event: &'static str, owner: u8, store: &mut MemoryStore| {
        let mutation = BeginEvent {
            key,
            begin: begin_for(&r, event, owner),
            per_cell: 8,
        };
        run(store, "cell".into(), mutation, T0).unwrap()
    };
    let applied = start("payment.succeeded", 1, &mut store);
    assert_eq!(applied, BeginOutcome::Apply { to: "paid".into() });
    assert!(matches!(
        start("order.cancelled", 2, &mut store),
        BeginOutcome::Busy { .. }
    ));
    let settle_event = SettleEvent {
        key,
        owner: OwnerToken([1; 16]),
        to: "paid".into(),
        applied: true,
        ttl: Span::from_secs(3600),
    };
    let settled = run(&mut store, "cell".into(), settle_event, T0).unwrap();
    assert_eq!(settled, SettleOutcome::Advanced { version: 1 });
    assert_eq!(
        start("payment.succeeded", 3, &mut store),
        BeginOutcome::AlreadyApplied {
            state: "paid".into()
        }
    );
    // A full cell refuses a new resource (as it would a new claim).
    let mut full = MemoryStore::new();
    let mutation = BeginEvent {
        key,
        begin: begin_for(&r, "payment.succeeded", 1),
        per_cell: 1,
    };
    let mut bucket = Bucket::default();
    bucket.put(
        StorageKey([9; 32]),
        Record::TokenUsed {
            expires_at: T0.after(Span::from_secs(5)),
        },
    );
    crate::store::Store::write(
        &mut full,
        "cell",
        &bucket.encode(),
        crate::store::Expect::Absent,
    )
    .unwrap();
    assert!(matches!(
        run(&mut full, "cell".into(), mutation, T0).unwrap(),
        BeginOutcome::StoreFull { .. }
    ));
}

#[test]
fn resource_keys_are_their_own_domain() {
    let scope = Scope {
        source: "route",
        value: b"/hooks",
    };
    let other = Scope {
        value: b"/other",
        ..scope
    };
    assert_ne!(
        StorageKey::resource(scope, "7"),
        StorageKey::resource(scope, "8")
    );
    assert_ne!(
        StorageKey::resource(scope, "7"),
        StorageKey::resource(other, "7")
    );
    let key = crate::request::key::IdempotencyKey::parse(b"7").unwrap();
    assert_ne!(
        StorageKey::resource(scope, "7"),
        StorageKey::derive(scope, "POST", "/hooks", &key)
    );
}

#[test]
fn preconditions() {
    let p = Precondition::IfMatch;
    assert_eq!(p.check("PATCH", &[]), Err(PreconditionProblem::Required));
    assert_eq!(p.check("DELETE", &[]), Err(PreconditionProblem::Required));
    assert_eq!(p.check("GET", &[]), Ok(()));
    assert_eq!(p.check("POST", &[]), Ok(()));
    assert_eq!(p.check("PUT", &[b"\"v1\""]), Ok(()));
    // `*` names no version: only a route that says so takes it.
    assert_eq!(
        p.check("PUT", &[b"*"]),
        Err(PreconditionProblem::VersionRequired)
    );
    assert_eq!(Precondition::IfMatchOrAny.check("PUT", &[b"*"]), Ok(()));
    assert_eq!(p.check("PUT", &[b"W/\"v1\", \"v2\""]), Ok(()));
    for bad in [&b"v1"[..], b"", b"\"v1", b"\"a\" \"b\""] {
        assert_eq!(
            p.check("PATCH", &[bad]),
            Err(PreconditionProblem::Malformed),
            "{bad:?}"
        );
    }
    assert_eq!(
        p.check("PATCH", &[b"\"v1\"", b"v2"]),
        Err(PreconditionProblem::Malformed)
    );
    // Each problem is its own event for a host to count.
    use crate::events::Event;
    let events = |problem: PreconditionProblem| problem.events().iter().collect::<Vec<_>>();
    assert_eq!(
        events(PreconditionProblem::Required),
        [Event::PreconditionRequired]
    );
    assert_eq!(
        events(PreconditionProblem::Malformed),
        [Event::PreconditionMalformed]
    );
}

#[test]
fn answers() {
    let status =
        |a: OrderAnswer<'_>| order_answer(&a, &crate::policy::ProblemStyle::DEFAULT).status;
    let early = order_answer(
        &OrderAnswer::Early {
            retry_after: Span::from_secs(10),
        },
        &crate::policy::ProblemStyle::DEFAULT,
    );
    assert_eq!(early.status, 409);
    assert_eq!(early.header("retry-after"), Some("10"));
    assert_eq!(early.header(ORDER_HEADER), Some("early"));
    assert!(core::str::from_utf8(&early.body)
        .unwrap()
        .contains("order_event_early"));
    let busy = order_answer(
        &OrderAnswer::Busy {
            retry_after: Span(10),
        },
        &crate::policy::ProblemStyle::DEFAULT,
    );
    assert_eq!((busy.status, busy.header("retry-after")), (409, Some("1")));
    let done = order_answer(
        &OrderAnswer::AlreadyApplied { state: "paid" },
        &crate::policy::ProblemStyle::DEFAULT,
    );
    assert_eq!(done.status, 200);
    assert_eq!(done.header(ORDER_HEADER), Some("already-applied"));
    assert_eq!(done.body, br#"{"order":"already_applied","state":"paid"}"#);
    let illegal = order_answer(
        &OrderAnswer::Illegal { state: "shipped" },
        &crate::policy::ProblemStyle::DEFAULT,
    );
    assert_eq!(illegal.header(ORDER_HEADER), Some("illegal"));
    assert_eq!(illegal.body, br#"{"order":"illegal","state":"shipped"}"#);
    assert_eq!(status(OrderAnswer::ResourceMissing), 400);
    assert_eq!(
        status(OrderAnswer::Precondition(PreconditionProblem::Required)),
        428
    );
    assert_eq!(
        status(OrderAnswer::Precondition(PreconditionProblem::Malformed)),
        400
    );
}

#[test]
fn a_preset_route_keeps_its_order() {
    let env = |name: &str| (name == "WH").then(|| "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into());
    let config = format!(
        r#"{{"routes": [{{"prefix": "/hooks", "preset": "standard-webhooks",
            "signature": {{"secret_env": "WH"}},
            "order": {{"resource": {{"json": "/data/order"}}, "event": {{"json": "/type"}}, "table": {TABLE}}}}}]}}"#
    );
    let policy = crate::policy::Policy::from_json(&config, &env).unwrap();
    let route = &policy.routes[0];
    assert!(route.signature.is_some());
    let order = route.order.as_ref().unwrap();
    assert_eq!(order.table.initial(), "unpaid");
    assert_eq!(order.retry_after, Span::from_secs(10));
    assert_eq!(order.forward_after, None);
}
