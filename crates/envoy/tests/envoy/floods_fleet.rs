//! Issue 23, item 6: the floods of `floods` through a fleet — two Envoys on the remote store (the
//! `idemgate-store` service on a `redis-server` with `maxmemory` and `noeviction`), the example's
//! filter configuration as shipped with its store made remote. The store service charges each
//! record to its payers' shares, one Redis key per payer, so a client's share is of the whole
//! fleet's store whichever Envoy it goes through. What must hold: each flooder is refused by its
//! share (429 `scope_quota_exceeded`, never a 503) — a flooder with large answers by its share in
//! bytes — the other clients are served and replayed across the two Envoys, no key reaches the
//! app twice, and Redis stays below its `maxmemory`.

use crate::client::Request;
use crate::fleet::{envoy_with_env, Backend, Engine, Store, STORE};
use crate::floods::{
    app, example_filter, flood, flooder_failures, keyed, others_are_served, outside_the_byte_share,
    ttl_seconds, LARGE, MALLORY, MALLORY_TOO, OTHERS, UNKNOWN,
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

/// The three floods, one after another, each from its own addresses, and the first again with
/// answers of 60 KB (the example's byte share of 32 MiB binds); then the other clients.
#[test]
#[ignore = "needs Envoy, the built filter and store, redis-server: make test-envoy"]
fn floods_through_two_envoys_on_redis_leave_room_for_others() {
    let backend = Backend::start_with(
        Engine::Redis,
        &[
            "--appendonly",
            "no",
            "--maxmemory",
            "64mb",
            "--maxmemory-policy",
            "noeviction",
        ],
    );
    let redis_url = backend.redis.as_ref().expect("a redis engine").url();
    let store = Store::start(&backend);
    let mut filter: serde_json::Value =
        serde_json::from_str(&example_filter()).expect("the example's JSON");
    let remote: serde_json::Value =
        serde_json::from_str(&format!("{{{STORE}}}")).expect("the fleet's store member");
    filter["store"] = remote["store"].clone();
    let filter = filter.to_string();
    let ttl = ttl_seconds(&filter);
    let upstream = Upstream::with_rule(app);
    // The example's `/payments` route needs its token secret.
    let env = [("IDEMGATE_TOKEN_SECRET", "a-flood-test-secret-long-enough")];
    let (one, _) = envoy_with_env(&filter, &upstream, &store, &env);
    let (two, _) = envoy_with_env(&filter, &upstream, &store, &env);
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
        eprintln!(
            "{name}, two Envoys on Redis: {FLOOD} requests in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        for (who, tally) in &tallies {
            eprintln!("{name}: {who} got {}", tally.summary());
            failures.extend(flooder_failures(who, tally, ttl));
            if *who == BIG_CLIENT {
                failures.extend(outside_the_byte_share(who, tally.count("404")));
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
        eprintln!("after the floods, two Envoys on Redis: {line}");
    }
    failures.extend(others_failed);
    let (used, max) = redis_memory(&redis_url);
    eprintln!("Redis after the floods: used_memory {used} B of maxmemory {max} B");
    if used >= max {
        failures.push(format!("Redis reached its maxmemory ({used} of {max} B)"));
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
