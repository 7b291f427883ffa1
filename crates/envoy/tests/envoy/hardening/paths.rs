//! A guarded route under another spelling of its path.

use crate::client::Request;
use crate::harness::{Envoy, Setup};
use crate::upstream::Upstream;

/// Finding 4: a guarded route cannot be bypassed by another spelling of its path that upstreams
/// still route to it; and the storage key is the normalised path's, so a retry under another
/// spelling replays instead of running again.
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn other_spellings_of_a_guarded_path_are_guarded() {
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(
        r#"{ "routes": [{ "prefix": "/payments", "key": "required" },
                        { "prefix": "/", "key": "optional" }] }"#,
        upstream.port,
    ));
    for path in [
        "/payments",
        "//payments",
        "/payments;x=1",
        "/%70ayments",
        "/Payments",
        "/./payments",
        "/a/../payments",
        "/payments/%2e%2e/payments",
    ] {
        let response = Request::new("POST", path)
            .json("{\"amount\":1}")
            .send(envoy.port);
        assert_eq!(
            (response.status, response.problem_code().as_str()),
            (400, "key_missing"),
            "{path} was not guarded"
        );
    }
    assert_eq!(
        upstream.total(),
        0,
        "no unkeyed payment reached the upstream"
    );
    let first = Request::post("/payments", "spell-1").send(envoy.port);
    assert_eq!(first.status, 201, "{}", first.text());
    for path in ["//payments", "/payments;x", "/%70ayments", "/PAYMENTS"] {
        let retry = Request::post(path, "spell-1").send(envoy.port);
        assert!(
            retry.replayed(),
            "{path}: {} {}",
            retry.status,
            retry.text()
        );
    }
    assert_eq!(upstream.hits("spell-1"), 1, "one execution");
}
