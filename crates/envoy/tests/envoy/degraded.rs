//! A degraded edge is visible (`docs/semantics.md` §5): a guarded request the store could not
//! decide for, let on unprotected by `pass_through`, reaches its client marked
//! `Idempotent-Degraded: <reason>` and counts `idemgate.degraded` (and by reason) apart from
//! `passthrough`, which also counts requests without a key. A replay, a request without a key and
//! the same request where the filter is off never carry the mark.

use crate::client::Request;
use crate::fleet::{RECORD_SECRET, STORE};
use crate::harness::{Envoy, Setup};
use crate::upstream::Upstream;
use std::net::TcpListener;

const DEGRADED: &str = "idempotent-degraded";

/// A request without a key (the routes' key is optional): passed through, never degraded.
fn without_key() -> Request {
    Request::new("POST", "/m").json("{\"sku\":\"A1\",\"qty\":1}")
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_full_store_passing_through_marks_the_answer_and_counts_it() {
    let upstream = Upstream::start();
    // One record in all: the second key finds its (only) cell full.
    let config = r#"{ "routes": [{ "prefix": "/" }], "capacity": 1, "records_per_cell": 1,
                      "shares": { "peer": "100%" }, "on_store_full": "pass_through" }"#;
    let envoy = Envoy::start(&Setup::new(config, upstream.port));

    let kept = Request::post("/m", "kept").send(envoy.port);
    assert_eq!((kept.status, kept.header(DEGRADED)), (201, None));

    // The upstream's own word for the header is replaced by the edge's.
    let over = Request::post("/m", "over")
        .script("header=idempotent-degraded:forged")
        .send(envoy.port);
    assert_eq!(over.status, 201, "{}", over.text());
    assert_eq!(over.header(DEGRADED), Some("store_full"));
    assert!(!over.replayed());
    assert_eq!(upstream.hits("over"), 1);
    assert_eq!(envoy.counter("store_full"), 1);
    assert_eq!(envoy.counter("degraded"), 1);
    assert_eq!(envoy.counter("degraded.store_full"), 1);
    assert_eq!(envoy.counter("degraded.store_unavailable"), 0);
    assert_eq!(envoy.counter("passthrough"), 1);

    // A replay is never degraded.
    let replay = Request::post("/m", "kept").send(envoy.port);
    assert!(replay.replayed(), "{}", replay.text());
    assert_eq!(replay.header(DEGRADED), None);
    assert_eq!(upstream.hits("kept"), 1);

    // No key: passed through (counted), but nobody asked for protection: not degraded.
    let bare = without_key().send(envoy.port);
    assert_eq!((bare.status, bare.header(DEGRADED)), (201, None));
    assert_eq!(envoy.counter("passthrough"), 2);
    assert_eq!(envoy.counter("degraded"), 1);

    // The same request where the filter is off: the upstream's answer as it is.
    let off = Request::post("/unguarded/m", "over").send(envoy.port);
    assert_eq!((off.status, off.header(DEGRADED)), (201, None));
    assert_eq!(envoy.counter("degraded"), 1);
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_store_nobody_answers_passing_through_marks_the_answer_store_unavailable() {
    let upstream = Upstream::start();
    // The remote store's cluster points at a port nothing listens on.
    let dead = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let dead_port = dead.local_addr().expect("its address").port();
    drop(dead);
    let config = format!(
        r#"{{ "routes": [{{ "prefix": "/" }}], {STORE}, "on_store_error": "pass_through" }}"#
    );
    let mut setup = Setup::new(&config, upstream.port);
    setup.clusters = format!(
        r#"- name: idemgate_store
  connect_timeout: 1s
  type: STATIC
  typed_extension_protocol_options:
    envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
      "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
      explicit_http_config: {{ http2_protocol_options: {{}} }}
  load_assignment:
    cluster_name: idemgate_store
    endpoints:
    - lb_endpoints:
      - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {dead_port} }} }} }}
"#
    );
    setup
        .vm_env
        .push(("IDEMGATE_RECORD_SECRET".into(), RECORD_SECRET.into()));
    let envoy = Envoy::start(&setup);

    // Unsafe by design: each attempt runs, each answer says so.
    for _ in 0..2 {
        let answer = Request::post("/pay", "down").send(envoy.port);
        assert_eq!(answer.status, 201, "{}", answer.text());
        assert_eq!(answer.header(DEGRADED), Some("store_unavailable"));
        assert!(!answer.replayed());
    }
    assert_eq!(upstream.hits("down"), 2);
    assert_eq!(envoy.counter("store_error"), 2);
    assert_eq!(envoy.counter("degraded"), 2);
    assert_eq!(envoy.counter("degraded.store_unavailable"), 2);
    assert_eq!(envoy.counter("degraded.store_full"), 0);

    let bare = without_key().send(envoy.port);
    assert_eq!((bare.status, bare.header(DEGRADED)), (201, None));
    let off = Request::post("/unguarded/pay", "down").send(envoy.port);
    assert_eq!((off.status, off.header(DEGRADED)), (201, None));
    assert_eq!(envoy.counter("degraded"), 2);
    assert_eq!(envoy.counter("passthrough"), 3);
}
