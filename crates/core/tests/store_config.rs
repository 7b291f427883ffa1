//! Configuration of where records live (issue 13): `store` local (the default) or remote.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use idemgate_core::policy::{Policy, StoreKind};
use idemgate_core::seal::RecordSecrets;
use idemgate_core::time::Span;

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
