//! The fleet through failures: an Envoy restarted, the engine crashed, the store not answering or
//! down, a client gone before its claim was won, a finish that got no answer.

use super::backend::{Backend, Engine, Store};
use super::envoys::{config, envoy, replay, retry_once_released};
use super::redis::signal;
use crate::client::Request;
use crate::harness::Envoy;
use crate::upstream::Upstream;
use std::thread;
use std::time::{Duration, Instant};

fn an_envoy_restarted_between_a_request_and_its_retry_replays(engine: Engine) {
    let backend = Backend::start(engine);
    let store = Store::start(&backend);
    let upstream = Upstream::start();
    let filter = config("");
    let (first_envoy, setup) = envoy(&filter, &upstream, &store);
    let first = Request::post("/pay", "restart-1").send(first_envoy.port);
    assert_eq!(
        (first.status, first.replayed()),
        (201, false),
        "{}",
        first.text()
    );
    // The finish is sent once the client has its answer: let it land before the kill (a finish
    // lost with its Envoy leaves the key in flight until the lease ends; docs/deploy/fleet-store.md says so).
    let deadline = Instant::now() + Duration::from_secs(5);
    while first_envoy.counter("stored") < 1 {
        assert!(Instant::now() < deadline, "the finish never landed");
        thread::sleep(Duration::from_millis(10));
    }
    drop(first_envoy); // killed by PID: its shared data is gone with it
    let restarted = Envoy::start(&setup);
    let retry = replay(&Request::post("/pay", "restart-1"), restarted.port);
    assert!(retry.replayed(), "{}", retry.text());
    assert_eq!((retry.status, &retry.body), (first.status, &first.body));
    assert_eq!(upstream.hits("restart-1"), 1);
}
on_every_engine!(an_envoy_restarted_between_a_request_and_its_retry_replays);

fn records_survive_a_crash_of_the_backend(engine: Engine) {
    // Redis alone keeps a record across its crash only in its AOF. In front of PostgreSQL,
    // Redis has none: it loses every key, and PostgreSQL (WAL replay) still has the record.
    let mut backend = match engine {
        Engine::Redis => {
            Backend::start_with(engine, &["--appendonly", "yes", "--appendfsync", "always"])
        }
        _ => Backend::start(engine),
    };
    let store = Store::start(&backend);
    let upstream = Upstream::start();
    let filter = config("");
    let (a, _) = envoy(&filter, &upstream, &store);
    let (b, _) = envoy(&filter, &upstream, &store);
    let first = Request::post("/pay", "aof-1").send(a.port);
    assert_eq!(
        (first.status, first.replayed()),
        (201, false),
        "{}",
        first.text()
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while a.counter("stored") < 1 {
        assert!(Instant::now() < deadline, "the finish never landed");
        thread::sleep(Duration::from_millis(10));
    }
    backend.crash_and_restart();
    // The service reconnects by itself; until then the answer is 503, never a second run.
    let deadline = Instant::now() + Duration::from_secs(20);
    let retry = loop {
        let answer = Request::post("/pay", "aof-1").send(b.port);
        if answer.status != 503 || Instant::now() > deadline {
            break answer;
        }
        thread::sleep(Duration::from_millis(100));
    };
    assert!(retry.replayed(), "{} {}", retry.status, retry.text());
    assert_eq!((retry.status, &retry.body), (first.status, &first.body));
    assert_eq!(upstream.hits("aof-1"), 1);
}
on_every_engine!(records_survive_a_crash_of_the_backend);

fn a_store_that_stops_answering_gives_the_failure_mode_then_recovers(engine: Engine) {
    let backend = Backend::start(engine);
    let mut store = Store::start(&backend);
    let upstream = Upstream::start();
    // A short lease: a claim that landed unseen during the outage is taken over after it.
    let filter = config(r#", "lease": "3s""#);
    let (a, _) = envoy(&filter, &upstream, &store);
    let (b, _) = envoy(&filter, &upstream, &store);
    let ok = Request::post("/pay", "before").send(a.port);
    assert_eq!(ok.status, 201, "{}", ok.text());

    // The backend frozen: the service times out (300 ms), the filter answers 503 + Retry-After.
    backend.freeze();
    for (i, port) in [a.port, b.port].into_iter().enumerate() {
        let key = format!("frozen-{i}");
        let answer = Request::post("/pay", &key).send(port);
        assert_eq!(answer.status, 503, "{}", answer.text());
        assert!(answer.header("retry-after").is_some());
        assert_eq!(upstream.hits(&key), 0);
    }
    backend.thaw();

    // The service killed while a claim waits on a frozen backend: no answer → 503.
    backend.freeze();
    let pending = {
        let port = a.port;
        thread::spawn(move || Request::post("/pay", "killed-mid-claim").send(port))
    };
    thread::sleep(Duration::from_millis(100));
    signal(store.pid(), "-KILL");
    let answer = pending.join().expect("client");
    assert_eq!(answer.status, 503, "{}", answer.text());
    store.kill();
    backend.thaw();
    // With the service down altogether: 503 too, never an unprotected forward.
    let down = Request::post("/pay", "service-down").send(b.port);
    assert_eq!(down.status, 503, "{}", down.text());
    store.spawn();

    // Recovery: every key runs exactly once. A claim that landed unseen holds its key until its
    // lease ends (409), then a retry takes it over.
    for key in [
        "frozen-0",
        "frozen-1",
        "killed-mid-claim",
        "service-down",
        "after",
    ] {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut port_index = 0;
        let answer = loop {
            let port = [a.port, b.port][port_index % 2];
            port_index += 1;
            let answer = Request::post("/pay", key).send(port);
            if answer.status != 409 && answer.status != 503 {
                break answer;
            }
            assert!(Instant::now() < deadline, "{key}: still {}", answer.status);
            thread::sleep(Duration::from_millis(200));
        };
        assert_eq!(answer.status, 201, "{key}: {}", answer.text());
        assert_eq!(upstream.hits(key), 1, "{key}");
        let replay = replay(
            &Request::post("/pay", key),
            [b.port, a.port][port_index % 2],
        );
        assert!(replay.replayed(), "{key}: {}", replay.text());
    }
    assert!(a.counter("store_error") + b.counter("store_error") >= 4);
}
on_every_engine!(a_store_that_stops_answering_gives_the_failure_mode_then_recovers);

fn pass_through_forwards_unprotected_while_the_store_is_down(engine: Engine) {
    let backend = Backend::start(engine);
    let mut store = Store::start(&backend);
    let upstream = Upstream::start();
    let filter = config(r#", "on_store_error": "pass_through""#);
    let (a, _) = envoy(&filter, &upstream, &store);
    store.kill();
    // Unsafe by design (docs/deploy/fleet-store.md says so): every attempt runs, none is recorded.
    for _ in 0..2 {
        let answer = Request::post("/pay", "unprotected").send(a.port);
        assert_eq!(
            (answer.status, answer.replayed()),
            (201, false),
            "{}",
            answer.text()
        );
    }
    assert_eq!(upstream.hits("unprotected"), 2);
    assert_eq!(a.counter("passthrough"), 2);
    assert_eq!(a.counter("store_error"), 2);
}
on_every_engine!(pass_through_forwards_unprotected_while_the_store_is_down);

fn a_claim_won_for_a_client_that_left_is_released(engine: Engine) {
    let backend = Backend::start(engine);
    // With the default 300 ms, a loaded machine could time the claim out inside the service
    // before the backend resumes: then no claim lands and there is nothing to release. The
    // filter waits for the service longer still (10 s against 5 s), so the claim's answer always
    // reaches it.
    let store = Store::start_with(backend.args(), "5s");
    let upstream = Upstream::start();
    // The service waits on the backend longer than the client: the claim lands after the client left.
    let filter = config("").replace(r#""timeout": "2s""#, r#""timeout": "10s""#);
    assert!(filter.contains(r#""timeout": "10s""#), "{filter}");
    let (a, _) = envoy(&filter, &upstream, &store);
    backend.freeze();
    let request = Request::post("/pay", "left-early");
    let mut stream = request.open(a.port);
    request.write(&mut stream);
    thread::sleep(Duration::from_millis(100));
    drop(stream); // the client gives up while its claim waits on the store
    thread::sleep(Duration::from_millis(100));
    backend.thaw();
    // The claim lands now and the root context releases it (the request was never sent). On a
    // loaded machine Envoy may read the first request late; a retry sent before its claim would
    // win the key itself and leave the first claim nothing to release: wait for the release
    // (bounded) before retrying.
    // Released, a retry runs at once instead of waiting 409s for the lease.
    let retry = retry_once_released(&a, &request);
    assert_eq!(
        (retry.status, retry.replayed()),
        (201, false),
        "{}",
        retry.text()
    );
    assert_eq!(upstream.hits("left-early"), 1);
    // The claim did land for the client that left, and was released (not merely never made).
    assert_eq!(
        a.counter("released"),
        1,
        "claimed {}, conflicts {}, store errors {}",
        a.counter("claimed"),
        a.counter("conflict"),
        a.counter("store_error")
    );
}
on_every_engine!(a_claim_won_for_a_client_that_left_is_released);

fn a_finish_that_gets_no_answer_is_sent_again_and_lands(engine: Engine) {
    let backend = Backend::start(engine);
    let store = Store::start(&backend);
    let upstream = Upstream::start();
    let filter = config("");
    let (a, _) = envoy(&filter, &upstream, &store);
    let (b, _) = envoy(&filter, &upstream, &store);
    let port = a.port;
    let client = thread::spawn(move || {
        Request::post("/pay", "resent")
            .script("delay=1000")
            .send(port)
    });
    // The backend freezes while the upstream works: the first finish times out in the service
    // (300 ms, a 503), and a resend lands once the backend is back.
    thread::sleep(Duration::from_millis(500));
    backend.freeze();
    thread::sleep(Duration::from_millis(1000));
    backend.thaw();
    let first = client.join().expect("client");
    assert_eq!(
        (first.status, first.replayed()),
        (201, false),
        "{}",
        first.text()
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while a.counter("stored") < 1 {
        assert!(Instant::now() < deadline, "no finish landed");
        thread::sleep(Duration::from_millis(20));
    }
    assert!(a.counter("store_error") >= 1, "the first finish failed");
    let retry = replay(&Request::post("/pay", "resent"), b.port);
    assert!(retry.replayed(), "{}", retry.text());
    assert_eq!(retry.body, first.body);
    assert_eq!(upstream.hits("resent"), 1);
}
on_every_engine!(a_finish_that_gets_no_answer_is_sent_again_and_lands);
