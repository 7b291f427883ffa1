//! HTTP callouts and stream destruction at the host level, with a tiny hand-written proxy-wasm
//! module (the probe): on request headers it calls `proxy_http_call` to the cluster named by the
//! request path ("/upstream" → "upstream") and pauses; its `proxy_on_http_call_response` reads what
//! Envoy lets it read (callout headers and body, `proxy_get_status`), re-enters the stream with
//! `proxy_set_effective_context` and relays the body as a local reply. It reports every number as
//! a gauge, so the test reads them as metrics.

use idemgate_host_tests::abi::Status;
use idemgate_host_tests::envoy::{CalloutFault, Delivery};
use idemgate_host_tests::scenario::{Abort, Envoy, Orders, Request, Response, Scripted};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The probe's static data: gauge names, the callout's header map, its body.
struct Layout {
    data: Vec<(u32, Vec<u8>)>,
    next: u32,
}

impl Layout {
    fn put(&mut self, bytes: &[u8]) -> (u32, u32) {
        let at = self.next;
        self.data.push((at, bytes.to_vec()));
        self.next += bytes.len() as u32 + 1;
        (at, bytes.len() as u32)
    }

    /// `(call $set name value)`: records `value` in the gauge `name`.
    fn set(&mut self, name: &str, value: &str) -> String {
        let (at, len) = self.put(name.as_bytes());
        format!("(call $set (i32.const {at}) (i32.const {len}) {value})\n")
    }

    fn segments(&self) -> String {
        self.data
            .iter()
            .map(|(at, bytes)| {
                let escaped: String = bytes.iter().map(|b| format!("\\{b:02x}")).collect();
                format!("(data (i32.const {at}) \"{escaped}\")\n")
            })
            .collect()
    }
}

fn header_map(pairs: &[(&str, &str)]) -> Vec<u8> {
    let mut out = (pairs.len() as u32).to_le_bytes().to_vec();
    for (n, v) in pairs {
        out.extend((n.len() as u32).to_le_bytes());
        out.extend((v.len() as u32).to_le_bytes());
    }
    for (n, v) in pairs {
        out.extend(n.as_bytes());
        out.push(0);
        out.extend(v.as_bytes());
        out.push(0);
    }
    out
}

fn probe_wat() -> String {
    let mut l = Layout {
        data: Vec::new(),
        next: 16,
    };
    let (path, path_len) = l.put(b":path");
    let (hdrs, hdrs_len) = l.put(&header_map(&[
        (":method", "POST"),
        (":path", "/orders"),
        (":authority", "orders.internal"),
        ("idempotency-key", "k"),
    ]));
    let (body, body_len) = l.put(b"{\"sku\":\"A1\"}");
    // Scratch words: 1024 ptr, 1028 len, 1032 token, 1036 metric id, 1040/1044 body ptr/len,
    // 1048 status code, 1052/1056 status message ptr/len.
    let dispatch = l.set(
        "dispatch",
        &format!(
            "(call $http_call
               (i32.add (i32.load (i32.const 1024)) (i32.const 1))
               (i32.sub (i32.load (i32.const 1028)) (i32.const 1))
               (i32.const {hdrs}) (i32.const {hdrs_len}) (i32.const {body}) (i32.const {body_len})
               (i32.const 0) (i32.const 0) (i32.const 1000) (i32.const 1032))"
        ),
    );
    let token = l.set("token", "(i32.load (i32.const 1032))");
    let cb = [
        l.set("cb.context", "(local.get 0)"),
        l.set("cb.token", "(local.get 1)"),
        l.set("cb.headers", "(local.get 2)"),
        l.set("cb.body", "(local.get 3)"),
        l.set("cb.trailers", "(local.get 4)"),
        l.set(
            "cb.pairs_status",
            "(call $get_pairs (i32.const 6) (i32.const 1024) (i32.const 1028))",
        ),
        l.set("cb.pairs_size", "(i32.load (i32.const 1028))"),
        l.set(
            "cb.body_status",
            "(call $get_buffer (i32.const 4) (i32.const 0) (i32.const 65536) (i32.const 1040) (i32.const 1044))",
        ),
        l.set("cb.body_read", "(i32.load (i32.const 1044))"),
        l.set(
            "cb.get_status",
            "(call $get_status (i32.const 1048) (i32.const 1052) (i32.const 1056))",
        ),
        l.set("cb.status_code", "(i32.load (i32.const 1048))"),
        l.set("cb.status_message_len", "(i32.load (i32.const 1056))"),
        l.set("cb.effective", "(call $set_effective (global.get $stream))"),
        l.set(
            "cb.relay",
            "(call $local_response (i32.const 200) (i32.const 0) (i32.const 0)
               (i32.load (i32.const 1040)) (i32.load (i32.const 1044))
               (i32.const 0) (i32.const 0) (i32.const -1))",
        ),
        l.set("cb.calls", "(i32.add (global.get $calls) (i32.const 1))"),
    ]
    .concat();
    let logged = l.set("stream.logged", "(i32.const 1)");
    let done = l.set("stream.done", "(i32.const 1)");
    let deleted = l.set("stream.deleted", "(i32.const 1)");
    let segments = l.segments();
    format!(
        r#"(module
  (import "env" "proxy_http_call" (func $http_call (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_get_header_map_value" (func $get_value (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_get_header_map_pairs" (func $get_pairs (param i32 i32 i32) (result i32)))
  (import "env" "proxy_get_buffer_bytes" (func $get_buffer (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_get_status" (func $get_status (param i32 i32 i32) (result i32)))
  (import "env" "proxy_set_effective_context" (func $set_effective (param i32) (result i32)))
  (import "env" "proxy_send_local_response" (func $local_response (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_define_metric" (func $define (param i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_record_metric" (func $record (param i32 i64) (result i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 8192))
  (global $stream (mut i32) (i32.const 0))
  (global $calls (mut i32) (i32.const 0))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_memory_allocate") (param $n i32) (result i32) (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.and (i32.add (i32.add (global.get $heap) (local.get $n)) (i32.const 7)) (i32.const -8)))
    (local.get $p))
  (func $set (param $name i32) (param $len i32) (param $value i32)
    (drop (call $define (i32.const 1) (local.get $name) (local.get $len) (i32.const 1036)))
    (drop (call $record (i32.load (i32.const 1036)) (i64.extend_i32_s (local.get $value)))))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (global.set $stream (local.get 0))
    (drop (call $get_value (i32.const 0) (i32.const {path}) (i32.const {path_len}) (i32.const 1024) (i32.const 1028)))
    {dispatch}
    {token}
    (i32.const 1))
  (func (export "proxy_on_http_call_response") (param i32 i32 i32 i32 i32)
    (i32.store (i32.const 1040) (i32.const 0))
    (i32.store (i32.const 1044) (i32.const 0))
    {cb}
    (global.set $calls (i32.add (global.get $calls) (i32.const 1))))
  (func (export "proxy_on_log") (param i32) {logged})
  (func (export "proxy_on_done") (param i32) (result i32) {done} (i32.const 1))
  (func (export "proxy_on_delete") (param i32) {deleted})
  {segments}
)"#
    )
}

/// The probe, assembled once per test process into a temporary file.
fn probe() -> PathBuf {
    static PATH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let wasm = wat::parse_str(probe_wat()).unwrap_or_else(|e| panic!("{e}"));
        let path = std::env::temp_dir().join(format!(
            "idemgate-callout-probe-{}.wasm",
            std::process::id()
        ));
        std::fs::write(&path, wasm).unwrap();
        path
    })
    .clone()
}

fn code(status: Status) -> i64 {
    status.code().into()
}

fn gauge(envoy: &Envoy, name: &str) -> i64 {
    envoy
        .metric(name)
        .unwrap_or_else(|| panic!("the probe never set {name}: {:?}", envoy.metrics()))
}

fn envoy_with(service: Scripted) -> (Envoy, Arc<Scripted>) {
    let service = Arc::new(service);
    let envoy = Envoy::builder()
        .wasm(probe())
        .shared_cluster("upstream", service.clone())
        .start()
        .unwrap();
    (envoy, service)
}

fn to_upstream() -> Request {
    Request::post("/upstream").json(r#"{"sku":"A1"}"#)
}

#[test]
fn a_callout_is_answered_on_the_root_context_and_relayed() {
    let (envoy, upstream) = envoy_with(Scripted::new(vec![Response::new(201)
        .json(r#"{"id":7}"#)
        .after(Duration::from_millis(300))]));
    // No body: the probe's pause on the headers holds the whole request.
    let exchange = envoy.worker(0).send(Request::post("/upstream")).unwrap();
    assert_eq!(gauge(&envoy, "dispatch"), code(Status::Ok));
    assert_eq!(
        gauge(&envoy, "token"),
        4,
        "tokens go 4, 8, … as in proxy-wasm-cpp-host"
    );
    assert!(exchange.is_paused() && exchange.answer().is_none());
    assert!(
        upstream.served().is_empty(),
        "nothing reaches the upstream before delivery"
    );

    let pending = envoy.worker(0).pending_callouts();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].cluster, "upstream");
    assert_eq!(pending[0].path(), "/orders");
    assert_eq!(pending[0].key(), Some("k"));
    assert_eq!(pending[0].body, br#"{"sku":"A1"}"#);
    assert_eq!(pending[0].timeout_ms, 1000);

    let before = envoy.clock().now_ms();
    let record = envoy.worker(0).answer_callout(4).unwrap();
    assert!(record.reached && !record.stream_gone);
    assert_eq!(
        envoy.clock().now_ms() - before,
        300,
        "the answer's delay passed"
    );
    assert_eq!(upstream.served().len(), 1);

    assert_eq!(
        gauge(&envoy, "cb.context"),
        1,
        "the root context gets the answer"
    );
    assert_eq!(gauge(&envoy, "cb.token"), 4);
    // :status, content-type, content-length, x-envoy-upstream-service-time
    assert_eq!(gauge(&envoy, "cb.headers"), 4);
    assert_eq!(gauge(&envoy, "cb.body"), 8);
    assert_eq!(gauge(&envoy, "cb.trailers"), 0);
    assert_eq!(gauge(&envoy, "cb.pairs_status"), 0);
    assert!(gauge(&envoy, "cb.pairs_size") > 4 + 4 * 8);
    assert_eq!(gauge(&envoy, "cb.body_status"), 0);
    assert_eq!(gauge(&envoy, "cb.body_read"), 8);
    assert_eq!(gauge(&envoy, "cb.status_code"), 0);
    assert_eq!(gauge(&envoy, "cb.effective"), 0, "the stream still exists");
    assert_eq!(gauge(&envoy, "cb.relay"), 0);

    let answer = exchange
        .answer()
        .expect("the relayed answer reached the client");
    assert_eq!(
        (answer.status, answer.body.as_slice()),
        (200, &br#"{"id":7}"#[..])
    );
    assert!(exchange.is_done());
    assert_eq!(gauge(&envoy, "stream.deleted"), 1);
    assert!(envoy.worker(0).pending_callouts().is_empty());
    assert!(envoy.anomalies().is_empty(), "{:?}", envoy.anomalies());
}

#[test]
fn the_callout_outlives_a_client_that_went_away() {
    let (envoy, upstream) = envoy_with(Scripted::new(vec![Response::new(201).json("{}")]));
    for abort in [
        Abort::AfterHeaders,
        Abort::AfterChunk(1),
        Abort::AfterRequest,
    ] {
        let before = envoy.callouts().len();
        let exchange = envoy
            .worker(0)
            .send(to_upstream().chunked_at(&[3]).abort_after(abort))
            .unwrap();
        assert!(
            exchange.is_done() && exchange.answer().is_none(),
            "{abort:?}"
        );
        let token = envoy.worker(0).pending_callouts()[0].token;
        let record = envoy.worker(0).answer_callout(token).unwrap();
        assert!(record.stream_gone, "{abort:?}");
        assert_eq!(envoy.callouts().len(), before + 1);
        assert_eq!(
            gauge(&envoy, "cb.context"),
            1,
            "{abort:?}: still the root context"
        );
        assert_eq!(
            gauge(&envoy, "cb.body_read"),
            2,
            "{abort:?}: the answer is readable"
        );
        assert_eq!(
            gauge(&envoy, "cb.effective"),
            code(Status::BadArgument),
            "{abort:?}: a deleted stream cannot be re-entered"
        );
        assert!(exchange.answer().is_none(), "{abort:?}: nobody to relay to");
    }
    assert_eq!(upstream.served().len(), 3);
    assert_eq!(gauge(&envoy, "stream.logged"), 1);
    assert_eq!(gauge(&envoy, "stream.done"), 1);
    assert!(envoy.anomalies().is_empty(), "{:?}", envoy.anomalies());
}

#[test]
fn an_unknown_cluster_is_a_bad_argument_and_a_failed_dispatch_never_answers() {
    let (envoy, upstream) = envoy_with(Scripted::new(vec![Response::new(200)]));
    envoy
        .worker(0)
        .send(Request::post("/nowhere").body("x"))
        .unwrap();
    assert_eq!(gauge(&envoy, "dispatch"), code(Status::BadArgument));
    assert_eq!(gauge(&envoy, "token"), 0);
    assert!(envoy.worker(0).pending_callouts().is_empty());

    envoy
        .faults()
        .callout("upstream", CalloutFault::DispatchFails, 1);
    envoy.worker(0).send(to_upstream()).unwrap();
    assert_eq!(gauge(&envoy, "dispatch"), code(Status::InternalFailure));
    assert_eq!(gauge(&envoy, "token"), 0);
    assert!(envoy.worker(0).pending_callouts().is_empty());
    assert!(upstream.served().is_empty());
    // The failed dispatch used up token 4, as Envoy's does.
    envoy.worker(0).send(to_upstream()).unwrap();
    assert_eq!(gauge(&envoy, "token"), 8);
    assert_eq!(envoy.faults().callouts_fired(), 1);
}

#[test]
fn failures_arrive_as_envoy_reports_them() {
    let cases = [
        (CalloutFault::Timeout, Some(504), true, 1000),
        (
            CalloutFault::Late(Duration::from_secs(5)),
            Some(504),
            true,
            1000,
        ),
        (
            CalloutFault::Late(Duration::from_millis(400)),
            Some(201),
            true,
            400,
        ),
        (CalloutFault::ResetBeforeResponse, Some(503), true, 0),
        (CalloutFault::ConnectionFailure, Some(503), false, 0),
        (CalloutFault::Status(503), Some(503), false, 0),
        (CalloutFault::ResetAfterHeaders, None, true, 0),
    ];
    for (fault, status, reached, elapsed_ms) in cases {
        let (envoy, upstream) =
            envoy_with(Scripted::new(vec![Response::new(201).json(r#"{"id":1}"#)]));
        envoy.faults().callout("upstream", fault, 1);
        let exchange = envoy.worker(0).send(to_upstream()).unwrap();
        let before = envoy.clock().now_ms();
        let record = envoy.worker(0).answer_callout(4).unwrap();
        assert_eq!(envoy.clock().now_ms() - before, elapsed_ms, "{fault:?}");
        assert_eq!(record.delivery.status(), status, "{fault:?}");
        assert_eq!(record.reached, reached, "{fault:?}");
        assert_eq!(upstream.served().len(), usize::from(reached), "{fault:?}");
        match status {
            Some(_) => {
                assert!(gauge(&envoy, "cb.headers") >= 3, "{fault:?}");
                assert_eq!(gauge(&envoy, "cb.body_status"), 0, "{fault:?}");
                assert_eq!(gauge(&envoy, "cb.status_code"), 0, "{fault:?}");
                let relayed = exchange.answer().unwrap();
                assert!(!relayed.body.is_empty(), "{fault:?}");
            }
            None => {
                assert_eq!(record.delivery, Delivery::Failure);
                for n in ["cb.headers", "cb.body", "cb.trailers", "cb.pairs_size"] {
                    assert_eq!(gauge(&envoy, n), 0, "{fault:?}: {n}");
                }
                assert_eq!(
                    gauge(&envoy, "cb.pairs_status"),
                    0,
                    "an absent map reads as empty"
                );
                assert_eq!(gauge(&envoy, "cb.body_status"), code(Status::NotFound));
                assert_eq!(
                    gauge(&envoy, "cb.status_code"),
                    code(Status::BrokenConnection)
                );
                assert_eq!(gauge(&envoy, "cb.status_message_len"), 5, "\"reset\"");
            }
        }
    }
}

#[test]
fn two_envoys_can_share_one_upstream_model() {
    let orders = Arc::new(Orders::new());
    let a = Envoy::builder()
        .wasm(probe())
        .shared_cluster("upstream", orders.clone())
        .start()
        .unwrap();
    let b = Envoy::builder()
        .wasm(probe())
        .shared_cluster("upstream", orders.clone())
        .start()
        .unwrap();
    let first = a.worker(0).send(to_upstream()).unwrap();
    let second = b.worker(0).send(to_upstream()).unwrap();
    b.answer_callouts().unwrap();
    a.answer_callouts().unwrap();
    assert_eq!(second.answer().unwrap().body, br#"{"id":1}"#);
    assert_eq!(first.answer().unwrap().body, br#"{"id":2}"#);
    assert_eq!(orders.served().len(), 2);
    assert_eq!((a.callouts().len(), b.callouts().len()), (1, 1));
}
