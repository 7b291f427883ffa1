//! Configuration of where records live (issue 13): `store` local (the default) or remote.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use idemgate_core::policy::{Policy, StoreKind};
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

#[test]
fn remote_names_a_cluster_and_a_timeout() {
    assert_eq!(
        compile(r#"{"store":{"kind":"remote","cluster":"idemgate_store"}}"#)
            .unwrap()
            .store,
        StoreKind::Remote {
            cluster: "idemgate_store".into(),
            timeout: Span(250)
        }
    );
    assert_eq!(
        compile(r#"{"store":{"kind":"remote","cluster":"s","timeout":"1s"}}"#)
            .unwrap()
            .store,
        StoreKind::Remote {
            cluster: "s".into(),
            timeout: Span::from_secs(1)
        }
    );
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
            r#"{"store":{"kind":"remote","cluster":"s","timeout":"0ms"}}"#,
            "store.timeout",
        ),
        (
            r#"{"store":{"kind":"remote","cluster":"s","tiemout":"1s"}}"#,
            "store",
        ),
    ] {
        let e = compile(text).unwrap_err();
        assert!(e.contains(field), "{text}: {e}");
    }
}
