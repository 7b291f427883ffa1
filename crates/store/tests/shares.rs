//! The remote store's shares against a real `redis-server` and a real Redis
//! Cluster: a payer at its share is refused while others are served, made-up identities do not
//! multiply an address group's share, a refused claim leaves nothing behind, and the rest of
//! `maxmemory` above `--claim-memory-limit` is kept for finishes — so Redis out of memory never
//! turns a finished execution into a second one; and one busy client's own concurrent requests,
//! which all charge its ledgers, are never a store error (on Redis, a Cluster, two replicas,
//! PostgreSQL). Shares bind only while the record's fill shard is under pressure (on Redis, a
//! Cluster, PostgreSQL). Run with `make test-store`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use idemgate_core::client::payer::{Billed, PayerTag, Share};
use idemgate_core::client::scope::StorageKey;
use idemgate_core::record::{StoredBody, StoredResponse};
use idemgate_core::store::remote::End;
use idemgate_core::store::remote::{Failure, Request, Response};
use idemgate_core::store::share::{Fill, FillShard};
use idemgate_core::time::Span;
use idemgate_core::{ClaimOutcome, FinishOutcome};
use support::postgres::{self as pg, Postgres};
use support::{owner, skey, Client, Cluster, Redis, Service, SLOW_OK};

/// An address group (the tag's last byte 1) and an identity (0), as the filter names them.
fn group(n: u8) -> PayerTag {
    PayerTag([n, 0, 0, 0, 0, 0, 0, 1])
}
fn identity(n: u8) -> PayerTag {
    PayerTag([n, 9, 9, 9, 9, 9, 9, 0])
}

/// A claim charged to `payers`, each within `share` records (bytes not limited).
fn claim(key: StorageKey, n: u32, payers: &[PayerTag], share: u64) -> Request {
    let share = Share {
        records: share,
        bytes: u64::MAX,
    };
    claim_within(key, n, payers, share)
}

fn claim_within(key: StorageKey, n: u32, payers: &[PayerTag], share: Share) -> Request {
    Request::Claim {
        key,
        fingerprint: idemgate_core::request::fingerprint::Fingerprint([7; 32]),
        owner: owner(n),
        lease: Span::from_secs(30),
        ttl: Span::from_secs(3600),
        payers: payers.iter().map(|&tag| Billed { tag, share }).collect(),
        fill: None,
    }
}

fn finish(key: StorageKey, n: u32, body: Option<usize>) -> Request {
    Request::Finish {
        key,
        owner: owner(n),
        ttl: Span::from_secs(3600),
        end: match body {
            None => End::Release,
            Some(len) => End::Store(StoredResponse {
                status: 201,
                headers: vec![],
                body: StoredBody::Kept(vec![b'x'; len]),
                seal: None,
            }),
        },
        shard: None,
    }
}

fn forwarded(response: &Response) -> bool {
    matches!(response, Response::Claim(ClaimOutcome::Forward { .. }))
}

async fn shares_hold(client: &Client, keys_left: impl Fn() -> u64) {
    const SHARE: u64 = 3;
    let mallory = |i: u32| {
        // A made-up identity per request, from one address group.
        claim(
            skey(&format!("m-{i}")),
            i,
            &[group(1), identity(i as u8)],
            SHARE,
        )
    };
    for i in 0..3 {
        assert!(forwarded(&client.op(&mallory(i)).await.1), "claim {i}");
    }
    let before = keys_left();
    for i in 3..20 {
        match client.op(&mallory(i)).await.1 {
            Response::Claim(ClaimOutcome::QuotaExceeded { retry_after, .. }) => {
                assert!(retry_after <= Span::from_secs(30), "{retry_after:?}");
                assert!(retry_after > Span::from_secs(25), "{retry_after:?}");
            }
            other => panic!("claim {i} over the group's share: {other:?}"),
        }
    }
    assert_eq!(
        keys_left(),
        before,
        "a refused claim leaves no record and no charge behind"
    );
    // Another client is served meanwhile.
    let alice = claim(skey("alice"), 100, &[group(2), identity(200)], SHARE);
    assert!(forwarded(&client.op(&alice).await.1));
    // A release gives the place back; a stored answer keeps it (until it expires).
    let released = client.op(&finish(skey("m-0"), 0, None)).await.1;
    assert_eq!(released, Response::Finish(FinishOutcome::Released));
    assert!(forwarded(&client.op(&mallory(50)).await.1));
    let stored = client.op(&finish(skey("m-1"), 1, Some(10))).await.1;
    assert_eq!(stored, Response::Finish(FinishOutcome::Stored));
    assert!(matches!(
        client.op(&mallory(51)).await.1,
        Response::Claim(ClaimOutcome::QuotaExceeded { .. })
    ));
    // A replay of the stored answer is never refused, and charges nothing.
    let again = client
        .op(&claim(skey("m-1"), 99, &[group(1)], SHARE))
        .await
        .1;
    assert!(matches!(again, Response::Claim(ClaimOutcome::Replay(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn a_payer_at_its_share_is_refused_and_others_are_served() {
    let redis = Redis::start(false);
    let service = Service::start(&redis.url(), &["--op-timeout", SLOW_OK]);
    let client = Client::connect(&service).await;
    let keys = || {
        redis
            .cli(&["DBSIZE"])
            .trim()
            .trim_start_matches("(integer) ")
            .parse::<u64>()
            .expect("DBSIZE")
    };
    shares_hold(&client, keys).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Redis Cluster (redis-server): make test-store"]
async fn shares_hold_on_a_cluster_one_key_per_call() {
    let cluster = Cluster::start();
    let service = Service::start(&cluster.urls(), &["--cluster", "--op-timeout", SLOW_OK]);
    let client = Client::connect(&service).await;
    let keys = || {
        cluster
            .nodes
            .iter()
            .map(|n| {
                n.cli(&["DBSIZE"])
                    .trim()
                    .trim_start_matches("(integer) ")
                    .parse::<u64>()
                    .expect("DBSIZE")
            })
            .sum()
    };
    shares_hold(&client, keys).await;
}

/// Shares in bytes: a client whose answers are large reaches its byte share with a
/// handful of records and is refused (Retry-After: until its first answer expires), while
/// another client with small answers is served.
async fn byte_shares_hold(client: &Client) {
    let share = Share {
        records: 100,
        bytes: 200_000,
    };
    let mut stored = 0u32;
    let refused = loop {
        let key = skey(&format!("big-{stored}"));
        match client
            .op(&claim_within(key, stored, &[group(5)], share))
            .await
            .1
        {
            Response::Claim(ClaimOutcome::Forward { .. }) => {
                let done = client.op(&finish(key, stored, Some(60_000))).await.1;
                assert_eq!(done, Response::Finish(FinishOutcome::Stored));
                stored += 1;
            }
            Response::Claim(ClaimOutcome::QuotaExceeded { retry_after, .. }) => break retry_after,
            other => panic!("claim {stored}: {other:?}"),
        }
        assert!(stored <= 10, "the byte share never bound");
    };
    // 60,160 bytes each with its record: three leave it below 200,000, the fourth takes it over.
    assert_eq!(stored, 4);
    assert!(
        refused > Span::from_secs(3_500) && refused <= Span::from_secs(3_600),
        "until the first answer expires: {refused:?}"
    );
    for n in 0..20 {
        let key = skey(&format!("small-{n}"));
        let claimed = client
            .op(&claim_within(key, 500 + n, &[group(6)], share))
            .await
            .1;
        assert!(forwarded(&claimed), "small {n}: {claimed:?}");
        let done = client.op(&finish(key, 500 + n, Some(10))).await.1;
        assert_eq!(done, Response::Finish(FinishOutcome::Stored));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn a_payer_at_its_byte_share_is_refused() {
    let redis = Redis::start(false);
    let service = Service::start(&redis.url(), &["--op-timeout", SLOW_OK]);
    byte_shares_hold(&Client::connect(&service).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: make test-store"]
async fn a_payer_at_its_byte_share_is_refused_on_postgres() {
    let postgres = Postgres::start();
    let service = pg::service(&postgres.url(), &["--op-timeout", SLOW_OK], &[]);
    byte_shares_hold(&Client::connect(&service).await).await;
}

/// Claims in flight, then a flood of stored answers until Redis is refused new claims; then the
/// claims in flight finish. With the limit, every one of them lands; with it off (the control,
/// which is what the service did before), Redis is out of memory and they fail — each of those
/// claims would be taken over after its lease, and its request run a second time.
async fn finishes_after_a_flood(limit: &str) -> (usize, usize) {
    let redis = Redis::start(false);
    redis.cli(&["CONFIG", "SET", "maxmemory", "16mb"]);
    redis.cli(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    let service = Service::start(
        &redis.url(),
        &["--op-timeout", SLOW_OK, "--claim-memory-limit", limit],
    );
    let client = Client::connect(&service).await;
    const IN_FLIGHT: u32 = 20;
    for i in 0..IN_FLIGHT {
        let first = claim(skey(&format!("slow-{i}")), i, &[], 0);
        assert!(forwarded(&client.op(&first).await.1));
    }
    let mut refused = false;
    for i in 0..4_000u32 {
        let key = skey(&format!("flood-{i}"));
        match client.op(&claim(key, 1_000 + i, &[], 0)).await.1 {
            Response::Claim(ClaimOutcome::StoreFull { .. }) => {
                refused = true;
                break;
            }
            response => assert!(forwarded(&response), "flood claim {i}: {response:?}"),
        }
        // A full Redis may also refuse the flood's own finish: then the flood is over.
        if let Response::Failed(Failure::Full) =
            client.op(&finish(key, 1_000 + i, Some(8 * 1024))).await.1
        {
            refused = true;
            break;
        }
    }
    assert!(
        refused,
        "16 MB of stored answers were refused at some point"
    );
    let mut landed = 0;
    let mut lost = 0;
    for i in 0..IN_FLIGHT {
        let key = skey(&format!("slow-{i}"));
        match client.op(&finish(key, i, Some(8 * 1024))).await.1 {
            Response::Finish(FinishOutcome::Stored) => landed += 1,
            Response::Failed(Failure::Full) => lost += 1,
            other => panic!("finish {i}: {other:?}"),
        }
    }
    (landed, lost)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn the_memory_above_the_claim_limit_is_kept_for_finishes() {
    assert_eq!(finishes_after_a_flood("50%").await, (20, 0));
    let (landed, lost) = finishes_after_a_flood("off").await;
    assert!(
        lost > 0,
        "control: without the limit, finishes find Redis full ({landed} landed)"
    );
}

/// One honest client — one identity, one address group, as every request of one caller is
/// billed — with many requests at once through the services `clients` reach (in turn): all of
/// them charge the same two ledgers. Each must be served; a payer's own concurrency is never a
/// store error.
async fn one_busy_client_is_served(clients: &[Client]) {
    const AT_ONCE: u32 = 32;
    const EACH: u32 = 20;
    let payers = [group(7), identity(7)];
    let mut tasks = Vec::new();
    for t in 0..AT_ONCE {
        let client = clients[t as usize % clients.len()].clone();
        tasks.push(tokio::spawn(async move {
            let mut failed = Vec::new();
            for i in 0..EACH {
                let n = t * EACH + i;
                let key = skey(&format!("busy-{n}"));
                let claimed = client.op(&claim(key, n, &payers, 100_000)).await.1;
                if !forwarded(&claimed) {
                    failed.push(format!("claim {n}: {claimed:?}"));
                    continue;
                }
                let stored = client.op(&finish(key, n, Some(16))).await.1;
                if stored != Response::Finish(FinishOutcome::Stored) {
                    failed.push(format!("finish {n}: {stored:?}"));
                }
            }
            failed
        }));
    }
    let mut failed = Vec::new();
    for task in tasks {
        failed.extend(task.await.expect("task"));
    }
    assert!(
        failed.is_empty(),
        "{} of {} operations failed, first: {:?}",
        failed.len(),
        2 * AT_ONCE * EACH,
        failed.first()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn one_busy_client_is_never_a_store_error() {
    let redis = Redis::start(false);
    let service = Service::start(&redis.url(), &["--op-timeout", SLOW_OK]);
    one_busy_client_is_served(&[Client::connect(&service).await]).await;
}

/// Two service replicas on one Redis: each settles its own batches, so their writes to the
/// client's ledgers race — the engine's compare-and-set decides, and no request fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn one_busy_client_through_two_replicas_is_never_a_store_error() {
    let redis = Redis::start(false);
    let a = Service::start(&redis.url(), &["--op-timeout", SLOW_OK]);
    let b = Service::start(&redis.url(), &["--op-timeout", SLOW_OK]);
    one_busy_client_is_served(&[Client::connect(&a).await, Client::connect(&b).await]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: make test-store"]
async fn one_busy_client_is_never_a_store_error_on_postgres() {
    let postgres = Postgres::start();
    let service = pg::service(&postgres.url(), &["--op-timeout", SLOW_OK], &[]);
    one_busy_client_is_served(&[Client::connect(&service).await]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Redis Cluster (redis-server): make test-store"]
async fn one_busy_client_is_never_a_store_error_on_a_cluster() {
    let cluster = Cluster::start();
    let service = Service::start(&cluster.urls(), &["--cluster", "--op-timeout", SLOW_OK]);
    one_busy_client_is_served(&[Client::connect(&service).await]).await;
}

/// The fleet's fill: a fill shard of 20 records, under pressure from 4 (20 %), its count a key of
/// its own charged with each record. An address group whose share is 1 record claims past it
/// while the shard is below its pressure, and is refused once it is at it — the claim undone —
/// while another group below its share is served; its releases bring the shard below again.
async fn shares_bind_under_pressure(client: &Client, keys_left: impl Fn() -> u64) {
    let fill = Fill {
        shard: FillShard {
            tag: PayerTag([0, 0, 0, 0, b'f', b'u', b'l', 2]),
            capacity: 20,
        },
        pressure: 20,
    };
    let share = Share {
        records: 1,
        bytes: u64::MAX,
    };
    let counted =
        |key: &str, n: u32, payer: PayerTag| match claim_within(skey(key), n, &[payer], share) {
            Request::Claim {
                key,
                fingerprint,
                owner,
                lease,
                ttl,
                payers,
                ..
            } => Request::Claim {
                key,
                fingerprint,
                owner,
                lease,
                ttl,
                payers,
                fill: Some(fill),
            },
            other => other,
        };
    for i in 0..4 {
        let claimed = client.op(&counted(&format!("p-{i}"), i, group(5))).await.1;
        assert!(
            forwarded(&claimed),
            "claim {i} below the pressure: {claimed:?}"
        );
    }
    let before = keys_left();
    match client.op(&counted("p-4", 4, group(5))).await.1 {
        Response::Claim(ClaimOutcome::QuotaExceeded { retry_after, .. }) => {
            assert!(retry_after <= Span::from_secs(30), "{retry_after:?}");
        }
        other => panic!("a claim over the share under pressure: {other:?}"),
    }
    assert_eq!(keys_left(), before, "a refused claim leaves nothing behind");
    let other = client.op(&counted("q-0", 100, group(6))).await.1;
    assert!(
        forwarded(&other),
        "another group within its share: {other:?}"
    );
    for i in 0..2 {
        let mut release = finish(skey(&format!("p-{i}")), i, None);
        if let Request::Finish { shard, .. } = &mut release {
            *shard = Some(fill.shard);
        }
        let released = client.op(&release).await.1;
        assert_eq!(released, Response::Finish(FinishOutcome::Released));
    }
    let again = client.op(&counted("p-5", 5, group(5))).await.1;
    assert!(forwarded(&again), "below the pressure again: {again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn shares_bind_under_pressure_on_redis() {
    let redis = Redis::start(false);
    let service = Service::start(&redis.url(), &["--op-timeout", SLOW_OK]);
    let keys = || {
        redis
            .cli(&["DBSIZE"])
            .trim()
            .trim_start_matches("(integer) ")
            .parse::<u64>()
            .expect("DBSIZE")
    };
    shares_bind_under_pressure(&Client::connect(&service).await, keys).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Redis Cluster (redis-server): make test-store"]
async fn shares_bind_under_pressure_on_a_cluster() {
    let cluster = Cluster::start();
    let service = Service::start(&cluster.urls(), &["--cluster", "--op-timeout", SLOW_OK]);
    let keys = || {
        cluster
            .nodes
            .iter()
            .map(|n| {
                n.cli(&["DBSIZE"])
                    .trim()
                    .trim_start_matches("(integer) ")
                    .parse::<u64>()
                    .expect("DBSIZE")
            })
            .sum()
    };
    shares_bind_under_pressure(&Client::connect(&service).await, keys).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: make test-store"]
async fn shares_bind_under_pressure_on_postgres() {
    let postgres = Postgres::start();
    let service = pg::service(&postgres.url(), &["--op-timeout", SLOW_OK], &[]);
    let rows = || {
        postgres
            .psql("SELECT count(*) FROM idemgate_records")
            .parse::<u64>()
            .expect("a count")
    };
    shares_bind_under_pressure(&Client::connect(&service).await, rows).await;
}
