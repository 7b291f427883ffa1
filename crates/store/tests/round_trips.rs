//! One Redis call per operation in the common cases, counted by Redis itself (`INFO
//! commandstats`, every script call is one `EVALSHA`): a fresh claim, the owner's finish and a
//! token's first use each take one call, and so do a replay and a duplicate in flight (the refused
//! speculation brings back what the key holds); a finish through another service replica than
//! its claim reads first (two calls). Run with `make test-store`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use idemgate_core::store::remote::End;
use idemgate_core::store::remote::{Request, Response};
use idemgate_core::time::{Span, UnixMillis};
use idemgate_core::{ClaimOutcome, ConsumeOutcome, FinishOutcome};
use support::{claim, owner, skey, stored_response, Client, Redis, Service, SLOW_OK};

/// Script calls Redis has answered since the last reset.
fn script_calls(redis: &Redis) -> u64 {
    let stats = redis.cli(&["INFO", "commandstats"]);
    ["cmdstat_evalsha:", "cmdstat_eval:"]
        .iter()
        .filter_map(|name| {
            let line = stats.lines().find(|l| l.starts_with(name))?;
            let calls = line.split("calls=").nth(1)?.split(',').next()?;
            calls.parse::<u64>().ok()
        })
        .sum()
}

fn finish(key: &str, n: u32, seed: u8) -> Request {
    Request::Finish {
        key: skey(key),
        owner: owner(n),
        ttl: Span::from_secs(3600),
        end: End::Store(stored_response(seed)),
        shard: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: make test-store"]
async fn common_operations_take_one_redis_call() {
    let redis = Redis::start(false);
    let service = Service::start(&redis.url(), &["--op-timeout", SLOW_OK]);
    let other = Service::start(&redis.url(), &["--op-timeout", SLOW_OK]);
    let client = Client::connect(&service).await;
    let via_other = Client::connect(&other).await;
    // Warm up: the first use of each script on a node is NOSCRIPT, then EVAL.
    client.op(&claim(skey("warm"), 1, 1)).await;
    client.op(&finish("warm", 1, 1)).await;
    client.op(&claim(skey("warm-2"), 1, 2)).await;
    via_other.op(&finish("warm-2", 2, 1)).await;
    redis.cli(&["CONFIG", "RESETSTAT"]);

    let mut expected = 0;
    let mut step = |what: &str, calls: u64| {
        expected += calls;
        assert_eq!(script_calls(&redis), expected, "{what}");
    };
    let forward = client.op(&claim(skey("order"), 7, 10)).await.1;
    assert!(matches!(
        forward,
        Response::Claim(ClaimOutcome::Forward {
            takeover: false,
            ..
        })
    ));
    step("a fresh claim", 1);
    let duplicate = client.op(&claim(skey("order"), 7, 11)).await.1;
    assert!(matches!(
        duplicate,
        Response::Claim(ClaimOutcome::Conflict { .. })
    ));
    step("a duplicate in flight", 1);
    let stored = client.op(&finish("order", 10, 3)).await.1;
    assert_eq!(stored, Response::Finish(FinishOutcome::Stored));
    step("the owner's finish", 1);
    let replay = via_other.op(&claim(skey("order"), 7, 12)).await.1;
    assert_eq!(
        replay,
        Response::Claim(ClaimOutcome::Replay(stored_response(3)))
    );
    step("a replay, through the other replica", 1);
    let consume = Request::Consume {
        key: skey("token"),
        expires_at: UnixMillis(4_000_000_000_000),
        payers: vec![],
        fill: None,
    };
    assert_eq!(
        client.op(&consume).await.1,
        Response::Consume(ConsumeOutcome::Consumed)
    );
    step("a token's first use", 1);
    assert_eq!(
        via_other.op(&consume).await.1,
        Response::Consume(ConsumeOutcome::AlreadyUsed)
    );
    step("a token used before", 1);
    // The claim through one replica, its finish through the other: read, then compare-and-set.
    client.op(&claim(skey("split"), 7, 20)).await;
    step("a fresh claim", 1);
    let stored = via_other.op(&finish("split", 20, 4)).await.1;
    assert_eq!(stored, Response::Finish(FinishOutcome::Stored));
    step("a finish without its claim remembered", 2);
    // The service counts the same calls.
    let metrics = client.get("/metrics").await.1;
    assert!(
        metrics.contains("idemgate_store_engine_calls_total "),
        "{metrics}"
    );
}
