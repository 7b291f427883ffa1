//! A bad configuration makes Envoy refuse the filter, with a log line naming the field and the
//! reason; the shipped example validates.

use crate::harness::{filter_wasm, validate, yaml, Setup, TempDir};
use std::path::Path;

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn bad_configurations_are_rejected_naming_the_field() {
    let dir = TempDir::new();
    let wasm = filter_wasm();
    let check = |name: &str, filter: &str| {
        let path = dir.0.join(format!("{name}.yaml"));
        std::fs::write(&path, yaml(&Setup::new(filter, 9), &wasm)).expect("write");
        validate(&path, &[])
    };
    let (ok, log) = check(
        "good",
        r#"{ "routes": [{ "prefix": "/orders", "key": "required" }] }"#,
    );
    assert!(ok, "a good configuration validates:\n{log}");
    for (name, filter, field) in [
        ("lease", r#"{ "lease": "forever" }"#, "`lease`"),
        (
            "prefix",
            r#"{ "routes": [{ "prefix": "orders" }] }"#,
            "`routes[0].prefix`",
        ),
        ("order", r#"{ "ttl": "1h", "lease": "2h" }"#, "`lease`"),
        ("unknown", r#"{ "leese": "1s" }"#, "`leese`: unknown field"),
        (
            "secret",
            r#"{ "token": { "secret_env": "IDEMGATE_NOT_SET" } }"#,
            "`token.secret_env`",
        ),
        ("json", r#"{ "routes": "#, "configuration is not valid"),
    ] {
        let (ok, log) = check(name, filter);
        assert!(!ok, "{name}: a bad configuration must be refused");
        let line = log
            .lines()
            .find(|l| l.contains("rejected: "))
            .unwrap_or_else(|| panic!("{name}: no rejection line in:\n{log}"));
        assert!(
            line.contains(field),
            "{name}: the log line names {field}: {line}"
        );
    }
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn the_example_configuration_validates() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/envoy/envoy.yaml");
    let text = std::fs::read_to_string(&example).expect("examples/envoy/envoy.yaml");
    let wasm = filter_wasm();
    let dir = TempDir::new();
    let path = dir.0.join("example.yaml");
    std::fs::write(
        &path,
        text.replace(
            "target/wasm32-wasip1/release/idemgate_envoy.wasm",
            &wasm.display().to_string(),
        ),
    )
    .expect("write");
    let env = [(
        "IDEMGATE_TOKEN_SECRET".to_string(),
        "example-secret-at-least-16-bytes".to_string(),
    )];
    let (ok, log) = validate(&path, &env);
    assert!(ok, "examples/envoy/envoy.yaml must validate:\n{log}");
}
