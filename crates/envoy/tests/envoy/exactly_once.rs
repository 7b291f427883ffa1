//! `docs/semantics.md` §4: of N concurrent requests with one key, across every Envoy worker,
//! exactly one reaches the upstream. 1000 requests per key are in flight at once (open connections,
//! then all written together behind a barrier), repeated over several fresh keys.

use crate::client::{read_response, Request, Response};
use crate::harness::{Envoy, Setup};
use crate::upstream::Upstream;
use std::net::TcpStream;
use std::sync::{Arc, Barrier};
use std::thread;

const CONCURRENCY: usize = 1000;
const THREADS: usize = 20;
const ROUNDS: usize = 8;

/// Sends `concurrency` copies of `request` at once from `threads` threads; returns every answer.
fn burst(request: &Request, port: u16, concurrency: usize, threads: usize) -> Vec<Response> {
    let barrier = Arc::new(Barrier::new(threads));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let request = request.clone();
            let barrier = barrier.clone();
            thread::spawn(move || {
                let mut streams: Vec<TcpStream> = (0..concurrency / threads)
                    .map(|_| request.open(port))
                    .collect();
                barrier.wait();
                for stream in &mut streams {
                    request.write(stream);
                }
                streams
                    .into_iter()
                    .map(|s| read_response(s).expect("an answer for every request"))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let answers: Vec<_> = workers
        .into_iter()
        .flat_map(|w| w.join().expect("worker"))
        .collect();
    assert_eq!(answers.len(), concurrency);
    answers
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_thousand_concurrent_duplicates_reach_the_upstream_once() {
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(
        r#"{ "routes": [{ "prefix": "/" }] }"#,
        upstream.port,
    ));
    let port = envoy.port;
    let mut report = Vec::new();
    for round in 0..ROUNDS {
        let key = format!("burst-{round}");
        // The first to win holds the key for 300 ms: the others arrive while it is in flight or
        // after it completed, and must get 409 or the replay.
        let answers = burst(
            &Request::post("/pay", &key).script("delay=300"),
            port,
            CONCURRENCY,
            THREADS,
        );
        let executed = answers
            .iter()
            .filter(|r| r.status == 201 && !r.replayed())
            .count();
        let replayed = answers.iter().filter(|r| r.replayed()).count();
        let conflicts = answers.iter().filter(|r| r.status == 409).count();
        let other: Vec<_> = answers
            .iter()
            .filter(|r| !(r.status == 201 || r.status == 409))
            .map(|r| (r.status, r.text()))
            .take(3)
            .collect();
        assert!(other.is_empty(), "unexpected answers: {other:?}");
        let calls = upstream.hits(&key);
        assert_eq!(
            calls, 1,
            "round {round}: the upstream executed the key more than once"
        );
        assert_eq!(executed, 1, "round {round}");
        assert_eq!(executed + replayed + conflicts, CONCURRENCY);
        report.push(format!(
            "round {round}: {executed} executed ({calls} upstream call(s)), {conflicts} x 409, {replayed} replayed"
        ));
    }
    assert_eq!(envoy.counter("claimed"), ROUNDS as u64);
    eprintln!(
        "exactly-once: {ROUNDS} rounds x {CONCURRENCY} concurrent requests\n{}",
        report.join("\n")
    );
}

/// The race that matters most is the *creation* of a store cell (the first claim in it), where
/// Envoy's shared data has no insert-if-absent: many rounds, each a fresh key in a fresh cell,
/// each a burst of duplicates released together across both workers.
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn fresh_cells_are_created_exactly_once() {
    const KEYS: usize = 300;
    const DUPLICATES: usize = 50;
    let upstream = Upstream::start();
    // Many cells, so that every fresh key lands in a cell nobody created yet; small answers, and
    // a `max_memory` whose thinnest slice (a fill shard of 64 records) holds one of them.
    let config = r#"{ "routes": [{ "prefix": "/" }], "capacity": 1000000, "records_per_cell": 1,
                      "max_response_body": "1KiB", "max_memory": "1GiB" }"#;
    let envoy = Envoy::start(&Setup::new(config, upstream.port));
    let mut twice = Vec::new();
    for round in 0..KEYS {
        let key = format!("fresh-{round}");
        let answers = burst(&Request::post("/pay", &key), envoy.port, DUPLICATES, 10);
        assert!(answers.iter().all(|r| r.status == 201 || r.status == 409));
        if upstream.hits(&key) != 1 {
            twice.push((key.clone(), upstream.hits(&key)));
        }
    }
    assert!(twice.is_empty(), "keys executed more than once: {twice:?}");
    assert_eq!(envoy.counter("claimed"), KEYS as u64);
    eprintln!("exactly-once: {KEYS} fresh cells x {DUPLICATES} concurrent duplicates, upstream calls per key = 1");
}
