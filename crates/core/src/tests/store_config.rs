//! Configuration of where records live: `store` local (the default) or remote.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::config::Config;
use crate::policy::{Policy, StoreKind};
use crate::record::seal::RecordSecrets;
use crate::time::Span;
use idemgate_json::{JsonHasher, JsonLimits, Value};
use std::prelude::rust_2021::{String, ToString, Vec};

fn compile(text: &str) -> Result<Policy, String> {
    Policy::from_json(text, &|_| None).map_err(|e| e.to_string())
}

#[test]
fn local_is_the_default() {
    assert_eq!(compile("{}").unwrap().store, StoreKind::Local);
    assert_eq!(
        compile(r#"{"store":{"kind":"local"}}"#).unwrap().store,
        StoreKind::Local
    );
    assert_eq!(Policy::defaults().store, StoreKind::Local);
}

const SECRET: &str = "record-secret-of-the-fleet-0123456789";
const OLD: &str = "record-secret-of-last-month-01234567";

/// The VM's environment: the default record secret, a second one for rotation, a short one.
fn env(name: &str) -> Option<String> {
    match name {
        "IDEMGATE_RECORD_SECRET" | "NEW" => Some(SECRET.into()),
        "OLD" => Some(OLD.into()),
        "SHORT" => Some("too-short".into()),
        _ => None,
    }
}

fn compile_with_env(text: &str) -> Result<Policy, String> {
    Policy::from_json(text, &env).map_err(|e| e.to_string())
}

fn secrets(list: &[&str]) -> RecordSecrets {
    let list: Vec<&[u8]> = list.iter().map(|s| s.as_bytes()).collect();
    RecordSecrets::new(&list).unwrap()
}

#[test]
fn remote_names_a_cluster_and_a_timeout() {
    assert_eq!(
        compile_with_env(r#"{"store":{"kind":"remote","cluster":"idemgate_store"}}"#)
            .unwrap()
            .store,
        StoreKind::Remote {
            cluster: "idemgate_store".into(),
            timeout: Span(250),
            secrets: secrets(&[SECRET]),
        }
    );
    assert_eq!(
        compile_with_env(
            r#"{"store":{"kind":"remote","cluster":"s","timeout":"1s","record_secret_env":"NEW"}}"#
        )
        .unwrap()
        .store,
        StoreKind::Remote {
            cluster: "s".into(),
            timeout: Span::from_secs(1),
            secrets: secrets(&[SECRET]),
        }
    );
}

#[test]
fn rotation_names_the_sealing_secret_first() {
    assert_eq!(
        compile_with_env(
            r#"{"store":{"kind":"remote","cluster":"s","record_secrets_env":["NEW","OLD"]}}"#
        )
        .unwrap()
        .store,
        StoreKind::Remote {
            cluster: "s".into(),
            timeout: Span(250),
            secrets: secrets(&[SECRET, OLD]),
        }
    );
}

#[test]
fn a_remote_store_without_its_record_secret_is_refused_naming_the_variable() {
    // No silent unsealed fallback: the default variable is required when nothing is named.
    let e = compile(r#"{"store":{"kind":"remote","cluster":"s"}}"#).unwrap_err();
    assert!(e.contains("store.record_secret_env"), "{e}");
    assert!(e.contains("IDEMGATE_RECORD_SECRET"), "{e}");
    let e = compile_with_env(
        r#"{"store":{"kind":"remote","cluster":"s","record_secret_env":"MISSING"}}"#,
    )
    .unwrap_err();
    assert!(e.contains("`MISSING` is not set"), "{e}");
    let e = compile_with_env(
        r#"{"store":{"kind":"remote","cluster":"s","record_secrets_env":["NEW","MISSING"]}}"#,
    )
    .unwrap_err();
    assert!(
        e.contains("store.record_secrets_env") && e.contains("MISSING"),
        "{e}"
    );
    // Too short: the variable and the rule are named, never the value.
    let e = compile_with_env(
        r#"{"store":{"kind":"remote","cluster":"s","record_secret_env":"SHORT"}}"#,
    )
    .unwrap_err();
    assert!(e.contains("`SHORT`") && e.contains("at least 32"), "{e}");
    assert!(!e.contains("too-short"), "{e}");
}

#[test]
fn bad_store_sections_are_refused_with_the_field() {
    for (text, field) in [
        (r#"{"store":{"kind":"remote"}}"#, "store.cluster"),
        (
            r#"{"store":{"kind":"remote","cluster":""}}"#,
            "store.cluster",
        ),
        (r#"{"store":{"kind":"redis"}}"#, "store.kind"),
        (
            r#"{"store":{"kind":"local","cluster":"s"}}"#,
            "store.cluster",
        ),
        (
            r#"{"store":{"kind":"local","record_secret_env":"NEW"}}"#,
            "store.record_secret_env",
        ),
        (
            r#"{"store":{"kind":"remote","cluster":"s","timeout":"0ms"}}"#,
            "store.timeout",
        ),
        (
            r#"{"store":{"kind":"remote","cluster":"s","tiemout":"1s"}}"#,
            "store",
        ),
        (
            r#"{"store":{"kind":"remote","cluster":"s","record_secret_env":"NEW","record_secrets_env":["OLD"]}}"#,
            "store.record_secret_env",
        ),
        (
            r#"{"store":{"kind":"remote","cluster":"s","record_secrets_env":[]}}"#,
            "store.record_secrets_env",
        ),
    ] {
        let e = compile_with_env(text).unwrap_err();
        assert!(e.contains(field), "{text}: {e}");
    }
}

/// The store service's operator controls derive storage keys from the filter's configuration
/// without the secrets it names (only the Envoys hold them): the same routes, key sources and
/// scopes as the filter's own compile, and no secret read.
#[test]
fn storage_keys_come_from_the_configuration_without_its_secrets() {
    let text = r#"{
        "store": { "kind": "remote", "cluster": "idemgate_store", "record_secret_env": "NEW" },
        "token": { "secret_env": "TOKEN_SECRET" },
        "routes": [
            { "prefix": "/webhooks/stripe", "preset": "stripe",
              "signature": { "secret_env": "STRIPE_SECRET" } },
            { "prefix": "/Orders", "case_sensitive": true },
            { "prefix": "/pay", "token": "required" }
        ] }"#;
    let env = |name: &str| match name {
        "NEW" => Some(SECRET.to_string()),
        "TOKEN_SECRET" => Some("token-secret-of-the-fleet-0123456789abcdef".to_string()),
        "STRIPE_SECRET" => Some("whsec_test_secret".to_string()),
        _ => None,
    };
    let filter = Policy::from_json(text, &env).unwrap();
    // Without the environment the filter's compile is refused; the key-only compile is not.
    assert!(compile(text).is_err());
    let keys = Policy::for_storage_keys(text).unwrap();
    assert_eq!(keys.store, StoreKind::Local);
    assert_eq!(keys.scope, filter.scope);
    for (method, path) in [
        ("POST", "/webhooks/stripe"),
        ("POST", "/Orders/7"),
        ("POST", "/orders/7"),
        ("POST", "/pay/x?y=1"),
        ("GET", "/pay/x"),
    ] {
        let (a, b) = (
            filter.match_request(method, path),
            keys.match_request(method, path),
        );
        assert_eq!(a.is_some(), b.is_some(), "{method} {path}");
        if let (Some(a), Some(b)) = (a, b) {
            assert_eq!(a.path, b.path, "{method} {path}");
            assert_eq!(a.route.prefix, b.route.prefix, "{method} {path}");
            assert_eq!(
                a.route.own_scope().map(|s| (s.source, s.value.to_vec())),
                b.route.own_scope().map(|s| (s.source, s.value.to_vec())),
                "{method} {path}"
            );
        }
    }
    // The callback route keeps its preset's scope: the route itself.
    let stripe = keys.match_request("POST", "/webhooks/stripe").unwrap();
    assert!(stripe.route.own_scope().is_some());
    // A preset route without its signature is still refused, as the filter refuses it.
    let unsigned = r#"{ "routes": [{ "prefix": "/w", "preset": "stripe" }] }"#;
    assert!(Policy::for_storage_keys(unsigned).is_err());
}

/// One grammar for bodies and documents: the configuration/vector reader refuses the numbers a
/// body may not carry (it used to take any length and any exponent), with the same message.
#[test]
fn documents_have_the_number_limits_of_bodies() {
    let long = "1".repeat(65);
    for text in ["1e10000".to_string(), long.clone()] {
        assert!(Value::parse(&text).is_err(), "{text}");
        let mut hasher = JsonHasher::new(JsonLimits::default(), None);
        let body = hasher
            .update(text.as_bytes())
            .and_then(|()| hasher.finish().map(|_| ()))
            .unwrap_err()
            .to_string();
        let config = Config::from_json(&format!("{{\"capacity\": {text}}}")).unwrap_err();
        assert_eq!(config.code(), "config_syntax");
        let at_13 = body.replace("byte 0", "byte 13");
        assert!(config.to_string().ends_with(&at_13), "{config} / {body}");
    }
    assert!(Value::parse(&long[1..]).is_ok());
    assert!(Value::parse("[1e9999, -1e-9999, 1e400]").is_ok());
}

/// The remote store's fields on the local store are refused naming the one that is set, so the
/// log line points at the line to delete.
#[test]
fn a_remote_field_on_the_local_store_is_named() {
    for (field, text) in [
        ("store.cluster", r#"{"store": {"cluster": "s"}}"#),
        ("store.timeout", r#"{"store": {"timeout": "250ms"}}"#),
        (
            "store.timeout",
            r#"{"store": {"kind": "local", "timeout": "1s"}}"#,
        ),
    ] {
        let e = compile(text).unwrap_err();
        assert!(e.contains(&["`", field, "`"].concat()), "{text}: {e}");
        assert!(e.contains("only applies when `kind` is \"remote\""), "{e}");
    }
}
