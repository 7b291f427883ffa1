//! `docs/semantics.md`, waiting: a duplicate of a request in flight (same scope, key and payload)
//! on a route that waits (`in_flight.wait`) gets the first's answer as a replay instead of 409 —
//! across Envoy's two workers (`--concurrency 2`), woken when the first's record is stored. Past
//! its bound, or when the first's outcome is in doubt, it gets the 409 it gets today; a waiting
//! client that goes away stops waiting. The same requests on a route that does not wait, and on
//! a path the filter does not guard, for comparison.

use crate::client::{read_response, Request, Response};
use crate::harness::{Envoy, Setup};
use crate::upstream::Upstream;
use std::time::{Duration, Instant};

const CONFIG: &str = r#"{
  "routes": [
    { "prefix": "/orders", "key": "required" },
    { "prefix": "/quick", "key": "required", "in_flight": { "wait": "0s" } }
  ],
  "in_flight": { "wait": "2s" },
  "lease": "10s"
}"#;

/// Sends `n` copies of `request` at once, each on its own connection (so Envoy spreads them
/// over its workers); every answer, with how long it took.
fn duplicates(request: &Request, port: u16, n: usize) -> Vec<(Response, Duration)> {
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let request = request.clone();
            std::thread::spawn(move || {
                let at = Instant::now();
                let answer = request.send(port);
                (answer, at.elapsed())
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

// conformance: D5
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn duplicates_in_flight_wait_for_the_first_answer_in_every_worker() {
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(CONFIG, upstream.port));
    let port = envoy.port;

    let first = Request::post("/orders", "w-1").script("delay=1000");
    let mut stream = first.open(port);
    first.write(&mut stream);
    upstream.wait_hits("w-1", 1);
    let answers = duplicates(&Request::post("/orders", "w-1"), port, 6);
    let first = read_response(stream).expect("the first's answer");
    assert_eq!(first.status, 201, "{}", first.text());
    assert!(!first.replayed());
    for (answer, took) in &answers {
        assert_eq!(answer.status, 201, "{}", answer.text());
        assert!(answer.replayed(), "the first's answer, replayed");
        assert_eq!(answer.body, first.body, "the same body");
        // Woken when the first's answer was stored (its 1 s), not on a tick nor at the 2 s bound.
        assert!(*took < Duration::from_millis(1500), "took {took:?}");
    }
    assert_eq!(upstream.hits("w-1"), 1, "run once");
    assert_eq!(envoy.counter("conflict"), 0, "no 409 in between");
    assert_eq!(envoy.counter("replayed"), 6);
    assert_eq!(envoy.counter("waited"), 6, "every duplicate parked");
    assert_eq!(envoy.counter("wait_expired"), 0);
    assert!(
        !envoy.log_text().contains("no shared queue"),
        "every worker registered its queue"
    );

    // The same on a route that does not wait: 409 at once, as before.
    let slow = Request::post("/quick", "q-1").script("delay=1000");
    let mut stream = slow.open(port);
    slow.write(&mut stream);
    upstream.wait_hits("q-1", 1);
    let at = Instant::now();
    let conflict = Request::post("/quick", "q-1").send(port);
    assert_eq!(conflict.status, 409);
    assert_eq!(conflict.problem_code(), "request_in_flight");
    assert!(at.elapsed() < Duration::from_millis(900), "not held");
    assert_eq!(read_response(stream).unwrap().status, 201);

    // And where the filter does not guard: both go to the upstream.
    let plain = Request::post("/plain", "p-1").script("delay=500");
    let mut stream = plain.open(port);
    plain.write(&mut stream);
    upstream.wait_hits("p-1", 1);
    let second = Request::post("/plain", "p-1").send(port);
    assert!(!second.replayed());
    assert_eq!(read_response(stream).unwrap().status, 201);
    assert_eq!(upstream.hits("p-1"), 2, "unguarded: run twice");
}

// conformance: D5
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn past_the_bound_or_with_the_first_in_doubt_a_duplicate_gets_409() {
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(CONFIG, upstream.port));
    let port = envoy.port;

    // The first takes longer than the 2 s bound.
    let slow = Request::post("/orders", "b-1").script("delay=5000");
    let mut stream = slow.open(port);
    slow.write(&mut stream);
    upstream.wait_hits("b-1", 1);
    let at = Instant::now();
    let conflict = Request::post("/orders", "b-1").send(port);
    let took = at.elapsed();
    assert_eq!(conflict.status, 409, "{}", conflict.text());
    assert_eq!(conflict.problem_code(), "request_in_flight");
    let retry_after: u64 = conflict
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("retry-after");
    assert!((1..=10).contains(&retry_after), "retry-after {retry_after}");
    // Held for its bound (enforced on the 1 s tick), then answered.
    assert!(took >= Duration::from_millis(1900), "took {took:?}");
    assert!(took < Duration::from_millis(4500), "took {took:?}");
    // Another payload is 422 at once, as ever.
    let mismatch = Request::post("/orders", "b-1")
        .json("{\"sku\":\"C3\"}")
        .send(port);
    assert_eq!(mismatch.status, 422);
    assert_eq!(read_response(stream).unwrap().status, 201);
    assert_eq!(upstream.hits("b-1"), 1);

    // The first's client goes away: its outcome is in doubt (kept in flight), so a duplicate
    // waits for nothing that will come and gets 409 at its bound.
    let gone = Request::post("/orders", "d-1").script("delay=1500");
    let mut stream = gone.open(port);
    gone.write(&mut stream);
    upstream.wait_hits("d-1", 1);
    drop(stream);
    let deadline = Instant::now() + Duration::from_secs(10);
    while envoy.counter("in_doubt.client_gone") < 1 {
        assert!(Instant::now() < deadline, "the client's going was not seen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let conflict = Request::post("/orders", "d-1").send(port);
    assert_eq!(conflict.status, 409, "{}", conflict.text());
    assert_eq!(upstream.hits("d-1"), 1);
    // Both 409s came at the end of a wait: parked, then its bound reached.
    assert_eq!(envoy.counter("waited"), 2);
    assert_eq!(envoy.counter("wait_expired"), 2);
    assert_eq!(envoy.counter("wait_full"), 0);
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_waiting_client_that_goes_away_stops_waiting() {
    let upstream = Upstream::start();
    let mut setup = Setup::new(CONFIG, upstream.port);
    setup.concurrency = 1; // one VM: the duplicates wait in one table
    let envoy = Envoy::start(&setup);
    let port = envoy.port;

    let first = Request::post("/orders", "g-1").script("delay=1500");
    let mut stream = first.open(port);
    first.write(&mut stream);
    upstream.wait_hits("g-1", 1);
    // Duplicates whose clients go away while they wait.
    for _ in 0..3 {
        let duplicate = Request::post("/orders", "g-1");
        let mut gone = duplicate.open(port);
        duplicate.write(&mut gone);
        std::thread::sleep(Duration::from_millis(100));
        drop(gone);
    }
    // One that stays gets the answer; the first's is unchanged.
    let stays = Request::post("/orders", "g-1").send(port);
    let first = read_response(stream).unwrap();
    assert_eq!(first.status, 201);
    assert!(
        stays.replayed() && stays.body == first.body,
        "{}",
        stays.text()
    );
    assert_eq!(upstream.hits("g-1"), 1);
    assert_eq!(envoy.counter("replayed"), 1, "nothing answered to the gone");
    assert_eq!(envoy.counter("conflict"), 0);
    // The VM goes on: a new key claims, and its duplicate waits again.
    let next = Request::post("/orders", "g-2").send(port);
    assert_eq!(next.status, 201);
    assert!(Request::post("/orders", "g-2").send(port).replayed());
}

/// A configuration reload while duplicates wait: the ones parked under the old configuration
/// still get the first's answer when it is stored, or their 409 at their bound — none is left
/// hanging because the filter it was parked in has been replaced.
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn duplicates_parked_across_a_configuration_reload_are_answered() {
    let upstream = Upstream::start();
    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let listen = free.local_addr().expect("addr").port();
    drop(free);
    let mut setup = Setup::new(CONFIG, upstream.port);
    setup.lds_port = Some(listen);
    let envoy = Envoy::start(&setup);
    let port = envoy.port;
    let updates = |envoy: &Envoy| {
        envoy
            .stat("listener_manager.lds.update_success")
            .unwrap_or(0)
    };
    let before = updates(&envoy);

    // "r-1" answers within the duplicates' 2 s; "r-2" only after it.
    let mut firsts = Vec::new();
    for (key, delay) in [("r-1", 1200), ("r-2", 3500)] {
        let first = Request::post("/orders", key).script(&format!("delay={delay}"));
        let mut stream = first.open(port);
        first.write(&mut stream);
        upstream.wait_hits(key, 1);
        firsts.push(stream);
    }
    let waiting: Vec<_> = ["r-1", "r-2"]
        .into_iter()
        .map(|key| {
            std::thread::spawn(move || {
                let at = Instant::now();
                (Request::post("/orders", key).send(port), at.elapsed())
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    while envoy.counter("waited") < 2 {
        assert!(
            Instant::now() < deadline,
            "the duplicates were never parked"
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    // The listener is replaced (another lease) while both wait.
    let mut next = Setup::new(&CONFIG.replace("\"10s\"", "\"12s\""), upstream.port);
    next.lds_port = Some(listen);
    envoy.reload_listener(&next);
    let deadline = Instant::now() + Duration::from_secs(10);
    while updates(&envoy) <= before {
        assert!(Instant::now() < deadline, "LDS never applied the new file");
        std::thread::sleep(Duration::from_millis(20));
    }

    let mut answers = waiting.into_iter().map(|t| t.join().unwrap());
    let (replay, took) = answers.next().unwrap();
    assert_eq!(replay.status, 201, "{}", replay.text());
    assert!(replay.replayed(), "r-1: the first's answer, replayed");
    assert!(took < Duration::from_millis(1900), "woken, took {took:?}");
    let (conflict, took) = answers.next().unwrap();
    assert_eq!(conflict.status, 409, "{}", conflict.text());
    assert_eq!(conflict.problem_code(), "request_in_flight");
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_millis(3400),
        "r-2: answered at its 2 s bound, took {took:?}"
    );
    for stream in firsts {
        assert_eq!(
            read_response(stream).expect("the first's answer").status,
            201
        );
    }
    assert_eq!((upstream.hits("r-1"), upstream.hits("r-2")), (1, 1));
}
