//! Adding idemgate takes nothing away. A claimed request's detached exchange goes back
//! into Envoy through the re-entry listener (see `harness`), so the route configuration and the
//! filters after idemgate apply to it exactly as to the same request without a key. Each test
//! sends both and checks they were answered alike and that the app saw the same thing.
//! Authorization and rate limits: `reentry_authz`; client control headers, retry policies and
//! duplicates: `reentry_control`.

use crate::client::{read_response, Request, Response};
use crate::harness::{Envoy, Setup};
use crate::setup::REENTRY_MARKER;
use crate::upstream::Upstream;
use std::time::{Duration, Instant};

/// Detached on every route through the re-entry cluster; the lease outlives every test.
pub const FILTER: &str =
    r#"{ "upstream": { "reentry": "idemgate_reentry", "timeout": "5s" }, "lease": "30s" }"#;

/// The body every test request carries.
const BODY: &str = "{\"sku\":\"A1\",\"qty\":1}";

/// The request without a key.
pub fn plain(path: &str) -> Request {
    Request::new("POST", path).json(BODY)
}

/// The same request with a key: claimed, so detached.
pub fn keyed(path: &str, key: &str) -> Request {
    Request::post(path, key)
}

/// A test Envoy with these routes (YAML list items) and [`FILTER`].
pub fn setup(upstream: &Upstream, routes: &str) -> Setup {
    let mut setup = Setup::new(FILTER, upstream.port);
    setup.routes = Some(routes.into());
    setup
}

/// Requests the re-entry listener has received.
pub fn inner_passes(envoy: &Envoy) -> u64 {
    envoy
        .stat("http.idemgate_reentry.downstream_rq_total")
        .unwrap_or(0)
}

/// Sends `plain`, then `keyed`; checks the keyed one (and only it) came back in through the
/// re-entry listener and both got the same status. Returns both answers.
pub fn alike(envoy: &Envoy, what: &str, plain: &Request, keyed: &Request) -> (Response, Response) {
    let before = inner_passes(envoy);
    let without = plain.send(envoy.port);
    assert_eq!(
        inner_passes(envoy),
        before,
        "{what}: the request without a key went through the re-entry listener"
    );
    let with = keyed.send(envoy.port);
    assert_eq!(
        inner_passes(envoy),
        before + 1,
        "{what}: the claimed request did not come back in through the re-entry listener once"
    );
    assert_eq!(
        with.status,
        without.status,
        "{what}: the claimed request was answered {} {:?}, the same request without a key {} {:?}",
        with.status,
        with.text(),
        without.status,
        without.text()
    );
    (without, with)
}

/// Retries until the answer is not a 409 (bounded: 10 s), as a client honouring Retry-After.
pub fn retry_past_conflicts(request: &Request, port: u16) -> Response {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = request.send(port);
        if answer.status != 409 || Instant::now() > deadline {
            return answer;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The answer is the filter's 409 for a key whose outcome is not known yet.
pub fn assert_in_flight(answer: &Response, what: &str) {
    assert_eq!(
        answer.status,
        409,
        "{what}: a retry of a key in doubt must wait for the lease, got {} {}",
        answer.status,
        answer.text()
    );
    assert_eq!(answer.problem_code(), "request_in_flight", "{what}");
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn prefix_and_regex_rewrites_apply_to_a_claimed_request() {
    let upstream = Upstream::start();
    let routes = r#"- match: { prefix: "/orders" }
  route: { cluster: app, prefix_rewrite: "/v2/orders" }
- match: { safe_regex: { regex: "^/r/[0-9]+/items$" } }
  route:
    cluster: app
    regex_rewrite: { pattern: { regex: "^/r/([0-9]+)/items$" }, substitution: "/items/\\1" }
- match: { prefix: "/" }
  route: { cluster: app }
"#;
    let envoy = Envoy::start(&setup(&upstream, routes));
    let (without, with) = alike(
        &envoy,
        "prefix rewrite",
        &plain("/orders"),
        &keyed("/orders", "rw-prefix"),
    );
    assert_eq!((without.status, with.replayed()), (201, false));
    let (_, with) = alike(
        &envoy,
        "regex rewrite",
        &plain("/r/42/items"),
        &keyed("/r/42/items", "rw-regex"),
    );
    assert_eq!(with.status, 201);
    for (key, path) in [("rw-prefix", "/v2/orders"), ("rw-regex", "/items/42")] {
        let seen: Vec<String> = upstream
            .seen_with_key(key)
            .into_iter()
            .map(|s| s.path)
            .collect();
        assert_eq!(
            seen,
            [path],
            "the claimed request reached the app rewritten"
        );
        let plain = upstream.seen_on(path);
        assert!(
            plain.iter().any(|s| s.key().is_none()),
            "the request without a key reached the app as {path}"
        );
    }
    assert_eq!(
        upstream.path_hits("/orders"),
        0,
        "never the unrewritten path"
    );
    assert_eq!(
        upstream.path_hits("/r/42/items"),
        0,
        "never the unrewritten path"
    );
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn route_header_rules_apply_to_a_claimed_request() {
    let upstream = Upstream::start();
    let routes = r#"- match: { prefix: "/" }
  route: { cluster: app }
  request_headers_to_add:
  - header: { key: x-added-by-route, value: "yes" }
"#;
    let mut setup = setup(&upstream, routes);
    setup.route_config_extra = "request_headers_to_remove: [x-user-id]".into();
    let envoy = Envoy::start(&setup);
    let (_, with) = alike(
        &envoy,
        "route header rules",
        &plain("/plain").header("x-user-id", "admin"),
        &keyed("/keyed", "headers").header("x-user-id", "admin"),
    );
    assert_eq!(with.status, 201, "{}", with.text());
    for seen in [upstream.seen_on("/plain"), upstream.seen_on("/keyed")] {
        assert_eq!(seen.len(), 1, "one request reached the app: {seen:?}");
        let seen = &seen[0];
        assert_eq!(
            seen.header("x-user-id"),
            None,
            "{}: the route configuration removes x-user-id: {:?}",
            seen.path,
            seen.headers
        );
        assert_eq!(
            seen.header("x-added-by-route"),
            Some("yes"),
            "{}: the route adds its header (once): {:?}",
            seen.path,
            seen.headers
        );
        let added = seen
            .headers
            .iter()
            .filter(|(n, _)| n == "x-added-by-route")
            .count();
        assert_eq!(added, 1, "{}: added once: {:?}", seen.path, seen.headers);
    }
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_direct_response_answers_a_claimed_request_and_releases_its_key() {
    let upstream = Upstream::start();
    let routes = r#"- match: { prefix: "/internal/" }
  direct_response: { status: 404, body: { inline_string: "not here" } }
- match: { prefix: "/" }
  route: { cluster: app }
"#;
    let envoy = Envoy::start(&setup(&upstream, routes));
    let keyed = keyed("/internal/purge", "purge");
    let (without, with) = alike(&envoy, "direct response", &plain("/internal/purge"), &keyed);
    assert_eq!(with.status, 404, "{}", with.text());
    assert_eq!(with.text(), without.text(), "Envoy's own body");
    assert_eq!(upstream.total(), 0, "the app is never called");
    // Never reached an upstream: released, not stored.
    let again = keyed.send(envoy.port);
    assert_eq!(again.status, 404, "{}", again.text());
    assert!(
        !again.replayed(),
        "a direct response is not the app's answer: not stored"
    );
    assert_eq!(envoy.counter("stored"), 0);
    assert_eq!(envoy.counter("released"), 2);
    assert_eq!(upstream.total(), 0, "the app is never called");
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn weighted_clusters_pick_the_cluster_of_a_claimed_request() {
    let app = Upstream::start();
    let other = Upstream::start();
    let routes = r#"- match: { prefix: "/w" }
  route:
    weighted_clusters:
      clusters:
      - { name: app, weight: 0 }
      - { name: other, weight: 100 }
- match: { prefix: "/" }
  route: { cluster: app }
"#;
    let mut setup = setup(&app, routes);
    setup.clusters = format!(
        r#"- name: other
  connect_timeout: 1s
  type: STATIC
  load_assignment:
    cluster_name: other
    endpoints:
    - lb_endpoints:
      - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {} }} }} }}
"#,
        other.port
    );
    let envoy = Envoy::start(&setup);
    for round in 0..3 {
        let key = format!("weighted-{round}");
        let (_, with) = alike(
            &envoy,
            "weighted clusters",
            &plain("/w"),
            &keyed("/w", &key),
        );
        assert_eq!(with.status, 201, "{}", with.text());
        assert_eq!(other.hits(&key), 1, "the route's weighted choice served it");
    }
    assert_eq!(
        app.total(),
        0,
        "a cluster of weight 0 is never chosen, with or without a key"
    );
    assert_eq!(other.total(), 6);
    // The default route still reaches `app`: the cluster is the route's choice, not a fixed one.
    let (_, with) = alike(&envoy, "default route", &plain("/d"), &keyed("/d", "d"));
    assert_eq!((with.status, app.hits("d")), (201, 1));
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_route_timeout_answers_504_and_leaves_the_key_in_doubt() {
    let upstream = Upstream::start();
    let routes = r#"- match: { prefix: "/slow" }
  route: { cluster: app, timeout: 1s }
- match: { prefix: "/" }
  route: { cluster: app }
"#;
    let envoy = Envoy::start(&setup(&upstream, routes));
    let slow = keyed("/slow", "slow").script("delay=2000");
    let started = Instant::now();
    let (_, with) = alike(
        &envoy,
        "route timeout",
        &plain("/slow").script("delay=2000"),
        &slow,
    );
    assert_eq!(with.status, 504, "{}", with.text());
    assert!(
        started.elapsed() < Duration::from_millis(3500),
        "both answered at the route's 1 s timeout, not the app's 2 s"
    );
    // The app may have acted: a retry waits (409) while the lease holds, even after the app ends.
    assert_in_flight(&slow.send(envoy.port), "route timeout, app still running");
    upstream.wait_finished(2);
    assert_in_flight(&slow.send(envoy.port), "route timeout, app done");
    assert_eq!(upstream.hits("slow"), 1, "one execution");
    assert_eq!(envoy.counter("in_doubt"), 1);
    assert_eq!(
        envoy.counter("stored"),
        0,
        "a timeout is not the app's answer"
    );
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_client_that_goes_away_gets_the_replay_on_its_retry() {
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(FILTER, upstream.port));
    let port = envoy.port;
    let order = keyed("/orders", "gone").script("delay=2500");
    let mut stream = order.open(port);
    stream
        .set_read_timeout(Some(Duration::from_secs(1)))
        .expect("timeout");
    order.write(&mut stream);
    assert!(
        read_response(&mut stream).is_err(),
        "no answer within 1 s: the app takes 2.5 s"
    );
    drop(stream);
    assert_in_flight(&order.send(port), "while the exchange runs");
    upstream.wait_finished(1);
    let after = retry_past_conflicts(&order, port);
    assert_eq!(
        (after.status, after.replayed()),
        (201, true),
        "the stored answer: {}",
        after.text()
    );
    assert_eq!(after.json()["seq"], 1, "what the one execution created");
    assert_eq!(upstream.hits("gone"), 1, "one execution");
    assert_eq!(
        inner_passes(&envoy),
        1,
        "it ran through the re-entry listener"
    );
    assert_eq!(envoy.counter("detached_client_gone"), 1);
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn the_reentry_marker_is_never_relayed_and_its_absence_is_in_doubt() {
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(FILTER, upstream.port));
    // An app that sends the marker itself cannot pass for Envoy's reply: the inner pass
    // overwrites it, the answer is the app's and is stored.
    let forge = "header=x-idemgate-reentry:direct_response";
    let forged = keyed("/orders", "forged").script(forge);
    let (_, with) = alike(
        &envoy,
        "forged marker",
        &plain("/orders").script(forge),
        &forged,
    );
    assert_eq!(with.status, 201);
    assert!(!with.has_header(REENTRY_MARKER), "{:?}", with.headers);
    let again = forged.send(envoy.port);
    assert!(
        again.replayed(),
        "the app's answer is stored: {}",
        again.text()
    );
    assert!(!again.has_header(REENTRY_MARKER), "{:?}", again.headers);
    assert_eq!(upstream.hits("forged"), 1);

    // A re-entry listener without the marker filter: nothing tells the app's answer from Envoy's
    // replies, so the outcome is in doubt and Envoy's log says what is missing.
    let upstream = Upstream::start();
    let mut setup = Setup::new(FILTER, upstream.port);
    setup.reentry_marker = false;
    let envoy = Envoy::start(&setup);
    let order = keyed("/orders", "unmarked");
    let answer = order.send(envoy.port);
    assert_eq!(answer.status, 504, "{}", answer.text());
    assert_eq!(answer.problem_code(), "upstream_no_answer");
    assert_in_flight(&order.send(envoy.port), "unmarked answer");
    assert_eq!(upstream.hits("unmarked"), 1);
    assert_eq!(envoy.counter("stored"), 0);
    assert!(
        envoy.log_text().contains("header_mutation"),
        "Envoy's log names the missing marker filter:\n{}",
        envoy.log_text()
    );
}
