//! Who operates the store: only an Envoy with the client certificate gets store operations, and
//! an operator's eviction lets the key run again.

use super::backend::{store_binary, Backend, Engine, Store, RECORD_SECRET};
use super::envoys::{config, envoy, replay};
use super::pki;
use crate::client::Request;
use crate::harness::{Envoy, Setup, TempDir};
use crate::upstream::Upstream;
use std::process::Command;

/// The store's side of mutual TLS, seen through Envoy: an Envoy whose cluster speaks
/// h2c, or TLS without the client certificate, gets no store operation — its keyed requests get
/// the failure mode (503) and never reach the upstream — while the Envoy with the certificate
/// runs the same key once.
#[test]
#[ignore = "needs Envoy, the built filter and store, redis-server: make test-envoy"]
fn an_envoy_without_the_client_certificate_gets_no_store_operation() {
    let backend = Backend::start(Engine::Redis);
    let store = Store::start(&backend);
    let upstream = Upstream::start();
    let filter = config("");
    let with = |cluster: String| {
        let mut setup = Setup::new(&filter, upstream.port);
        setup.clusters = cluster;
        setup
            .vm_env
            .push(("IDEMGATE_RECORD_SECRET".into(), RECORD_SECRET.into()));
        Envoy::start(&setup)
    };
    let full = store.cluster();
    let socket = pki::envoy_transport_socket(&store.pki);
    let plaintext = with(full.replace(&socket, ""));
    let identity = format!(
        "        tls_certificates:\n        - certificate_chain: {{ filename: \"{}\" }}\n          private_key: {{ filename: \"{}\" }}\n",
        store.pki.client_cert.display(),
        store.pki.client_key.display()
    );
    assert!(full.contains(&identity), "{full}");
    let anonymous = with(full.replace(&identity, ""));
    for (name, envoy) in [("h2c", &plaintext), ("no certificate", &anonymous)] {
        let answer = Request::post("/pay", "mtls-1").send(envoy.port);
        assert_eq!(answer.status, 503, "{name}: {}", answer.text());
        assert_eq!(answer.problem_code(), "store_unavailable", "{name}");
        assert!(envoy.counter("store_error") >= 1, "{name}");
    }
    assert_eq!(upstream.hits("mtls-1"), 0);
    let (good, _) = envoy(&filter, &upstream, &store);
    let answer = Request::post("/pay", "mtls-1").send(good.port);
    assert_eq!(
        (answer.status, answer.replayed()),
        (201, false),
        "{}",
        answer.text()
    );
    assert_eq!(upstream.hits("mtls-1"), 1);
}
/// Operator controls: a request through a real Envoy stores its answer; `idemgate-store
/// records get`, given the client's request as the client sent it (key, path, Authorization value)
/// and the filter's own configuration, finds that record — so the CLI derives the storage key the
/// filter derived; `records evict` removes it, and the client's retry runs at the upstream again.
fn an_evicted_record_runs_again(engine: Engine) {
    let backend = Backend::start(engine);
    let store = Store::start(&backend);
    let upstream = Upstream::start();
    let filter = config("");
    let (a, _) = envoy(&filter, &upstream, &store);
    let dir = TempDir::new();
    let policy = dir.0.join("policy.json");
    std::fs::write(&policy, &filter).expect("policy file");
    let key = "fleet-evict-1";
    let request = Request::post("/Pay", key).header("authorization", "Bearer operator-test");
    let first = request.send(a.port);
    assert_eq!(first.status, 201, "{}", first.text());
    assert!(replay(&request, a.port).replayed());
    assert_eq!(upstream.hits(key), 1);

    let operator = |verb: &str| {
        let out = Command::new(store_binary())
            .args(["records", verb, "--key", key, "--route", "/Pay"])
            .args(["--scope", "Bearer operator-test", "--policy"])
            .arg(&policy)
            .args(backend.args())
            .output()
            .expect("idemgate-store runs");
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "records {verb}: {stderr}");
        (stdout, stderr)
    };
    let (got, _) = operator("get");
    assert!(got.contains("\"state\":\"completed\""), "{got}");
    assert!(got.contains("\"status\":201"), "{got}");
    let (evicted, log) = operator("evict");
    assert!(evicted.contains("\"evicted\":true"), "{evicted}");
    assert!(
        log.contains("record evicted") && log.contains("via=cli"),
        "{log}"
    );
    assert!(!log.contains(key), "{log}");

    // The retry is a new first request: it runs at the upstream and its answer is stored again.
    let again = request.send(a.port);
    assert_eq!(again.status, 201, "{}", again.text());
    assert!(!again.replayed(), "{}", again.text());
    upstream.wait_finished(2);
    assert_eq!(upstream.hits(key), 2);
    assert!(replay(&request, a.port).replayed());
    assert_eq!(upstream.hits(key), 2);
}
on_every_engine!(an_evicted_record_runs_again);
