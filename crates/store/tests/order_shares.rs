//! The sequencer's resource records are charged like claims on the remote store, against a
//! real `redis-server` and a real PostgreSQL: a begin that makes a new resource record carries
//! its bill (the delivery's payers, as a claim's), and a payer at its share is refused — 429
//! naming the share and the payer, nothing left behind — while another payer is served and a
//! begin on a live record is not charged again. Run with `make test-store`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use idemgate_core::client::payer::{Billed, PayerTag, Share, ShareReason, ShareRefusal};
use idemgate_core::client::scope::StorageKey;
use idemgate_core::order::resource::BeginOutcome;
use idemgate_core::order::transition::DeclaredTable;
use idemgate_core::store::remote::{Request, Response};
use idemgate_core::time::Span;
use support::postgres::{self as pg, Postgres};
use support::{owner, skey, Client, Redis, Service, SLOW_OK};

const TABLE: &str = r#"{"initial": "unpaid", "transitions": [
    ["unpaid", "payment.succeeded", "paid"], ["paid", "order.shipped", "shipped"]]}"#;

/// Records an address group may hold (fixed caps: no fill shard, so the share binds at once).
const SHARE: u64 = 2;
const TTL: Span = Span::from_secs(3600);

/// An address group, as the filter names it (the tag's last byte 1).
fn group(n: u8) -> PayerTag {
    PayerTag([n, 0, 0, 0, 0, 0, 0, 1])
}

/// A payment event for the resource `key`, by delivery `n`, charged to `payer`.
fn begin(key: StorageKey, n: u32, payer: PayerTag) -> Request {
    let share = Share {
        records: SHARE,
        bytes: u64::MAX,
    };
    Request::OrderBegin {
        key,
        owner: owner(n),
        lease: Span::from_secs(30),
        ttl: TTL,
        retry_after: Span::from_secs(10),
        forward_after: None,
        event: "payment.succeeded".into(),
        table: DeclaredTable::parse(TABLE).unwrap(),
        payers: vec![Billed { tag: payer, share }],
        fill: None,
    }
}

fn applied(response: &Response) -> bool {
    matches!(response, Response::Begin(BeginOutcome::Apply { .. }, _))
}

async fn resource_records_are_charged(client: &Client) {
    let flooder = group(1);
    for i in 0..SHARE as u32 {
        let made_up = begin(skey(&format!("resource-{i}")), i, flooder);
        assert!(applied(&client.op(&made_up).await.1), "resource {i}");
    }
    // A third made-up resource: the address group holds its share.
    let refused = client.op(&begin(skey("resource-9"), 9, flooder)).await.1;
    match refused {
        Response::Begin(BeginOutcome::QuotaExceeded { retry_after, share }, _) => {
            assert!(
                retry_after <= TTL && retry_after > Span(TTL.0 - 30_000),
                "{retry_after:?}"
            );
            assert_eq!(
                share,
                Some(ShareRefusal {
                    reason: ShareReason::Address,
                    payer: flooder,
                })
            );
        }
        other => panic!("a new resource over the group's share: {other:?}"),
    }
    // A begin on a live record makes nothing new: not charged, not refused (busy: another
    // delivery holds the resource).
    let live = client.op(&begin(skey("resource-0"), 50, flooder)).await.1;
    assert!(
        matches!(live, Response::Begin(BeginOutcome::Busy { .. }, _)),
        "{live:?}"
    );
    // The refused begin left no record: another sender makes it, and is served.
    let other = client.op(&begin(skey("resource-9"), 60, group(2))).await.1;
    assert!(applied(&other), "{other:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn a_resource_record_over_its_share_is_refused_on_redis() {
    let redis = Redis::start(false);
    let service = Service::start(&redis.url(), &["--op-timeout", SLOW_OK]);
    resource_records_are_charged(&Client::connect(&service).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: make test-store"]
async fn a_resource_record_over_its_share_is_refused_on_postgres() {
    let postgres = Postgres::start();
    let service = pg::service(&postgres.url(), &["--op-timeout", SLOW_OK], &[]);
    resource_records_are_charged(&Client::connect(&service).await).await;
}
