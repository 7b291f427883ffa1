//! A duplicate of a request in flight behind the other Envoy of a fleet waits for the first's
//! answer (`in_flight.wait`): it asks the shared store again with a growing pause (50 ms doubled
//! up to 400 ms) and gets the first's answer as a replay; past its bound, 409 as before.

use super::backend::{Backend, Engine, Store};
use super::envoys::{config, envoy};
use crate::client::{read_response, Request, Response};
use crate::upstream::Upstream;
use std::thread;
use std::time::{Duration, Instant};

/// `request` sent to `port` in a thread: its answer and how long it took.
fn send(request: &Request, port: u16) -> thread::JoinHandle<(Response, Duration)> {
    let request = request.clone();
    thread::spawn(move || {
        let at = Instant::now();
        let answer = request.send(port);
        (answer, at.elapsed())
    })
}

// conformance: D5
fn a_duplicate_behind_the_other_envoy_waits_for_the_first_answer(engine: Engine) {
    let backend = Backend::start(engine);
    let store = Store::start(&backend);
    let upstream = Upstream::start();
    let filter = config(r#", "lease": "10s", "in_flight": { "wait": "3s" }"#);
    let (a, _) = envoy(&filter, &upstream, &store);
    let (b, _) = envoy(&filter, &upstream, &store);

    let first = Request::post("/orders", "fw-1").script("delay=1000");
    let mut stream = first.open(a.port);
    first.write(&mut stream);
    upstream.wait_hits("fw-1", 1);
    let duplicate = Request::post("/orders", "fw-1");
    let waiting = [
        send(&duplicate, b.port),
        send(&duplicate, b.port),
        send(&duplicate, a.port),
    ];
    let first = read_response(stream).expect("the first's answer");
    assert_eq!(first.status, 201, "{}", first.text());
    for waiter in waiting {
        let (answer, took) = waiter.join().unwrap();
        assert_eq!(answer.status, 201, "{}", answer.text());
        assert!(answer.replayed(), "the first's answer, replayed");
        assert_eq!(answer.body, first.body);
        // The first took 1 s; the pause between questions is at most 400 ms.
        assert!(took < Duration::from_millis(1800), "took {took:?}");
    }
    assert_eq!(upstream.hits("fw-1"), 1, "run once across the fleet");
    assert_eq!(a.counter("conflict") + b.counter("conflict"), 0);

    // The first outlasts the bound: the duplicate behind B gets 409 with Retry-After at 3 s.
    let slow = Request::post("/orders", "fw-2").script("delay=5000");
    let mut stream = slow.open(a.port);
    slow.write(&mut stream);
    upstream.wait_hits("fw-2", 1);
    let (conflict, took) = send(&Request::post("/orders", "fw-2"), b.port)
        .join()
        .unwrap();
    assert_eq!(conflict.status, 409, "{}", conflict.text());
    assert_eq!(conflict.problem_code(), "request_in_flight");
    assert!(conflict.header("retry-after").is_some());
    assert!(took >= Duration::from_millis(2900), "took {took:?}");
    assert!(took < Duration::from_millis(4500), "took {took:?}");
    assert_eq!(read_response(stream).unwrap().status, 201);
    assert_eq!(upstream.hits("fw-2"), 1);
}
on_every_engine!(a_duplicate_behind_the_other_envoy_waits_for_the_first_answer);
