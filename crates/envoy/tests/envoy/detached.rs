//! Detached execution: a claimed request's upstream exchange belongs to the key, not to the
//! client's connection. With `upstream.reentry` configured, guarded routes are detached: the filter
//! sends the claimed request itself (an HTTP call owned by the root context) back into Envoy
//! through the re-entry listener (see `harness`), and relays the answer.

use crate::client::{burst, read_response, Request, Response};
use crate::harness::{filter_wasm, validate, yaml, Envoy, Setup, TempDir};
use crate::upstream::Upstream;
use std::time::{Duration, Instant};

/// Detached on every route (through the re-entry listener), upstream timeout 5 s, lease 10 s.
const DETACHED: &str = r#"{ "routes": [{ "prefix": "/slow", "upstream_timeout": "1s" },
                                       { "prefix": "/empty" },
                                       { "prefix": "/" }],
                           "upstream": { "reentry": "idemgate_reentry", "timeout": "5s", "max_body": 2000 },
                           "lease": "10s" }"#;

/// Sends `request` and gives up (closes the connection) after `patience`, as a client timeout
/// does; returns whether an answer came before that.
fn send_and_give_up(request: &Request, port: u16, patience: Duration) -> bool {
    let mut stream = request.open(port);
    stream.set_read_timeout(Some(patience)).expect("timeout");
    request.write(&mut stream);
    read_response(&mut stream).is_ok()
}

/// Retries until the answer is not a 409 (bounded: 5 s), as a client honouring Retry-After would.
fn retry_past_conflicts(request: &Request, port: u16) -> Response {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let answer = request.send(port);
        if answer.status != 409 || Instant::now() > deadline {
            return answer;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_client_that_gives_up_still_gets_the_created_object_on_its_retry() {
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(DETACHED, upstream.port));
    let port = envoy.port;
    let order = Request::post("/orders", "gave-up").script("delay=2500");

    // The client times out at 1 s, the upstream answers at 2.5 s.
    assert!(!send_and_give_up(&order, port, Duration::from_secs(1)));
    // Its retry while the exchange runs: 409, not a second execution.
    let during = order.send(port);
    assert_eq!(during.status, 409, "{}", during.text());
    assert_eq!(during.problem_code(), "request_in_flight");
    assert!(during.has_header("retry-after"));
    // After it: the replay of what the upstream created, though nobody was there to receive it.
    upstream.wait_finished(1);
    let after = retry_past_conflicts(&order, port);
    assert_eq!(after.status, 201, "{}", after.text());
    assert!(after.replayed());
    assert_eq!(
        after.json()["seq"],
        1,
        "the object the first execution created"
    );
    assert_eq!(after.header("location"), Some("/orders/1"));
    assert_eq!(
        upstream.hits("gave-up"),
        1,
        "exactly one upstream execution"
    );
    assert_eq!(envoy.counter("detached_client_gone"), 1);
    assert_eq!(envoy.counter("stored"), 1);
    assert_eq!(envoy.counter("in_doubt"), 0);
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn the_upstream_answer_is_relayed_and_replayed() {
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(DETACHED, upstream.port));
    let port = envoy.port;
    let order = Request::post("/orders?src=test", "relayed")
        .header("x-request-id", "rid-1")
        .script("header=set-cookie:s=1");
    let first = order.send(port);
    assert_eq!(first.status, 201, "{}", first.text());
    assert!(!first.replayed());
    assert_eq!(first.json()["seq"], 1);
    // Relayed: every end-to-end header of the upstream's answer, cookies included.
    assert_eq!(first.header("location"), Some("/orders/1"));
    assert_eq!(first.header("x-upstream-only"), Some("yes"));
    assert_eq!(first.header("set-cookie"), Some("s=1"));
    assert_eq!(first.header("content-type"), Some("application/json"));
    for name in [
        "content-type",
        "content-length",
        "date",
        "server",
        "location",
    ] {
        let count = first
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .count();
        assert!(
            count <= 1,
            "{name} given {count} times: {:?}",
            first.headers
        );
    }
    assert!(
        !first.headers.iter().any(|(n, _)| n.starts_with("x-envoy-")),
        "{:?}",
        first.headers
    );
    // Method, path and query reached the upstream as sent.
    assert_eq!(upstream.path_hits("/orders?src=test"), 1);
    // Replayed: only the allow-listed headers.
    let again = order.send(port);
    assert_eq!((again.status, again.replayed()), (201, true));
    assert_eq!(again.json()["seq"], 1);
    assert!(!again.has_header("set-cookie"));
    assert!(!again.has_header("x-upstream-only"));
    assert_eq!(upstream.hits("relayed"), 1);
    // Requests without a key and unguarded methods take the router path, untouched.
    let plain = Request::new("POST", "/orders").json("{}").send(port);
    assert_eq!(plain.status, 201);
    let get = Request::new("GET", "/orders/1").send(port);
    assert_eq!(get.status, 201);
    assert_eq!(envoy.counter("detached"), 1);
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn exchanges_without_an_answer_keep_the_key_and_unsent_ones_release_it() {
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(DETACHED, upstream.port));
    let port = envoy.port;

    // The upstream timeout (1 s on /slow) fires: in doubt, the key stays in flight.
    let slow = Request::post("/slow", "timeout").script("delay=2000");
    let answer = slow.send(port);
    assert_eq!(answer.status, 504, "{}", answer.text());
    assert_eq!(answer.problem_code(), "upstream_no_answer");
    assert!(answer.has_header("retry-after"));
    assert_eq!(slow.send(port).status, 409);
    assert_eq!(envoy.counter("in_doubt.upstream_timeout"), 1);

    // The upstream closes without answering: in doubt as well.
    let reset = Request::post("/orders", "reset").script("reset");
    let answer = reset.send(port);
    assert_eq!(answer.status, 504, "{}", answer.text());
    assert_eq!(answer.problem_code(), "upstream_no_answer");
    assert_eq!(reset.send(port).status, 409);
    assert_eq!(upstream.hits("reset"), 1);
    assert_eq!(envoy.counter("in_doubt.upstream_reset"), 1);
    assert_eq!(envoy.counter("in_doubt"), 2);

    // A route to a cluster without endpoints: never sent, released, a retry is free to run. On
    // re-entry the client gets Envoy's own reply, as the same request without a key does.
    let empty = Request::post("/empty", "empty");
    let answer = empty.send(port);
    assert_eq!(
        (answer.status, answer.text().as_str()),
        (503, "no healthy upstream"),
        "Envoy's reply on the inner pass"
    );
    let again = empty.send(port);
    assert_eq!(again.status, 503, "{}", again.text());
    assert!(!again.replayed(), "a never-sent exchange is not stored");
    assert_eq!(envoy.counter("released"), 2);
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn an_answer_over_the_relay_limit_is_recorded_and_the_client_told() {
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(DETACHED, upstream.port));
    let port = envoy.port;
    let big = Request::post("/orders", "big").script("body=5000");
    let answer = big.send(port);
    // The app's own success, without the body and saying so — never a 5xx the edge made.
    assert_eq!(answer.status, 201, "{}", answer.text());
    assert_eq!(answer.header("idempotent-body-omitted"), Some("true"));
    assert_eq!(answer.header("location"), Some("/orders/1"));
    assert!(answer.body.is_empty());
    assert!(!answer.has_header("content-type"));
    // The outcome is recorded: the retry gets its status and headers, never a second execution.
    let again = big.send(port);
    assert_eq!((again.status, again.replayed()), (201, true));
    assert_eq!(again.header("idempotent-body-omitted"), Some("true"));
    assert_eq!(again.header("location"), Some("/orders/1"));
    assert_eq!(upstream.hits("big"), 1);
    assert_eq!(envoy.counter("relay_too_large"), 1);
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn an_upstream_timeout_not_shorter_than_the_lease_is_refused() {
    let dir = TempDir::new();
    let path = dir.0.join("envoy.yaml");
    let filter =
        r#"{ "upstream": { "reentry": "idemgate_reentry", "timeout": "60s" }, "lease": "60s" }"#;
    std::fs::write(&path, yaml(&Setup::new(filter, 9), &filter_wasm())).expect("write");
    let (ok, log) = validate(&path, &[]);
    assert!(!ok, "must be refused");
    assert!(log.contains("`upstream.timeout`"), "{log}");
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn concurrent_duplicates_reach_the_upstream_once_through_detached_exchanges() {
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(DETACHED, upstream.port));
    let port = envoy.port;
    const THREADS: usize = 10;
    const PER_THREAD: usize = 20;
    for round in 0..3 {
        let key = format!("burst-{round}");
        let request = Request::post("/orders", &key).script("delay=300");
        let answers: Vec<Response> = burst(port, &request, THREADS, PER_THREAD)
            .into_iter()
            .map(|answer| answer.expect("an answer"))
            .collect();
        let executed = answers
            .iter()
            .filter(|r| r.status == 201 && !r.replayed())
            .count();
        let other: Vec<_> = answers
            .iter()
            .filter(|r| r.status != 201 && r.status != 409)
            .map(|r| (r.status, r.text()))
            .take(3)
            .collect();
        assert!(other.is_empty(), "unexpected answers: {other:?}");
        assert_eq!(executed, 1, "round {round}: one relayed execution");
        assert_eq!(
            upstream.hits(&key),
            1,
            "round {round}: one upstream execution"
        );
    }
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_chunked_request_body_is_sent_whole_with_its_length() {
    use std::io::Write;
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(DETACHED, upstream.port));
    let send = || {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", envoy.port)).expect("connect");
        stream
            .write_all(
                b"POST /orders HTTP/1.1\r\nhost: test\r\nconnection: close\r\nidempotency-key: chunked\r\n\
                  content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n\
                  5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n",
            )
            .expect("write");
        read_response(stream).expect("an answer")
    };
    let first = send();
    assert_eq!(
        (first.status, first.replayed()),
        (201, false),
        "{}",
        first.text()
    );
    let again = send();
    assert_eq!(
        (again.status, again.replayed()),
        (201, true),
        "{}",
        again.text()
    );
    assert_eq!(upstream.hits("chunked"), 1);
    // The same payload with a declared length is the same request (same fingerprint).
    let same = Request::post("/orders", "chunked")
        .json("{\"a\":1}")
        .send(envoy.port);
    assert!(same.replayed(), "{} {}", same.status, same.text());
}
