//! The published idempotency policy (`docs/semantics.md` §12): a resource that takes an
//! `Idempotency-Key` says how — which requests, which key, how long a key lives, what counts as
//! the same request and which answers are kept — in a document a client can read before it sends
//! one. The edge answers it at the policy's `policy_path` (`GET`, by default
//! `/.well-known/idempotency`), written from the compiled policy, so it cannot drift from what
//! the edge does.

use super::HttpAnswer;
use crate::policy::{KeyRequirement, Policy, Route, RouteKind, StoreRule};
use crate::request::json::write_string;
use crate::request::key::MAX_KEY_LEN;
use crate::request::key_format::{KeyFormat, KeyMismatch, KeyRules, KeyScope};
use crate::request::key_source::KeySource;
use crate::request::target::path_without_query;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use core::fmt::Write;

/// The document's media type.
const JSON: &str = "application/json";
/// How long a client may keep the document: it changes only with the configuration.
const MAX_AGE: &str = "max-age=300";

/// The published policy when `method` and `path` ask for it, else `None`.
pub(crate) fn published(policy: &Policy, method: &str, path: &str) -> Option<HttpAnswer> {
    let at = policy.published.as_deref()?;
    if method != "GET" || path_without_query(path) != at {
        return None;
    }
    Some(HttpAnswer {
        status: 200,
        headers: vec![
            (String::from("content-type"), String::from(JSON)),
            (String::from("cache-control"), String::from(MAX_AGE)),
        ],
        body: document(policy).into_bytes(),
    })
}

/// The document: the key's header and syntax, its lifetime, what is kept, and each route.
pub(crate) fn document(policy: &Policy) -> String {
    let mut out = String::from("{\"header\":");
    write_string(&mut out, &policy.header);
    // `write!` into a `String` cannot fail.
    let _ = write!(
        out,
        ",\"key\":{{\"syntax\":\"sf-string or token\",\"min_length\":1,\"max_length\":{MAX_KEY_LEN}}},\
         \"expires_after_seconds\":{},\"in_flight_lease_seconds\":{},\"fingerprint\":",
        policy.ttl.0 / 1000,
        policy.lease.0 / 1000,
    );
    write_string(&mut out, policy.fingerprint.mode.name());
    out.push_str(",\"stored\":");
    stored(&mut out, &policy.store_rule);
    out.push_str(",\"routes\":");
    array(&mut out, &policy.routes, route);
    out.push('}');
    out
}

/// One route: its prefix and methods, whether a key is required and where it is read, its kind.
fn route(out: &mut String, route: &Route) {
    out.push_str("{\"prefix\":");
    write_string(out, &route.prefix);
    out.push_str(",\"methods\":");
    array(out, &route.methods, |out, method| write_string(out, method));
    out.push_str(",\"key\":");
    write_string(
        out,
        match route.key {
            KeyRequirement::Required => "required",
            KeyRequirement::Optional => "optional",
        },
    );
    out.push_str(",\"key_from\":");
    array(out, &route.key_from, source);
    key_rules(out, &route.keys);
    out.push_str(",\"kind\":");
    write_string(
        out,
        match route.kind {
            RouteKind::Api => "api",
            RouteKind::Callback => "callback",
        },
    );
    let _ = write!(out, ",\"case_sensitive\":{}}}", route.case_sensitive);
}

/// A route's key rules, where it has any beyond the key syntax (a document of a configuration
/// without them reads as before): `key_format` (`"uuid"`, `{"prefix": …}` or `{"pattern": …}`)
/// with `key_mismatch` (`"refuse"`: 400; `"ignore"`: taken for no key), and `key_scope` when a key
/// is the client's across routes.
fn key_rules(out: &mut String, rules: &KeyRules) {
    if let Some(format) = &rules.format {
        out.push_str(",\"key_format\":");
        match format {
            KeyFormat::Uuid => out.push_str("\"uuid\""),
            KeyFormat::Prefix(prefix) => {
                out.push_str("{\"prefix\":");
                write_string(out, prefix);
                out.push('}');
            }
            KeyFormat::Pattern(pattern) => {
                out.push_str("{\"pattern\":");
                write_string(out, pattern.source());
                out.push('}');
            }
        }
        out.push_str(",\"key_mismatch\":");
        write_string(
            out,
            match rules.mismatch {
                KeyMismatch::Refuse => "refuse",
                KeyMismatch::Ignore => "ignore",
            },
        );
    }
    if rules.scope == KeyScope::Client {
        out.push_str(",\"key_scope\":\"client\"");
    }
}

/// Which answers a key keeps (and replays), by status.
fn stored(out: &mut String, rule: &StoreRule) {
    match rule {
        StoreRule::StoreAll => out.push_str("{\"statuses\":\"all\"}"),
        StoreRule::SuccessOnly => out.push_str("{\"statuses\":\"2xx\"}"),
        StoreRule::ReleaseStatuses(released) => {
            out.push_str("{\"statuses\":\"all except released\",\"released\":");
            array(out, released, |out, status| {
                let _ = write!(out, "{status}");
            });
            out.push('}');
        }
    }
}

/// Where a route reads its key, as a JSON string `kind:where`.
fn source(out: &mut String, source: &KeySource) {
    let text = match source {
        KeySource::Header(name) => format!("header:{name}"),
        KeySource::Json(pointer) => format!("json:{}", pointer.as_str()),
        KeySource::Form(field) => format!("form:{field}"),
        KeySource::CloudEvent => String::from("cloudevent:source+id"),
    };
    write_string(out, &text);
}

/// A JSON array of `items`, each written by `each`.
fn array<T>(out: &mut String, items: &[T], each: impl Fn(&mut String, &T)) {
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        each(out, item);
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigError;
    use alloc::string::ToString;
    use alloc::vec::Vec;
    use idemgate_json::Value;

    fn policy(text: &str) -> Policy {
        Policy::from_json(text, &|_| None).unwrap()
    }

    fn document_of(policy: &Policy, path: &str) -> Value {
        let answer = published(policy, "GET", path).unwrap();
        assert_eq!(answer.status, 200);
        assert_eq!(answer.header("content-type"), Some(JSON));
        Value::parse(core::str::from_utf8(&answer.body).unwrap()).unwrap()
    }

    fn texts(value: &Value) -> Vec<&str> {
        match value {
            Value::Array(items) => items.iter().map(|v| v.as_str().unwrap()).collect(),
            other => panic!("not an array: {other:?}"),
        }
    }

    #[test]
    fn the_default_policy_is_published_at_the_well_known_path() {
        let defaults = Policy::defaults();
        let doc = document_of(&defaults, "/.well-known/idempotency");
        assert_eq!(doc.get("header").unwrap().as_str(), Some("idempotency-key"));
        let key = doc.get("key").unwrap();
        assert_eq!(key.get("max_length").unwrap().as_u64(), Some(255));
        assert_eq!(
            doc.get("expires_after_seconds").unwrap().as_u64(),
            Some(86_400)
        );
        assert_eq!(
            doc.get("in_flight_lease_seconds").unwrap().as_u64(),
            Some(60)
        );
        assert_eq!(doc.get("fingerprint").unwrap().as_str(), Some("auto"));
        let stored = doc.get("stored").unwrap();
        let Some(Value::Array(released)) = stored.get("released") else {
            panic!("{stored:?}");
        };
        assert_eq!(
            released.len(),
            crate::policy::DEFAULT_RELEASE_STATUSES.len()
        );
        let Some(Value::Array(routes)) = doc.get("routes") else {
            panic!("{doc:?}");
        };
        assert_eq!(routes.len(), 1);
        assert_eq!(routes[0].get("prefix").unwrap().as_str(), Some("/"));
        assert_eq!(routes[0].get("key").unwrap().as_str(), Some("optional"));
        assert_eq!(
            texts(routes[0].get("methods").unwrap()),
            defaults.routes[0].methods
        );
        assert_eq!(
            texts(routes[0].get("key_from").unwrap()),
            ["header:idempotency-key"]
        );
        // The same request with a query is the same document; anything else is not it.
        assert!(published(&defaults, "GET", "/.well-known/idempotency?v=1").is_some());
        assert!(published(&defaults, "POST", "/.well-known/idempotency").is_none());
        assert!(published(&defaults, "GET", "/.well-known/idempotency/x").is_none());
        assert!(published(&defaults, "GET", "/orders").is_none());
    }

    #[test]
    fn each_route_says_where_its_key_comes_from_and_whether_it_is_required() {
        let policy = policy(
            r#"{"ttl": "1h", "lease": "30s", "store_responses": "2xx",
                "routes": [
                  {"prefix": "/orders", "methods": ["POST"], "key": "required"},
                  {"prefix": "/hooks", "methods": ["POST"], "kind": "callback",
                   "key_from": [{"json": "/id"}, {"header": "X-Delivery"}]}
                ]}"#,
        );
        let doc = document_of(&policy, "/.well-known/idempotency");
        assert_eq!(
            doc.get("expires_after_seconds").unwrap().as_u64(),
            Some(3600)
        );
        assert_eq!(
            doc.get("in_flight_lease_seconds").unwrap().as_u64(),
            Some(30)
        );
        assert_eq!(
            doc.get("stored").unwrap().get("statuses").unwrap().as_str(),
            Some("2xx")
        );
        let Some(Value::Array(routes)) = doc.get("routes") else {
            panic!("{doc:?}");
        };
        let described: Vec<(&str, &str, &str, Vec<&str>)> = routes
            .iter()
            .map(|r| {
                (
                    r.get("prefix").unwrap().as_str().unwrap(),
                    r.get("key").unwrap().as_str().unwrap(),
                    r.get("kind").unwrap().as_str().unwrap(),
                    texts(r.get("key_from").unwrap()),
                )
            })
            .collect();
        assert_eq!(
            described,
            [
                ("/orders", "required", "api", vec!["header:idempotency-key"]),
                (
                    "/hooks",
                    "required",
                    "callback",
                    vec!["json:/id", "header:x-delivery"]
                ),
            ]
        );
    }

    #[test]
    fn the_path_is_configurable_or_off() {
        let elsewhere = policy(r#"{"policy_path": "/idempotency.json"}"#);
        assert!(published(&elsewhere, "GET", "/idempotency.json").is_some());
        assert!(published(&elsewhere, "GET", "/.well-known/idempotency").is_none());
        let off = policy(r#"{"policy_path": false}"#);
        assert!(published(&off, "GET", "/.well-known/idempotency").is_none());
        for bad in [
            r#"{"policy_path": "idempotency"}"#,
            r#"{"policy_path": "/a?b"}"#,
        ] {
            let error = Policy::from_json(bad, &|_| None).unwrap_err();
            assert!(error.to_string().contains("policy_path"), "{bad}: {error}");
        }
        for bad in [r#"{"policy_path": true}"#, r#"{"policy_path": 1}"#] {
            match Policy::from_json(bad, &|_| None) {
                Err(ConfigError::Syntax { message }) => {
                    assert!(message.contains("policy_path"), "{bad}: {message}")
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
