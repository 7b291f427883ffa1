//! The key rules' configuration: each refusal at the field that is wrong, and the storage key the
//! store service's operator commands derive for a client-scoped route.

use super::policy;
use crate::config::ConfigError;
use crate::Policy;
use std::prelude::rust_2021::String;

#[test]
fn the_store_services_storage_key_is_the_filters() {
    let policy = policy(
        r#"{"routes": [{"prefix": "/orders", "key_scope": "client"},
                       {"prefix": "/refunds", "key_scope": "client"},
                       {"prefix": "/carts"}]}"#,
    );
    let scope = crate::client::scope::Scope {
        source: "header:authorization",
        value: b"Bearer alice",
    };
    let key = crate::request::key::IdempotencyKey::parse(b"k").unwrap();
    let at = |method: &str, path: &str| {
        policy
            .match_request(method, path)
            .unwrap()
            .storage_key(scope, method, &key)
    };
    assert_eq!(at("POST", "/orders/1"), at("PATCH", "/refunds"));
    assert_eq!(
        at("POST", "/orders"),
        crate::client::scope::StorageKey::derive(scope, "", "", &key)
    );
    assert_eq!(
        at("POST", "/carts"),
        crate::client::scope::StorageKey::derive(scope, "POST", "/carts", &key)
    );
}

/// The field a configuration is refused at, and its reason.
fn refusal(json: &str) -> (String, String) {
    match Policy::from_json(json, &|_| None) {
        Err(ConfigError::Invalid { field, reason }) => (field, reason),
        Err(ConfigError::Syntax { message }) => (String::from("syntax"), message),
        other => panic!("{json}: {other:?}"),
    }
}

#[test]
fn the_configuration_is_refused_at_the_field_that_is_wrong() {
    let cases: &[(&str, &str, &str)] = &[
        (
            r#"{"routes": [{"prefix": "/o", "key_format": {"prefix": ""}}]}"#,
            "routes[0].key_format.prefix",
            "1 to 254 characters",
        ),
        (
            r#"{"key_format": {"prefix": "a b"}}"#,
            "key_format.prefix",
            "visible ASCII",
        ),
        (
            r#"{"routes": [{"prefix": "/o", "key_mismatch": "ignore"}]}"#,
            "routes[0].key_mismatch",
            "only applies with a `key_format`",
        ),
        (
            r#"{"routes": [{"prefix": "/o", "key": "required", "key_format": "uuid", "key_mismatch": "ignore"}]}"#,
            "routes[0].key_mismatch",
            "requires one",
        ),
        (
            r#"{"key_format": "uuid", "key_mismatch": "ignore", "routes": [{"prefix": "/o", "key": "required"}]}"#,
            "routes[0].key_mismatch",
            "requires one",
        ),
        (
            r#"{"routes": [{"prefix": "/h", "kind": "callback", "key_from": [{"header": "x-id"}], "key_scope": "client"}]}"#,
            "routes[0].key_scope",
            "only applies to routes of kind \"api\"",
        ),
        (
            r#"{"routes": [{"prefix": "/a"}, {"prefix": "/o", "key_format": {"pattern": "^ord_"}}]}"#,
            "routes[1].key_format.pattern",
            "anchors",
        ),
        (
            r#"{"routes": [{"prefix": "/o", "key_format": {"pattern": "ord_\\d{5,2}"}}]}"#,
            "routes[0].key_format.pattern",
            "m greater than n",
        ),
        (
            r#"{"key_format": {"pattern": "[a-z"}}"#,
            "key_format.pattern",
            "without its `]`",
        ),
    ];
    for (json, field, reason) in cases {
        let (at, why) = refusal(json);
        assert_eq!(at, *field, "{json}: {why}");
        assert!(why.contains(reason), "{json}: {why}");
    }
    let shapes: &[(&str, &str)] = &[
        (
            r#"{"routes": [{"prefix": "/o", "key_format": {"pattern": 5}}]}"#,
            "`routes[0].key_format.pattern`: expected a string",
        ),
        (
            r#"{"key_format": "ulid"}"#,
            "`key_format`: unknown format \"ulid\"",
        ),
        (
            r#"{"routes": [{"prefix": "/o", "key_mismatch": "drop"}]}"#,
            "`routes[0].key_mismatch`: unknown value \"drop\"",
        ),
        (
            r#"{"key_scope": "tenant"}"#,
            "`key_scope`: unknown value \"tenant\"",
        ),
    ];
    for (json, start) in shapes {
        let (at, message) = refusal(json);
        assert_eq!(at, "syntax");
        assert!(message.starts_with(start), "{json}: {message}");
    }
}
