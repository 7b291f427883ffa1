//! Shares on a fleet: the floods of `floods` through a fleet — two Envoys on the remote store (the
//! `idemgate-store` service on a `redis-server` with `maxmemory` and `noeviction`, or on
//! PostgreSQL), the example's filter configuration as shipped with its store made remote. The
//! store service charges each record to its payers' shares, one engine key per payer, and counts
//! it in its fill shard (a key of its own), so a client's share is of the whole fleet's store
//! whichever Envoy it goes through, and binds only while the fleet's store is under pressure (a
//! fifth of the example's `capacity`; the first flood fills it past that). What must hold: each
//! flooder is refused by its share (429 `scope_quota_exceeded`, never a 503) — a flooder with
//! large answers by its share in bytes — the other clients are served and replayed across the two
//! Envoys, no key reaches the app twice, and Redis stays below its `maxmemory`. And the opposite
//! failure: one busy client alone on the fleet, 1,500 fresh keys over both Envoys, is never
//! refused.

use crate::client::Request;
use crate::fleet::{envoy_with_env, Backend, Engine, Store, STORE};
use crate::floods::{
    app, example_filter, flood, flooder_failures, keyed, others_are_served,
    outside_the_byte_share_with, ttl_seconds, LARGE, MALLORY, MALLORY_TOO, OTHERS, UNKNOWN,
};
use crate::upstream::Upstream;
use std::net::Ipv4Addr;
use std::process::Command;
use std::time::Instant;

/// Requests per flood: three times the example's share of an address (10 % of 10,000).
const FLOOD: usize = 3_000;

const SPLIT_ONE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 7);
const SPLIT_TWO: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 8);
const BIG: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 9);
const MERCHANT: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 10);
/// Who floods with large answers (flood 4).
const BIG_CLIENT: &str = "127.0.0.9 (60 KB answers)";

/// `used_memory` and `maxmemory` of the fleet's Redis.
fn redis_memory(url: &str) -> (u64, u64) {
    let port = url.rsplit(':').next().expect("a port");
    let out = Command::new("redis-cli")
        .args(["-p", port, "INFO", "memory"])
        .output()
        .expect("redis-cli runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{name} in INFO memory: {text}"))
    };
    (field("used_memory"), field("maxmemory"))
}

/// The fleet's engine: Redis with a `maxmemory` it must stay below, or PostgreSQL.
fn backend(engine: Engine) -> Backend {
    match engine {
        Engine::Redis => Backend::start_with(
            Engine::Redis,
            &[
                "--appendonly",
                "no",
                "--maxmemory",
                "64mb",
                "--maxmemory-policy",
                "noeviction",
            ],
        ),
        other => Backend::start(other),
    }
}

/// The example's filter configuration as shipped, its store made remote.
fn remote_example() -> String {
    let mut filter: serde_json::Value =
        serde_json::from_str(&example_filter()).expect("the example's JSON");
    let remote: serde_json::Value =
        serde_json::from_str(&format!("{{{STORE}}}")).expect("the fleet's store member");
    filter["store"] = remote["store"].clone();
    filter.to_string()
}

/// Two Envoys with `filter` on `store`; the example's `/payments` route needs its token secret.
fn two_envoys(
    filter: &str,
    upstream: &Upstream,
    store: &Store,
) -> (crate::harness::Envoy, crate::harness::Envoy) {
    let env = [("IDEMGATE_TOKEN_SECRET", "a-flood-test-secret-long-enough")];
    let (one, _) = envoy_with_env(filter, upstream, store, &env);
    let (two, _) = envoy_with_env(filter, upstream, store, &env);
    (one, two)
}

#[test]
#[ignore = "needs Envoy, the built filter and store, redis-server: make test-envoy"]
fn floods_through_two_envoys_on_redis_leave_room_for_others() {
    floods_leave_room_for_others(Engine::Redis);
}

#[test]
#[ignore = "needs Envoy, the built filter and store, PostgreSQL: make test-envoy"]
fn floods_through_two_envoys_on_postgres_leave_room_for_others() {
    floods_leave_room_for_others(Engine::Postgres);
}

/// The three floods, one after another, each from its own addresses, and the first again with
/// answers of 60 KB (the example's byte share of 32 MiB binds); then the other clients.
fn floods_leave_room_for_others(engine: Engine) {
    let backend = backend(engine);
    let redis_url = backend.redis.as_ref().map(|redis| redis.url());
    let store = Store::start(&backend);
    let filter = remote_example();
    let ttl = ttl_seconds(&filter);
    let upstream = Upstream::with_rule(app);
    let (one, two) = two_envoys(&filter, &upstream, &store);
    let ports = [one.port, two.port];

    type Flood = (&'static str, fn(usize) -> (&'static str, Request));
    let floods: [Flood; 4] = [
        ("flood 1 (Bearer mallory)", |n| {
            let key = format!("fleet-mallory-{n}");
            (
                "mallory",
                keyed(UNKNOWN, &key, MALLORY, Some("Bearer mallory")),
            )
        }),
        ("flood 2 (made-up Authorization)", |n| {
            let key = format!("fleet-forged-{n}");
            let who = format!("Bearer forged-{n}");
            (
                "127.0.0.3 (forged identities)",
                keyed(UNKNOWN, &key, MALLORY_TOO, Some(&who)),
            )
        }),
        ("flood 3 (two addresses, no Authorization)", |n| {
            let key = format!("fleet-anon-{n}");
            if n % 2 == 0 {
                ("127.0.0.7", keyed(UNKNOWN, &key, SPLIT_ONE, None))
            } else {
                ("127.0.0.8", keyed(UNKNOWN, &key, SPLIT_TWO, None))
            }
        }),
        ("flood 4 (Bearer big, 60 KB answers)", |n| {
            let key = format!("fleet-big-{n}");
            let request = keyed(UNKNOWN, &key, BIG, Some("Bearer big"));
            (BIG_CLIENT, request.script("status=404;body=60000"))
        }),
    ];
    assert_eq!(LARGE, 60_000, "flood 4's answers are LARGE");
    let mut failures = Vec::new();
    for (name, request) in floods {
        let started = Instant::now();
        let tallies = flood(&ports, FLOOD, request);
        let took = started.elapsed().as_secs_f64();
        eprintln!("{name}, two Envoys on {engine:?}: {FLOOD} requests in {took:.1} s");
        // The finishes the flood completed within 20 ms — one queue delay (10 ms), and as long
        // again for the batch's round trip: claims still in flight while their answers wait to go.
        let queued = (FLOOD as f64 / took * 0.020).ceil() as u64;
        for (who, tally) in &tallies {
            eprintln!("{name}: {who} got {}", tally.summary());
            failures.extend(flooder_failures(who, tally, ttl));
            if *who == BIG_CLIENT {
                failures.extend(outside_the_byte_share_with(who, tally.count("404"), queued));
            }
        }
        // No key of the flood reached the app twice.
        for n in 0..FLOOD {
            let (_, sent) = request(n);
            let key = sent
                .headers
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case("idempotency-key"))
                .map(|(_, value)| value.clone())
                .expect("a keyed request");
            if upstream.hits(&key) > 1 {
                failures.push(format!(
                    "{name}: {key} reached the app {} times",
                    upstream.hits(&key)
                ));
            }
        }
    }
    let (others_failed, others) = others_are_served(&ports, &upstream, OTHERS);
    for line in &others {
        eprintln!("after the floods, two Envoys on {engine:?}: {line}");
    }
    failures.extend(others_failed);
    if let Some(redis_url) = redis_url {
        let (used, max) = redis_memory(&redis_url);
        eprintln!("Redis after the floods: used_memory {used} B of maxmemory {max} B");
        if used >= max {
            failures.push(format!("Redis reached its maxmemory ({used} of {max} B)"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Fresh keys the busy client sends: half again its share of the example's store (a tenth of
/// 10,000), far below the store's pressure (a fifth).
const BUSY: usize = 1_500;

#[test]
#[ignore = "needs Envoy, the built filter and store, redis-server: make test-envoy"]
fn a_busy_client_is_served_through_two_envoys_on_redis() {
    a_busy_client_is_served(Engine::Redis);
}

#[test]
#[ignore = "needs Envoy, the built filter and store, PostgreSQL: make test-envoy"]
fn a_busy_client_is_served_through_two_envoys_on_postgres() {
    a_busy_client_is_served(Engine::Postgres);
}

/// One API client (one `Authorization`, one address) creating 1,500 orders with fresh keys,
/// spread over both Envoys, nobody else using the fleet: every order is created, each reaching
/// the app once. Before the fleet counted its fill, the remote store's shares were fixed caps:
/// about 1,000 × 201, then 429 `scope_quota_exceeded`.
fn a_busy_client_is_served(engine: Engine) {
    let backend = backend(engine);
    let store = Store::start(&backend);
    let upstream = Upstream::with_rule(app);
    let (one, two) = two_envoys(&remote_example(), &upstream, &store);
    let tallies = flood(&[one.port, two.port], BUSY, |n| {
        let key = format!("fleet-order-{n}");
        (
            "merchant",
            keyed("/orders", &key, MERCHANT, Some("Bearer merchant")),
        )
    });
    let tally = tallies.get("merchant").expect("the client's answers");
    eprintln!(
        "busy client, two Envoys on {engine:?}: {BUSY} fresh keys: {}",
        tally.summary()
    );
    assert_eq!(
        tally.count("201"),
        BUSY,
        "every order of a client alone on a fleet far from its pressure is created: {}",
        tally.summary()
    );
    assert_eq!(upstream.total(), BUSY, "each order reached the app once");
}
