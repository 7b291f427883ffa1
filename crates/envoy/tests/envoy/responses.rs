//! `docs/semantics.md` §5: what the response does to the record — stored, released, or kept in
//! flight — and that only the upstream's own answers are ever stored.

use crate::client::{read_response, Request};
use crate::harness::{Envoy, Setup};
use crate::upstream::Upstream;
use std::net::TcpListener;
use std::time::{Duration, Instant};

// conformance: D4, S2
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn upstream_answers_are_stored_or_released() {
    let upstream = Upstream::start();
    let config = r#"{ "routes": [{ "prefix": "/" }], "max_response_body": "8KiB" }"#;
    let envoy = Envoy::start(&Setup::new(config, upstream.port));
    let port = envoy.port;

    // A 2xx is stored with allow-listed headers only.
    let created = Request::post("/a", "ok")
        .script("header=set-cookie:session=1;header=etag:\"v1\"")
        .send(port);
    assert_eq!(created.status, 201);
    assert!(
        created.has_header("set-cookie"),
        "the first answer is passed on untouched"
    );
    let replay = Request::post("/a", "ok").send(port);
    assert!(replay.replayed());
    assert_eq!(replay.header("etag"), Some("\"v1\""));
    assert_eq!(replay.header("location"), created.header("location"));
    assert!(!replay.has_header("set-cookie"), "never replay set-cookie");
    assert!(
        !replay.has_header("x-upstream-only"),
        "not on the allow-list"
    );

    // A 500 is the upstream's result: stored and replayed.
    assert_eq!(
        Request::post("/a", "boom")
            .script("status=500")
            .send(port)
            .status,
        500
    );
    let again = Request::post("/a", "boom").send(port);
    assert_eq!((again.status, again.replayed()), (500, true));
    assert_eq!(upstream.hits("boom"), 1);

    // 503 and 429 say "not done": released, the retry runs again.
    for status in [503, 429] {
        let key = format!("release-{status}");
        let first = Request::post("/a", &key)
            .script(&format!("status={status}"))
            .send(port);
        assert_eq!(first.status, status);
        let retry = Request::post("/a", &key).send(port);
        assert_eq!((retry.status, retry.replayed()), (201, false));
        assert_eq!(upstream.hits(&key), 2);
    }
    assert_eq!(envoy.counter("released"), 2);

    // A body within the limit is kept whole, however it was chunked.
    let kept = Request::post("/a", "kept").script("body=8000").send(port);
    let replay = Request::post("/a", "kept").send(port);
    assert!(replay.replayed());
    assert_eq!(replay.body, kept.body);
    assert_eq!(replay.body.len(), 8000);

    // A body over max_response_body: passed to the client whole, not kept; the replay says so
    // and still never reaches the upstream.
    let big = Request::post("/a", "big").script("body=20000").send(port);
    assert_eq!((big.status, big.body.len()), (201, 20000));
    let replay = Request::post("/a", "big").send(port);
    assert_eq!(replay.status, 201);
    assert!(replay.replayed());
    assert_eq!(replay.header("idempotent-body-omitted"), Some("true"));
    assert!(replay.body.is_empty());
    assert_eq!(upstream.hits("big"), 1);
    assert!(envoy.counter("stored") >= 3);
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_replay_without_the_body_carries_nothing_that_describes_it() {
    // A `max_response_body` of 64 KiB and a 200 KB JSON answer with an ETag.
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(
        r#"{ "routes": [{ "prefix": "/" }], "max_response_body": "64KiB" }"#,
        upstream.port,
    ));
    let port = envoy.port;
    let script =
        "body=200000;header=etag:\"v2\";header=last-modified:Fri, 04 Dec 2026 12:00:00 GMT";

    // Unguarded, the same request is the app's answer, whole.
    let plain = Request::new("POST", "/orders")
        .json("{\"sku\":\"A1\",\"qty\":1}")
        .script(script)
        .send(port);
    assert_eq!((plain.status, plain.body.len()), (201, 200_000));

    // Guarded, the first client gets the same bytes and headers.
    let first = Request::post("/orders", "big").script(script).send(port);
    assert_eq!((first.status, first.body.len()), (201, 200_000));
    assert_eq!(first.header("content-type"), Some("application/json"));
    assert_eq!(first.header("etag"), Some("\"v2\""));
    assert!(!first.replayed());

    // The retry: the outcome (status, Location), said to lack its body, and nothing that would
    // describe a representation it does not carry.
    let retry = Request::post("/orders", "big").script(script).send(port);
    assert_eq!(retry.status, 201);
    assert!(retry.replayed());
    assert_eq!(retry.header("idempotent-body-omitted"), Some("true"));
    assert_eq!(retry.header("location"), first.header("location"));
    assert!(retry.body.is_empty());
    for name in ["content-type", "content-encoding", "etag", "last-modified"] {
        assert!(!retry.has_header(name), "{name}: {:?}", retry.header(name));
    }
    assert_eq!(retry.header("content-length").unwrap_or("0"), "0");
    assert_eq!(upstream.hits("big"), 1);
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn requests_that_never_reached_the_upstream_are_released() {
    // A port with nothing listening yet: connections are refused.
    let reserved = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port_for_upstream = reserved.local_addr().expect("addr").port();
    drop(reserved);
    let mut setup = Setup::new(r#"{ "routes": [{ "prefix": "/" }] }"#, port_for_upstream);
    // A small buffer limit, so the buffer filter (after idemgate) answers 413 itself.
    setup.buffer_max = 1024;
    let envoy = Envoy::start(&setup);
    let port = envoy.port;

    // Connection refused → Envoy's own 503: never stored, released.
    let refused = Request::post("/r", "refused").send(port);
    assert_eq!(refused.status, 503);
    assert!(!refused.replayed());
    // No healthy upstream (a cluster without endpoints).
    for _ in 0..2 {
        let empty = Request::post("/empty", "empty").send(port);
        assert_eq!((empty.status, empty.replayed()), (503, false));
    }
    // A direct response of the route (the router's local reply): not the upstream's result.
    for _ in 0..2 {
        let direct = Request::post("/direct", "direct").send(port);
        assert_eq!(
            (direct.status, direct.text().as_str(), direct.replayed()),
            (200, "direct", false)
        );
    }
    // The buffer filter's own 413 (a later filter): never stored as the result.
    let body = format!("{{\"pad\":\"{}\"}}", "x".repeat(4000));
    for _ in 0..2 {
        let too_large = Request::post("/r", "buffer").json(&body).send(port);
        assert_eq!((too_large.status, too_large.replayed()), (413, false));
    }

    // Now the upstream comes up on that port: the released key runs for real.
    let upstream =
        Upstream::on(TcpListener::bind(("127.0.0.1", port_for_upstream)).expect("rebind"));
    let retry = Request::post("/r", "refused").send(port);
    assert_eq!(
        (retry.status, retry.replayed()),
        (201, false),
        "{}",
        retry.text()
    );
    assert_eq!(upstream.hits("refused"), 1);
    assert!(
        envoy.counter("released") >= 5,
        "released {}",
        envoy.counter("released")
    );
    assert_eq!(envoy.counter("in_doubt"), 0);
}

/// Retries until the lease of an in-doubt claim ends; every answer before that must be 409.
fn retry_until_taken_over(request: &Request, port: u16) -> crate::client::Response {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let response = request.send(port);
        if response.status != 409 {
            return response;
        }
        assert!(response.header("retry-after").is_some());
        assert!(Instant::now() < deadline, "the lease never ended");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn outcomes_in_doubt_keep_the_claim_until_the_lease_ends() {
    let upstream = Upstream::start();
    let mut setup = Setup::new(
        r#"{ "routes": [{ "prefix": "/" }], "lease": "3s" }"#,
        upstream.port,
    );
    setup.route_timeout = "1s";
    let envoy = Envoy::start(&setup);
    let port = envoy.port;

    // The upstream reads the request and closes without answering.
    let reset = Request::post("/d", "reset").script("reset").send(port);
    assert_eq!(reset.status, 503);
    // The upstream cuts its body off half way.
    let cut = Request::post("/d", "cut").script("cut;body=4000");
    let mut stream = cut.open(port);
    cut.write(&mut stream);
    assert!(
        read_response(stream).is_err(),
        "the client sees the body cut off"
    );
    // The route timeout fires while the upstream works.
    let timeout = Request::post("/d", "timeout")
        .script("delay=1500")
        .send(port);
    assert_eq!(timeout.status, 504);
    // The client goes away while the upstream works.
    let abort = Request::post("/d", "abort").script("delay=800");
    let stream = abort.open(port);
    let mut writer = stream.try_clone().expect("clone");
    abort.write(&mut writer);
    upstream.wait_hits("abort", 1);
    drop(writer);
    drop(stream);

    // Each retry during the lease is a 409 — never a second execution racing the first.
    for key in ["reset", "cut", "timeout", "abort"] {
        let retry = Request::post("/d", key).send(port);
        assert_eq!(retry.status, 409, "{key}: {}", retry.text());
        assert_eq!(retry.problem_code(), "request_in_flight");
        assert_eq!(upstream.hits(key), 1, "{key}");
    }
    // Still 409 after the aborted request's upstream work finished, within the lease.
    upstream.wait_finished(4);
    assert_eq!(Request::post("/d", "abort").send(port).status, 409);
    assert_eq!(upstream.hits("abort"), 1);
    assert_eq!(envoy.counter("in_doubt"), 4);
    assert_eq!(envoy.counter("released"), 0);

    // After the lease, a retry takes over (the backend's own constraints are the last defence).
    let taken = retry_until_taken_over(&Request::post("/d", "abort"), port);
    assert_eq!((taken.status, taken.replayed()), (201, false));
    assert_eq!(upstream.hits("abort"), 2);
    assert!(envoy.counter("taken_over") >= 1);
}
