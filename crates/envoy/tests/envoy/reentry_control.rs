//! Re-entry: nothing makes a claimed request run twice on its way through Envoy: not a client's
//! `x-envoy-*` control headers (even where Envoy would honour them), not a route's retry policy
//! whose earlier attempt reached the app, not a thousand concurrent duplicates.

use crate::client::{burst, Response};
use crate::harness::{Envoy, Setup};
use crate::reentry::{alike, assert_in_flight, inner_passes, keyed, plain, setup, FILTER};
use crate::reset_once::ResetOnce;
use crate::upstream::Upstream;
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// Makes every loopback client internal to Envoy (Envoy takes a loopback peer for the machine's
/// own address, hence the second range), so it honours client-sent `x-envoy-*` headers.
const INTERNAL: &str = "internal_address_config:
  cidr_ranges:
  - { address_prefix: 127.0.0.0, prefix_len: 8 }
  - { address_prefix: 192.0.2.0, prefix_len: 24 }";

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn client_envoy_headers_never_steer_a_claimed_request() {
    let upstream = Upstream::start();
    let mut setup = Setup::new(FILTER, upstream.port);
    setup.hcm_extra = INTERNAL.into();
    let envoy = Envoy::start(&setup);
    let retried = |request: crate::client::Request| {
        request
            .script("status=503")
            .header("x-envoy-retry-on", "5xx")
            .header("x-envoy-max-retries", "3")
    };
    // The header is live: without a key, Envoy retries the app's 503 three times.
    let (_, with) = alike(
        &envoy,
        "x-envoy-retry-on",
        &retried(plain("/retry/plain")),
        &retried(keyed("/retry/keyed", "retry-on")),
    );
    assert_eq!(
        upstream.path_hits("/retry/plain"),
        4,
        "Envoy honours x-envoy-retry-on here (else this test proves nothing)"
    );
    assert_eq!(with.status, 503, "{}", with.text());
    assert_eq!(
        upstream.hits("retry-on"),
        1,
        "a client's x-envoy-retry-on must not run a claimed request again"
    );

    // x-envoy-upstream-rq-timeout-ms: live without a key, ignored for a claimed request.
    let timed = |request: crate::client::Request| {
        request
            .script("delay=1200")
            .header("x-envoy-upstream-rq-timeout-ms", "200")
    };
    let without = timed(plain("/timeout/plain")).send(envoy.port);
    assert_eq!(
        without.status,
        504,
        "Envoy honours x-envoy-upstream-rq-timeout-ms here: {}",
        without.text()
    );
    let with = timed(keyed("/timeout/keyed", "rq-timeout")).send(envoy.port);
    assert_eq!(
        (with.status, with.replayed()),
        (201, false),
        "a client's timeout header must not cut a claimed request short: {}",
        with.text()
    );
    assert_eq!(upstream.hits("rq-timeout"), 1);
}

/// A free port on 127.0.0.1 (nothing listens on it once this returns).
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_route_retry_after_an_attempt_that_reached_the_app_leaves_the_key_in_doubt() {
    let upstream = Upstream::start();
    let flaky = free_port();
    let retry = "retry_policy: { retry_on: \"reset,connect-failure\", num_retries: 2 }";
    let routes = format!(
        "- match: {{ prefix: \"/flaky\" }}\n  route: {{ cluster: flaky, {retry} }}\n\
         - match: {{ prefix: \"/\" }}\n  route: {{ cluster: app }}\n"
    );
    // `/flaky-router`: the same on the router path (the claim rides the client's stream).
    let filter = r#"{ "routes": [{ "prefix": "/flaky-router", "forward": "router" }, { "prefix": "/" }],
                      "upstream": { "reentry": "idemgate_reentry", "timeout": "5s" }, "lease": "30s" }"#;
    let mut setup = Setup::new(filter, upstream.port);
    setup.routes = Some(routes);
    setup.clusters = format!(
        "- name: flaky\n  connect_timeout: 1s\n  type: STATIC\n  load_assignment:\n    cluster_name: flaky\n    endpoints:\n    - lb_endpoints:\n      - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {flaky} }} }} }}\n"
    );
    let envoy = Envoy::start(&setup);
    // Each attempt sequence: the first reaches the app and is reset, the retries cannot connect.
    let once = |send: &dyn Fn() -> Response| {
        let app = ResetOnce::on(flaky);
        let answer = send();
        (answer, app.hits())
    };

    let (without, reached) = once(&|| plain("/flaky").send(envoy.port));
    assert_eq!(reached, 1, "the first attempt reached the app");
    assert_eq!(without.status, 503, "{}", without.text());
    for (path, key) in [("/flaky", "flaky"), ("/flaky-router", "flaky-router")] {
        let request = keyed(path, key);
        let (with, reached) = once(&|| request.send(envoy.port));
        assert_eq!(reached, 1, "{path}: the first attempt reached the app");
        assert!(
            with.status >= 500 && !with.replayed(),
            "{path}: {} {}",
            with.status,
            with.text()
        );
        // The app may have acted on the first attempt: not "never reached", whatever the last
        // attempt says. A retry of the key waits, it does not run again.
        let (retry, reached) = once(&|| request.send(envoy.port));
        assert_in_flight(&retry, path);
        assert_eq!(reached, 0, "{path}: the key ran a second time");
    }
    assert_eq!(
        inner_passes(&envoy),
        1,
        "only /flaky's claimed request re-entered"
    );
    assert_eq!(
        envoy.counter("released"),
        0,
        "an earlier attempt may have run"
    );
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_thousand_concurrent_duplicates_execute_once() {
    const THREADS: usize = 50;
    const PER_THREAD: usize = 20;
    let upstream = Upstream::start();
    let envoy = Envoy::start(&setup(
        &upstream,
        "- match: { prefix: \"/\" }\n  route: { cluster: app }\n",
    ));
    let port = envoy.port;
    let request = keyed("/orders", "thousand").script("delay=500");
    let started = Instant::now();
    let (answers, failures): (Vec<_>, Vec<_>) = burst(port, &request, THREADS, PER_THREAD)
        .into_iter()
        .partition(Result::is_ok);
    let failures: Vec<String> = failures.into_iter().filter_map(Result::err).collect();
    assert!(
        failures.is_empty(),
        "{} of {} requests got no answer, e.g. {:?}",
        failures.len(),
        THREADS * PER_THREAD,
        failures.first()
    );
    let answers: Vec<Response> = answers.into_iter().filter_map(Result::ok).collect();
    assert_eq!(answers.len(), THREADS * PER_THREAD);
    let executed = answers
        .iter()
        .filter(|r| r.status == 201 && !r.replayed())
        .count();
    let replays = answers.iter().filter(|r| r.replayed()).count();
    let conflicts = answers.iter().filter(|r| r.status == 409).count();
    let other: Vec<_> = answers
        .iter()
        .filter(|r| r.status != 201 && r.status != 409)
        .map(|r| (r.status, r.text()))
        .take(3)
        .collect();
    assert!(other.is_empty(), "unexpected answers: {other:?}");
    assert_eq!(
        executed, 1,
        "one relayed execution ({replays} replays, {conflicts} conflicts)"
    );
    assert_eq!(upstream.hits("thousand"), 1, "one upstream execution");
    assert_eq!(inner_passes(&envoy), 1, "one re-entry");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn an_app_sent_reentry_mark_does_not_fool_the_filter() {
    let upstream = Upstream::start();
    // The app answers 201 with the mark of a reply Envoy made itself: read, it would release the
    // key, and a retry would run the app a second time.
    let forged = |key: &str| keyed("/orders", key).script("raw=reentry-mark");

    // The shipped marker overwrites the app's value: the answer is the app's, stored and replayed.
    let envoy = Envoy::start(&Setup::new(FILTER, upstream.port));
    let first = forged("mark-overwritten").send(envoy.port);
    assert_eq!(
        (first.status, first.replayed()),
        (201, false),
        "{}",
        first.text()
    );
    let retry = forged("mark-overwritten").send(envoy.port);
    assert_eq!(
        (retry.status, retry.replayed()),
        (201, true),
        "{}",
        retry.text()
    );
    assert_eq!(upstream.hits("mark-overwritten"), 1);
    drop(envoy);

    // A marker that appends (header_mutation's default): the app's value comes first, the inner
    // chain's second. Two marks are in doubt: the retry waits for the lease, it never runs again.
    let mut setup = Setup::new(FILTER, upstream.port);
    setup.reentry_marker_action = "APPEND_IF_EXISTS_OR_ADD";
    let envoy = Envoy::start(&setup);
    let first = forged("mark-appended").send(envoy.port);
    assert!(!first.replayed(), "{} {}", first.status, first.text());
    let retry = forged("mark-appended").send(envoy.port);
    assert_in_flight(&retry, "an app-sent mark");
    assert_eq!(
        upstream.hits("mark-appended"),
        1,
        "the app's mark released the key: the retry ran the app again"
    );
}
