//! `docs/semantics.md` §5: the store's memory is bounded by configuration. Many unique keys beyond
//! capacity: the store-full failure mode applies and is counted, Envoy's resident memory stays
//! flat, and expired records make room again.

use crate::client::Request;
use crate::harness::{Envoy, Setup};
use crate::upstream::Upstream;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

fn send_unique(port: u16, prefix: &str, count: usize, threads: usize) {
    let prefix: Arc<str> = prefix.into();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let prefix = prefix.clone();
            thread::spawn(move || {
                for i in (t..count).step_by(threads) {
                    let response = Request::post("/m", &format!("{prefix}-{i}"))
                        .script("body=32000")
                        .send(port);
                    assert_eq!(response.status, 201, "{}", response.text());
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("sender");
    }
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn unique_keys_beyond_capacity_keep_memory_flat() {
    let upstream = Upstream::start();
    // 64 records of at most 64 KiB; past that, forward unprotected (and count it).
    // One client fills it all: its share is the whole store (`shares`, see floods.rs).
    let config = r#"{ "routes": [{ "prefix": "/" }], "capacity": 64, "records_per_cell": 8,
                      "shares": { "peer": "100%" },
                      "on_store_full": "pass_through", "max_response_body": "64KiB" }"#;
    let envoy = Envoy::start(&Setup::new(config, upstream.port));
    send_unique(envoy.port, "warm", 300, 4);
    let before = envoy.rss_kib();
    const MORE: usize = 3000;
    send_unique(envoy.port, "more", MORE, 4);
    let after = envoy.rss_kib();
    let claimed = envoy.counter("claimed");
    let full = envoy.counter("store_full");
    eprintln!("memory bound: RSS {before} KiB -> {after} KiB after {MORE} more unique keys with 32 KB answers; claimed {claimed}, store_full {full}");
    assert!(
        claimed <= 64,
        "never more records than the capacity: {claimed}"
    );
    assert_eq!(claimed + full, 300 + MORE as u64);
    assert_eq!(envoy.counter("passthrough"), full);
    // Unbounded, 3000 stored 32 KB answers would add ~94 MiB.
    assert!(
        after < before + 16 * 1024,
        "RSS grew from {before} KiB to {after} KiB"
    );
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_full_store_rejects_until_records_expire() {
    let upstream = Upstream::start();
    let config = r#"{ "routes": [{ "prefix": "/" }], "capacity": 8, "records_per_cell": 8,
                      "shares": { "peer": "100%" }, "ttl": "2s", "lease": "1s" }"#;
    let envoy = Envoy::start(&Setup::new(config, upstream.port));
    for i in 0..8 {
        assert_eq!(
            Request::post("/m", &format!("fill-{i}"))
                .send(envoy.port)
                .status,
            201
        );
    }
    let full = Request::post("/m", "one-too-many").send(envoy.port);
    assert_eq!(full.status, 503);
    assert_eq!(full.problem_code(), "store_full");
    assert!(full.header("retry-after").is_some());
    assert_eq!(upstream.hits("one-too-many"), 0);
    assert_eq!(envoy.counter("store_full"), 1);
    // Records expire after their TTL and their room is reclaimed: the key runs then.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let response = Request::post("/m", "one-too-many").send(envoy.port);
        if response.status == 201 {
            break;
        }
        assert_eq!(response.status, 503);
        assert!(
            Instant::now() < deadline,
            "expired records were never reclaimed"
        );
        thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(upstream.hits("one-too-many"), 1);
}
