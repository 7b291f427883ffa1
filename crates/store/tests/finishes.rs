//! A batch of finishes in one `POST /v1/op` (op 7), against a real `redis-server` and a real
//! PostgreSQL: each finish is carried as if it came alone and answered in the batch's order — the
//! owners' answers stored, a stranger's finish *not owner*, the same batch sent again (its first
//! answer lost) all *not owner* with nothing written twice — and a batch the service cannot read is
//! refused whole, as a service that predates batches refuses every one. Run with `make test-store`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use hyper::StatusCode;
use idemgate_core::store::remote::{End, Failure, Incoming, Request, Response};
use idemgate_core::time::Span;
use idemgate_core::{ClaimOutcome, FinishOutcome};
use support::postgres::{self as pg, Postgres};
use support::{claim, owner, skey, stored_response, Client, Redis, Service, SLOW_OK};

fn finish(key: &str, n: u32, seed: u8) -> Request {
    Request::Finish {
        key: skey(key),
        owner: owner(n),
        ttl: Span::from_secs(3600),
        end: End::Store(stored_response(seed)),
        shard: None,
    }
}

fn release(key: &str, n: u32) -> Request {
    Request::Finish {
        key: skey(key),
        owner: owner(n),
        ttl: Span::from_secs(3600),
        end: End::Release,
        shard: None,
    }
}

/// Sends `batch` as one request: its status and its answers.
async fn batch(client: &Client, finishes: Vec<Request>) -> (StatusCode, Response) {
    let (status, body) = client
        .post("/v1/op", Incoming::Finishes(finishes).encode())
        .await;
    let response = Response::decode(&body)
        .unwrap_or_else(|e| panic!("undecodable answer ({status}): {e}: {body:?}"));
    (status, response)
}

fn metric(text: &str, line_start: &str) -> u64 {
    text.lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

async fn each_finish_is_carried_as_if_alone(service: &Service, prefix: &str) {
    let client = Client::connect(service).await;
    let keys: Vec<String> = (0..6).map(|i| format!("{prefix}-batch-{i}")).collect();
    for (i, key) in keys.iter().enumerate() {
        let (status, answer) = client.op(&claim(skey(key), 7, 100 + i as u32)).await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            matches!(answer, Response::Claim(ClaimOutcome::Forward { .. })),
            "{answer:?}"
        );
    }
    // Four owners store, one releases, one finish is a stranger's (another owner token).
    let finishes = vec![
        finish(&keys[0], 100, 0),
        finish(&keys[1], 101, 1),
        release(&keys[2], 102),
        finish(&keys[3], 103, 3),
        finish(&keys[4], 104, 4),
        finish(&keys[5], 999, 5),
    ];
    let expected = Response::Finishes(vec![
        Response::Finish(FinishOutcome::Stored),
        Response::Finish(FinishOutcome::Stored),
        Response::Finish(FinishOutcome::Released),
        Response::Finish(FinishOutcome::Stored),
        Response::Finish(FinishOutcome::Stored),
        Response::Finish(FinishOutcome::NotOwner),
    ]);
    assert_eq!(
        batch(&client, finishes.clone()).await,
        (StatusCode::OK, expected)
    );
    // The same bytes again, as a filter resends a batch whose answer it lost: every finish that
    // landed is found as not owner, and nothing is written twice.
    let again = batch(&client, finishes).await;
    assert_eq!(
        again,
        (
            StatusCode::OK,
            Response::Finishes(vec![Response::Finish(FinishOutcome::NotOwner); 6])
        )
    );
    // What landed is what a single finish would have left: replays, a released key claimable, a
    // claim still held by its owner.
    for i in [0, 1, 3, 4] {
        let (_, answer) = client.op(&claim(skey(&keys[i]), 7, 200)).await;
        assert_eq!(
            answer,
            Response::Claim(ClaimOutcome::Replay(stored_response(i as u8))),
            "key {i}"
        );
    }
    let (_, answer) = client.op(&claim(skey(&keys[2]), 7, 200)).await;
    assert!(
        matches!(answer, Response::Claim(ClaimOutcome::Forward { .. })),
        "{answer:?}"
    );
    let (_, answer) = client.op(&claim(skey(&keys[5]), 7, 200)).await;
    assert!(
        matches!(answer, Response::Claim(ClaimOutcome::Conflict { .. })),
        "{answer:?}"
    );
    let (_, metrics) = client.get("/metrics").await;
    assert_eq!(metric(&metrics, "idemgate_store_finish_batches_total "), 2);
    assert_eq!(
        metric(
            &metrics,
            "idemgate_store_operations_total{op=\"finish\",outcome=\"stored\"}"
        ),
        4
    );
    assert_eq!(
        metric(
            &metrics,
            "idemgate_store_operations_total{op=\"finish\",outcome=\"not_owner\"}"
        ),
        7
    );
}

/// Bytes the service cannot read as a batch are refused whole (400), as a service that predates
/// batches refuses op 7 itself: no finish of it is carried out.
async fn an_unreadable_batch_is_refused_whole(service: &Service, prefix: &str) {
    let client = Client::connect(service).await;
    let key = format!("{prefix}-mixed");
    let (_, answer) = client.op(&claim(skey(&key), 7, 1)).await;
    assert!(matches!(
        answer,
        Response::Claim(ClaimOutcome::Forward { .. })
    ));
    let mixed = Incoming::Finishes(vec![finish(&key, 1, 1), claim(skey("other"), 7, 2)]);
    let (status, body) = client.post("/v1/op", mixed.encode()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        Response::decode(&body),
        Ok(Response::Failed(Failure::BadRequest))
    );
    // The finish inside was not carried out: the claim is still in flight.
    let (_, answer) = client.op(&claim(skey(&key), 7, 3)).await;
    assert!(
        matches!(answer, Response::Claim(ClaimOutcome::Conflict { .. })),
        "{answer:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn a_batch_of_finishes_on_redis() {
    let redis = Redis::start(false);
    let service = Service::start(&redis.url(), &["--op-timeout", SLOW_OK]);
    each_finish_is_carried_as_if_alone(&service, "redis").await;
    an_unreadable_batch_is_refused_whole(&service, "redis").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: make test-store"]
async fn a_batch_of_finishes_on_postgres() {
    let postgres = Postgres::start();
    let service = pg::service(&postgres.url(), &["--op-timeout", SLOW_OK], &[]);
    each_finish_is_carried_as_if_alone(&service, "pg").await;
    an_unreadable_batch_is_refused_whole(&service, "pg").await;
}

/// A finish the engine could not carry out answers its own failure, in its place; the others
/// in the batch are not held back by it. Redis stopped: every finish answers a failure (200,
/// the batch was read), then a resend once Redis is back lands each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn a_batch_the_engine_cannot_carry_answers_a_failure_per_finish() {
    let redis = Redis::start(false);
    let service = Service::start(&redis.url(), &["--op-timeout", "300ms"]);
    let client = Client::connect(&service).await;
    for i in 0..3 {
        let (_, answer) = client.op(&claim(skey(&format!("down-{i}")), 7, i)).await;
        assert!(matches!(
            answer,
            Response::Claim(ClaimOutcome::Forward { .. })
        ));
    }
    let finishes: Vec<Request> = (0..3)
        .map(|i| finish(&format!("down-{i}"), i, i as u8))
        .collect();
    redis.stop();
    let (status, answer) = batch(&client, finishes.clone()).await;
    redis.cont();
    assert_eq!(status, StatusCode::OK);
    let Response::Finishes(answers) = answer else {
        panic!("{answer:?}")
    };
    assert_eq!(answers.len(), 3);
    assert!(
        answers.iter().all(|a| matches!(a, Response::Failed(_))),
        "{answers:?}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (_, answer) = batch(&client, finishes.clone()).await;
        if answer == Response::Finishes(vec![Response::Finish(FinishOutcome::Stored); 3]) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{answer:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
