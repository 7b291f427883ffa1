//! The fleet's Envoys on the remote store, and what the tests send through them: bursts of
//! duplicates, replays, retries once a claim is released.

use super::backend::STORE;
use super::backend::{Store, RECORD_SECRET};
use crate::client::{read_response, Request, Response};
use crate::harness::{Envoy, Setup};
use crate::upstream::Upstream;
use std::net::TcpStream;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

/// The filter configuration with the remote store, and `rest` (more top-level members).
pub(crate) fn config(rest: &str) -> String {
    format!(r#"{{ "routes": [{{ "prefix": "/" }}], {STORE}{rest} }}"#)
}

pub(crate) fn envoy(filter: &str, upstream: &Upstream, store: &Store) -> (Envoy, Setup) {
    envoy_with_env(filter, upstream, store, &[])
}

/// [`envoy`] with more variables in the VM's environment (a token secret).
pub(crate) fn envoy_with_env(
    filter: &str,
    upstream: &Upstream,
    store: &Store,
    env: &[(&str, &str)],
) -> (Envoy, Setup) {
    let mut setup = Setup::new(filter, upstream.port);
    setup.clusters = store.cluster();
    setup
        .vm_env
        .push(("IDEMGATE_RECORD_SECRET".into(), RECORD_SECRET.into()));
    setup
        .vm_env
        .extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    (Envoy::start(&setup), setup)
}

/// `concurrency` copies of `request` in flight at once, alternating between `ports`.
fn burst(request: &Request, ports: &[u16], concurrency: usize, threads: usize) -> Vec<Response> {
    let barrier = Arc::new(Barrier::new(threads));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let request = request.clone();
            let barrier = barrier.clone();
            let ports = ports.to_vec();
            thread::spawn(move || {
                let mut streams: Vec<TcpStream> = (0..concurrency / threads)
                    .map(|i| request.open(ports[(t + i) % ports.len()]))
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
    workers
        .into_iter()
        .flat_map(|w| w.join().expect("worker"))
        .collect()
}

/// A retry of a completed request. The finish is sent after the client got its answer (the
/// response is not held for it), so a retry sent at once may still find the key in flight (409):
/// it retries as a client would, for at most 5 s.
/// `concurrency` duplicates of `key` at once over every port of `ports`: only 201, 409 or 503
/// come back, exactly one reaches the upstream and is seen executed, and afterwards every Envoy
/// replays that answer byte for byte without another upstream call. Returns the burst's answers.
pub(crate) fn once_across_the_fleet(
    upstream: &Upstream,
    ports: &[u16],
    key: &str,
    concurrency: usize,
    threads: usize,
) -> Vec<Response> {
    let request = Request::post("/pay", key).script("delay=300");
    let answers = burst(&request, ports, concurrency, threads);
    assert_eq!(answers.len(), concurrency);
    let other: Vec<_> = answers
        .iter()
        .filter(|r| !matches!(r.status, 201 | 409 | 503))
        .map(|r| (r.status, r.text()))
        .take(3)
        .collect();
    assert!(other.is_empty(), "unexpected answers: {other:?}");
    // Never a silent duplicate: at most one execution, and it is the upstream's only call.
    upstream.wait_finished(upstream.total());
    assert_eq!(upstream.hits(key), 1, "key {key}: upstream calls");
    let executed: Vec<&Response> = answers
        .iter()
        .filter(|r| r.status == 201 && !r.replayed())
        .collect();
    assert_eq!(executed.len(), 1, "key {key}: executions the clients saw");
    // After completion, the retry through either Envoy is the same answer, byte for byte.
    let original = executed[0];
    for &port in ports {
        let again = replay(&request, port);
        assert!(again.replayed(), "{}", again.text());
        assert_eq!(again.status, original.status);
        assert_eq!(again.body, original.body);
    }
    assert_eq!(upstream.hits(key), 1);
    answers
}

pub(crate) fn replay(request: &Request, port: u16) -> Response {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let answer = request.send(port);
        if answer.status != 409 || Instant::now() > deadline {
            return answer;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// `request` sent again through `envoy` once it has released a claim (a bounded wait for its
/// `released` counter), and again while it answers 409 (bounded): a released key runs at once
/// instead of waiting out the lease, so what comes back says whether the claim was given back.
pub(crate) fn retry_once_released(envoy: &Envoy, request: &Request) -> Response {
    let deadline = Instant::now() + Duration::from_secs(10);
    while envoy.counter("released") == 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let answer = request.send(envoy.port);
        if answer.status != 409 || Instant::now() > deadline {
            return answer;
        }
        thread::sleep(Duration::from_millis(50));
    }
}
