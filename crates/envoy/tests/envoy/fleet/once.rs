//! Each key runs once across the fleet, and every Envoy replays its answer: plain and detached
//! routes, on every engine and on a Redis Cluster, and a one-time token used once.

use super::backend::STORE;
use super::backend::{Backend, Engine, Store, RECORD_SECRET};
use super::envoys::{config, envoy, once_across_the_fleet, replay};
use super::redis::{redis_cluster, Redis};
use crate::client::Request;
use crate::harness::{Envoy, Setup};
use crate::upstream::Upstream;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

fn two_envoys_sharing_the_store_run_each_key_once_and_replay_it_identically(engine: Engine) {
    let backend = Backend::start(engine);
    // 1000 claims at once queue for PostgreSQL's pooled connections: on a loaded machine the
    // winner's could outlast 300 ms, time out unseen and leave no one to run the key (safe, but
    // not what this test counts). The service waits up to 1.5 s instead, below the filter's 2 s.
    let store = match engine {
        Engine::Redis => Store::start(&backend),
        _ => Store::start_patient(&backend),
    };
    let upstream = Upstream::start();
    let filter = config("");
    let (a, _) = envoy(&filter, &upstream, &store);
    let (b, _) = envoy(&filter, &upstream, &store);
    let mut report = Vec::new();
    for round in 0..4 {
        let key = format!("fleet-burst-{round}");
        let answers = once_across_the_fleet(&upstream, &[a.port, b.port], &key, 1000, 20);
        // Counted, not assumed: what the clients saw executed and what reached the upstream.
        let executed = answers
            .iter()
            .filter(|r| r.status == 201 && !r.replayed())
            .count();
        let calls = upstream.hits(&key);
        let replayed = answers.iter().filter(|r| r.replayed()).count();
        let conflicts = answers.iter().filter(|r| r.status == 409).count();
        let unavailable = answers.iter().filter(|r| r.status == 503).count();
        report.push(format!(
            "{key}: {executed} executed ({calls} upstream call(s)), {replayed} replayed, {conflicts} conflicts, {unavailable} store-unavailable"
        ));
    }
    eprintln!("{}", report.join("\n"));
}
on_every_engine!(two_envoys_sharing_the_store_run_each_key_once_and_replay_it_identically);

#[test]
#[ignore = "needs Envoy, the built filter and store, redis-server: make test-envoy"]
fn two_envoys_on_a_redis_cluster_run_each_key_once() {
    let nodes = redis_cluster();
    let urls: Vec<String> = nodes.iter().map(Redis::url).collect();
    let store = Store::start_on_cluster(urls.join(","));
    let upstream = Upstream::start();
    let filter = config("");
    let (a, _) = envoy(&filter, &upstream, &store);
    let (b, _) = envoy(&filter, &upstream, &store);
    // Keys spread over the cluster's slots (each record is one Redis key).
    for round in 0..6 {
        let key = format!("fleet-cluster-{round}");
        once_across_the_fleet(&upstream, &[a.port, b.port], &key, 200, 10);
    }
    // The records are spread over the primaries.
    let holding = nodes
        .iter()
        .filter(|n| {
            Command::new("redis-cli")
                .args(["-p", &n.port.to_string(), "dbsize"])
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() != "0")
        })
        .count();
    assert!(holding >= 2, "records on {holding} of 3 primaries");
}

fn detached_routes_on_the_remote_store_run_each_key_once(engine: Engine) {
    let backend = Backend::start(engine);
    let store = Store::start(&backend);
    let upstream = Upstream::start();
    let filter = config(r#", "upstream": { "reentry": "idemgate_reentry", "timeout": "5s" }"#);
    let (a, _) = envoy(&filter, &upstream, &store);
    let (b, _) = envoy(&filter, &upstream, &store);
    for round in 0..3 {
        let key = format!("fleet-detached-{round}");
        once_across_the_fleet(&upstream, &[a.port, b.port], &key, 200, 10);
    }
    assert!(a.counter("detached") + b.counter("detached") >= 3);
}
on_every_engine!(detached_routes_on_the_remote_store_run_each_key_once);

fn a_one_time_token_is_usable_once_across_the_fleet(engine: Engine) {
    let backend = Backend::start(engine);
    let store = Store::start(&backend);
    let upstream = Upstream::start();
    let filter = format!(
        r#"{{ "routes": [{{ "prefix": "/pay", "key": "required", "token": "required" }}],
             "token": {{ "secret_env": "IDEMGATE_TEST_TOKEN_SECRET" }}, {STORE} }}"#
    );
    let start = || {
        let mut setup = Setup::new(&filter, upstream.port);
        setup.clusters = store.cluster();
        setup.vm_env = vec![
            (
                "IDEMGATE_TEST_TOKEN_SECRET".into(),
                "a-test-secret-that-is-long-enough".into(),
            ),
            ("IDEMGATE_RECORD_SECRET".into(), RECORD_SECRET.into()),
        ];
        Envoy::start(&setup)
    };
    let (a, b) = (start(), start());
    let issued = Request::new("POST", "/.idemgate/token?method=POST&path=/pay")
        .header("authorization", "Bearer alice")
        .send(a.port);
    assert_eq!(issued.status, 200, "{}", issued.text());
    let token = issued.json()["token"].as_str().expect("token").to_string();
    let pay = |port: u16, key: &str| {
        Request::post("/pay", key)
            .header("authorization", "Bearer alice")
            .header("idemgate-token", &token)
            .send(port)
    };
    let first = pay(a.port, "t1");
    assert_eq!(
        (first.status, first.replayed()),
        (201, false),
        "{}",
        first.text()
    );
    // The same request through the other Envoy: a replay, not a token reuse.
    let retry = replay(
        &Request::post("/pay", "t1")
            .header("authorization", "Bearer alice")
            .header("idemgate-token", &token),
        b.port,
    );
    assert_eq!(
        (retry.status, retry.replayed()),
        (201, true),
        "{}",
        retry.text()
    );
    assert_eq!(retry.body, first.body);
    // Another request with the used token, through either Envoy: refused, never forwarded.
    // (A refused request's claim is released after its answer, as a completion is written: a
    // reuse sent at once may still find the key in flight, and tries again.)
    for port in [b.port, a.port] {
        let deadline = Instant::now() + Duration::from_secs(5);
        let reuse = loop {
            let reuse = pay(port, "t2");
            if reuse.problem_code() != "request_in_flight" || Instant::now() > deadline {
                break reuse;
            }
            thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(reuse.status, 409, "{}", reuse.text());
        assert_eq!(reuse.problem_code(), "token_used");
    }
    assert_eq!(upstream.hits("t2"), 0);
    assert_eq!(upstream.total(), 1);
    assert_eq!(a.counter("token_consumed") + b.counter("token_consumed"), 1);
}
on_every_engine!(a_one_time_token_is_usable_once_across_the_fleet);
