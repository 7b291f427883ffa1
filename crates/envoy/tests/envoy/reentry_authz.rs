//! Re-entry: the authorization and rate-limit filters after idemgate apply to a claimed request on
//! its re-entry exactly as to the same request without a key, and what they refuse never reached
//! the app: the key is released, not stored (a later allowed request with it executes once).

use crate::harness::{Envoy, Setup};
use crate::reentry::{alike, keyed, plain, FILTER};
use crate::upstream::{Seen, Upstream};
use std::time::{Duration, Instant};

/// A cluster `name` at `127.0.0.1:port` (a `Setup::clusters` item).
fn cluster(name: &str, port: u16) -> String {
    format!(
        r#"- name: {name}
  connect_timeout: 1s
  type: STATIC
  load_assignment:
    cluster_name: {name}
    endpoints:
    - lb_endpoints:
      - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {port} }} }} }}
"#
    )
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn an_rbac_deny_answers_a_claimed_request_and_releases_its_key() {
    let upstream = Upstream::start();
    let mut setup = Setup::new(FILTER, upstream.port);
    setup.after_filters = r#"- name: envoy.filters.http.rbac
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC
    rules:
      action: DENY
      policies:
        evil:
          permissions: [{ header: { name: x-evil, present_match: true } }]
          principals: [{ any: true }]
"#
    .into();
    let envoy = Envoy::start(&setup);
    let (_, with) = alike(
        &envoy,
        "RBAC deny",
        &plain("/orders").header("x-evil", "1"),
        &keyed("/orders", "evil").header("x-evil", "1"),
    );
    assert_eq!(with.status, 403, "{}", with.text());
    assert_eq!(
        upstream.total(),
        0,
        "a denied request never reaches the app"
    );
    assert_eq!(
        envoy.counter("stored"),
        0,
        "a denial is not the app's answer"
    );
    // Never reached: released. The same key on a request RBAC allows executes, once.
    let allowed = keyed("/orders", "evil");
    let first = allowed.send(envoy.port);
    assert_eq!(
        (first.status, first.replayed()),
        (201, false),
        "the released key executes: {}",
        first.text()
    );
    let again = allowed.send(envoy.port);
    assert_eq!((again.status, again.replayed()), (201, true));
    assert_eq!(upstream.hits("evil"), 1, "one execution");
}

/// A route whose own token bucket lets one request through every 2 s.
fn limited_route(prefix: &str) -> String {
    format!(
        r#"- match: {{ prefix: "{prefix}" }}
  route: {{ cluster: app }}
  typed_per_filter_config:
    envoy.filters.http.local_ratelimit:
      "@type": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit
      stat_prefix: limited
      token_bucket: {{ max_tokens: 1, tokens_per_fill: 1, fill_interval: 2s }}
      filter_enabled: {{ runtime_key: rl_enabled, default_value: {{ numerator: 100, denominator: HUNDRED }} }}
      filter_enforced: {{ runtime_key: rl_enforced, default_value: {{ numerator: 100, denominator: HUNDRED }} }}
"#
    )
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_local_rate_limit_answers_a_claimed_request_and_its_429_is_released() {
    let upstream = Upstream::start();
    // One bucket for the requests without a key, one for the claimed ones: each route's bucket
    // sees one kind only, whether or not the two passes share route objects.
    let routes = format!(
        "{}{}- match: {{ prefix: \"/\" }}\n  route: {{ cluster: app }}\n",
        limited_route("/limited/plain"),
        limited_route("/limited/keyed")
    );
    let mut setup = Setup::new(FILTER, upstream.port);
    setup.routes = Some(routes);
    setup.after_filters = r#"- name: envoy.filters.http.local_ratelimit
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit
    stat_prefix: local_rate_limit
"#
    .into();
    let envoy = Envoy::start(&setup);
    let (_, with) = alike(
        &envoy,
        "first in the bucket",
        &plain("/limited/plain"),
        &keyed("/limited/keyed", "rl-1"),
    );
    assert_eq!(with.status, 201, "{}", with.text());
    let limited = keyed("/limited/keyed", "rl-2");
    let (_, with) = alike(&envoy, "bucket empty", &plain("/limited/plain"), &limited);
    assert_eq!(with.status, 429, "{}", with.text());
    assert_eq!(
        upstream.hits("rl-2"),
        0,
        "a limited request never reaches the app"
    );
    // Released, not stored: once the bucket refills the same key executes, once.
    let deadline = Instant::now() + Duration::from_secs(8);
    let executed = loop {
        let answer = limited.send(envoy.port);
        assert!(
            !answer.replayed(),
            "a 429 is never stored: {}",
            answer.text()
        );
        if answer.status != 429 {
            break answer;
        }
        assert!(Instant::now() < deadline, "the bucket never refilled");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(executed.status, 201, "{}", executed.text());
    let again = limited.send(envoy.port);
    assert_eq!(
        (again.status, again.replayed()),
        (201, true),
        "{}",
        again.text()
    );
    assert_eq!(upstream.hits("rl-2"), 1, "one execution");
    assert_eq!(upstream.hits("rl-1"), 1);
}

/// The authorization service's decision: deny `/authz/deny…`, allow anything else and name the
/// user for the app.
fn authorize(request: &Seen) -> String {
    if request.path.starts_with("/authz/deny") {
        "status=403".into()
    } else {
        "status=200;header=x-authz-user:alice".into()
    }
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn ext_authz_decides_for_a_claimed_request() {
    let upstream = Upstream::start();
    let authz = Upstream::with_rule(authorize);
    let mut setup = Setup::new(FILTER, upstream.port);
    setup.clusters = cluster("authz", authz.port);
    setup.after_filters = r#"- name: envoy.filters.http.ext_authz
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz
    transport_api_version: V3
    failure_mode_allow: false
    http_service:
      server_uri: { uri: "http://authz", cluster: authz, timeout: 2s }
      authorization_response:
        allowed_upstream_headers:
          patterns: [{ exact: x-authz-user }]
"#
    .into();
    let envoy = Envoy::start(&setup);

    // Denied: never reaches the app; the key is released (the service decides again).
    let denied = keyed("/authz/deny/k", "deny");
    let (_, with) = alike(&envoy, "ext_authz deny", &plain("/authz/deny/p"), &denied);
    assert_eq!(with.status, 403, "{}", with.text());
    assert_eq!(authz.total(), 2, "the service decided for both");
    assert_eq!(
        upstream.total(),
        0,
        "a denied request never reaches the app"
    );
    let again = denied.send(envoy.port);
    assert_eq!(again.status, 403, "{}", again.text());
    assert!(!again.replayed(), "a denial is not stored");
    assert_eq!(authz.total(), 3, "asked again for the released key");

    // Allowed: the app sees the header the service added.
    let (_, with) = alike(
        &envoy,
        "ext_authz allow",
        &plain("/authz/ok/p"),
        &keyed("/authz/ok/k", "allow"),
    );
    assert_eq!(with.status, 201, "{}", with.text());
    for seen in [
        upstream.seen_on("/authz/ok/p"),
        upstream.seen_with_key("allow"),
    ] {
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(
            seen[0].header("x-authz-user"),
            Some("alice"),
            "{}: the header the authorization service added: {:?}",
            seen[0].path,
            seen[0].headers
        );
    }
    assert_eq!(upstream.total(), 2);
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn behind_a_trusted_proxy_the_inner_pass_sees_the_client_with_the_same_trusted_hops() {
    let upstream = Upstream::start();
    // One trusted proxy in front of Envoy: it appends the client's address to X-Forwarded-For.
    // RBAC after idemgate denies that client by its address.
    let deny = r#"- name: envoy.filters.http.rbac
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC
    rules:
      action: DENY
      policies:
        banned:
          permissions: [{ any: true }]
          principals: [{ remote_ip: { address_prefix: 203.0.113.7, prefix_len: 32 } }]
"#;
    let from_banned =
        |request: crate::client::Request| request.header("x-forwarded-for", "203.0.113.7");
    let start = |main: &str, both: &str| {
        let mut setup = Setup::new(FILTER, upstream.port);
        setup.after_filters = deny.into();
        setup.main_hcm_extra = main.into();
        setup.hcm_extra = both.into();
        Envoy::start(&setup)
    };

    // The deploy docs' setting: the re-entry listener trusts as many hops as the main one.
    let envoy = start("", "xff_num_trusted_hops: 1");
    let (without, with) = alike(
        &envoy,
        "banned client",
        &from_banned(plain("/orders")),
        &from_banned(keyed("/orders", "banned")),
    );
    assert_eq!((without.status, with.status), (403, 403), "{}", with.text());
    assert_eq!(upstream.total(), 0, "a banned client never reaches the app");
    drop(envoy);

    // Without it, the inner pass takes the last proxy's entry for the client: the claimed
    // request gets past the address rule the same request without a key meets.
    let envoy = start("xff_num_trusted_hops: 1", "");
    let without = from_banned(plain("/orders")).send(envoy.port);
    let with = from_banned(keyed("/orders", "banned-2")).send(envoy.port);
    assert_eq!(without.status, 403);
    assert_eq!(with.status, 201, "{}", with.text());
    assert_eq!(upstream.hits("banned-2"), 1);
}
