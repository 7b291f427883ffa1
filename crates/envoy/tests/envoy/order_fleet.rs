//! The sequencer on a fleet: two real Envoys whose sequencers keep each resource's state
//! in one remote store (the `idemgate-store` service on redis-server, PostgreSQL, or both), so an
//! event applied through one Envoy is already applied through the other, and an event that arrived
//! early at one applies after the event another Envoy forwarded.

use crate::client::{Request, Response};
use crate::fleet::{envoy, redis_cluster, Backend, Engine, Redis, Store, STORE};
use crate::order::{config_with, event, DETACHED};
use crate::upstream::Upstream;
use std::time::{Duration, Instant};

/// Sends `request` as a sender redelivers: while the resource is busy (the other Envoy's settle
/// is sent when its answer is, and may land a moment later), again after a short wait.
fn deliver(request: Request, port: u16) -> Response {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let answer = request.send(port);
        let busy = answer.status == 409
            && matches!(
                answer.problem_code().as_str(),
                "order_resource_busy" | "request_in_flight"
            );
        if !busy || Instant::now() > deadline {
            return answer;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn a_resource_has_one_state_across_the_fleet(engine: Engine) {
    let backend = Backend::start(engine);
    let store = Store::start(&backend);
    one_state_on(&store);
}

/// Redis Cluster: each ordering operation touches the one key of its resource.
#[test]
#[ignore = "needs Envoy, the built filter and store, redis-server: make test-envoy"]
fn a_resource_has_one_state_across_a_fleet_on_a_redis_cluster() {
    let nodes = redis_cluster();
    let urls: Vec<String> = nodes.iter().map(Redis::url).collect();
    let store = Store::start_on_cluster(urls.join(","));
    one_state_on(&store);
}

fn one_state_on(store: &Store) {
    let upstream = Upstream::start();
    // Envoy A forwards on the router path, Envoy B on detached exchanges: both settle alike.
    let (a, _) = envoy(&config_with(None, &format!(", {STORE}")), &upstream, store);
    let (b, _) = envoy(
        &config_with(Some(DETACHED), &format!(", {STORE}")),
        &upstream,
        store,
    );
    let hits = || upstream.path_hits("/hooks");

    let paid = deliver(event("/hooks", "p1", "payment.succeeded", 1), a.port);
    assert_eq!(paid.status, 201, "{}", paid.text());
    assert_eq!(paid.header("idemgate-order"), Some("applied"));
    // The same delivery through B: the stored answer.
    assert!(deliver(event("/hooks", "p1", "payment.succeeded", 1), b.port).replayed());
    // Another delivery of the event through B: already applied, never forwarded.
    let again = deliver(event("/hooks", "p1b", "payment.succeeded", 1), b.port);
    assert_eq!(again.status, 200, "{}", again.text());
    assert_eq!(again.header("idemgate-order"), Some("already-applied"));
    assert_eq!(hits(), 1);

    // Early through B, the event it waits for through A, then B's redelivery applies.
    let early = deliver(event("/hooks", "s2", "order.shipped", 2), b.port);
    assert_eq!(early.status, 409, "{}", early.text());
    assert_eq!(early.problem_code(), "order_event_early");
    let pay2 = deliver(event("/hooks", "p2", "payment.succeeded", 2), a.port);
    assert_eq!(pay2.header("idemgate-order"), Some("applied"));
    let shipped = deliver(event("/hooks", "s2", "order.shipped", 2), b.port);
    assert_eq!(shipped.status, 201, "{}", shipped.text());
    assert_eq!(shipped.header("idemgate-order"), Some("applied"));
    // And A sees B's transition: cancelling the shipped order is illegal there.
    let illegal = deliver(event("/hooks", "c2", "order.cancelled", 2), a.port);
    assert_eq!(illegal.header("idemgate-order"), Some("illegal"));
    assert_eq!(hits(), 3);
    // A remote settle is counted when the store's answer comes back, which may be after the
    // client had its answer: waited for (bounded), then checked exactly.
    let applied = || a.counter("order.applied") + b.counter("order.applied");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while applied() < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(applied(), 3);
}

mod a_resource_has_one_state_across_the_fleet {
    use super::Engine;

    #[test]
    #[ignore = "needs Envoy, the built filter and store, redis-server: make test-envoy"]
    fn redis() {
        super::a_resource_has_one_state_across_the_fleet(Engine::Redis);
    }

    #[test]
    #[ignore = "needs Envoy, the built filter and store, PostgreSQL: make test-envoy"]
    fn postgres() {
        super::a_resource_has_one_state_across_the_fleet(Engine::Postgres);
    }

    #[test]
    #[ignore = "needs Envoy, the built filter and store, redis-server, PostgreSQL: make test-envoy"]
    fn redis_postgres() {
        super::a_resource_has_one_state_across_the_fleet(Engine::RedisPostgres);
    }
}
