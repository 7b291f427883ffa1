//! The operator's view of records: which storage key a client's request used, what the
//! record under it holds, and how the store is used. Shared by the `records`/`stats` commands
//! ([`crate::cli`]) and the admin port ([`crate::admin`]), so both answer the same.
//!
//! The storage key is derived **by the core**, from the same parts the filter hashes: the filter's
//! policy matches the method and path to its route (normalised, lower-cased unless the route is
//! case-sensitive), a callback route is its own scope, and otherwise the scope is the value the
//! client sent for the configured source. Nothing here re-implements that derivation.

use crate::engine::{Survey, UsageOfScope};
use idemgate_core::client::scope::{QuotaClass, QuotaTag, Scope, StorageKey};
use idemgate_core::policy::Policy;
use idemgate_core::request::key::IdempotencyKey;
use idemgate_core::store::record::{Record, StoredBody};
use idemgate_core::store::remote::StoredValue;
use idemgate_core::time::UnixMillis;
use std::fmt::{self, Write as _};
use std::path::Path;

/// What names one record, as an operator knows it: the client's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The idempotency key as the client sent it.
    pub key: String,
    /// The scope value as the client sent it (an `Authorization` header value, a peer address
    /// without its port, a JWT claim). `None` on a callback route, which is its own scope.
    pub scope: Option<String>,
    /// The scope source's label (`header:authorization`, `peer`, `property:…`); `None`: the
    /// policy's first configured source.
    pub scope_source: Option<String>,
    pub method: String,
    /// The request path as the client sent it; the policy's route rules normalise it.
    pub route: String,
}

/// Why a query names no storage key.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum QueryError {
    /// The key is not one the filter accepts (empty, too long, bad characters).
    BadKey(String),
    /// No route of the policy guards this method and path: the filter stores nothing for it.
    NoRoute { method: String, route: String },
    /// The route is not a callback route and no scope value was given.
    NoScope,
    /// The policy configures no scope source, or not the one named.
    UnknownScopeSource(String),
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueryError::BadKey(why) => write!(f, "--key: {why}"),
            QueryError::NoRoute { method, route } => write!(
                f,
                "--route: no route of the policy guards {method} {route} (see --policy, --method)"
            ),
            QueryError::NoScope => f.write_str(
                "--scope: the route is not a callback route, so the client's scope value is needed \
                 (e.g. its Authorization header value, or its address without the port)",
            ),
            QueryError::UnknownScopeSource(name) => write!(
                f,
                "--scope-source: {name:?} is not a scope source of the policy"
            ),
        }
    }
}

impl std::error::Error for QueryError {}

impl Query {
    /// The storage key the filter running `policy` uses for this request.
    pub fn storage_key(&self, policy: &Policy) -> Result<StorageKey, QueryError> {
        let key = IdempotencyKey::parse(self.key.as_bytes())
            .map_err(|e| QueryError::BadKey(e.to_string()))?;
        let matched = policy
            .match_request(&self.method, &self.route)
            .ok_or_else(|| QueryError::NoRoute {
                method: self.method.clone(),
                route: self.route.clone(),
            })?;
        if let Some(own) = matched.route.own_scope() {
            return Ok(StorageKey::derive(own, &self.method, &matched.path, &key));
        }
        let value = self.scope.as_deref().ok_or(QueryError::NoScope)?;
        let labels: Vec<String> = policy.scope.iter().map(|s| s.label()).collect();
        let source = match &self.scope_source {
            Some(name) if labels.contains(name) => name.clone(),
            Some(name) => return Err(QueryError::UnknownScopeSource(name.clone())),
            None => labels
                .first()
                .cloned()
                .ok_or_else(|| QueryError::UnknownScopeSource("(none configured)".into()))?,
        };
        let scope = Scope {
            source: &source,
            value: value.as_bytes(),
        };
        Ok(StorageKey::derive(scope, &self.method, &matched.path, &key))
    }
}

/// The policy storage keys are derived with: the filter's JSON configuration in `path`
/// (`--policy`), or the filter's defaults.
pub fn load_policy(path: Option<&Path>) -> Result<Policy, String> {
    let Some(path) = path else {
        return Ok(Policy::defaults());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--policy: cannot read {}: {e}", path.display()))?;
    // Storage keys only: the secrets the filter's configuration names stay with the Envoys.
    Policy::for_storage_keys(&text).map_err(|e| format!("--policy: {}: {e}", path.display()))
}

/// The tag stats group by: which scope's share a record counts against (bytes 4..8 of its
/// storage key, a hash of the scope — never the scope or a key in clear).
pub fn scope_tag_hex(tag: QuotaTag) -> String {
    idemgate_core::hash::to_hex(&tag.0)
}

/// The record `bytes` (the value under `key`) as JSON, judged at `now` (the engine's clock).
/// `with_body`: include a kept body, base64.
pub fn record_json(key: &StorageKey, bytes: &[u8], now: UnixMillis, with_body: bool) -> String {
    let mut out = String::from("{");
    let _ = write!(
        out,
        "\"storage_key\":\"{}\",\"scope_tag\":\"{}\",",
        key.to_hex(),
        scope_tag_hex(key.quota_tag())
    );
    let value = match StoredValue::decode(key, bytes) {
        Ok(value) => value,
        Err(e) => {
            let _ = write!(
                out,
                "\"state\":\"corrupt\",\"error\":{},\"value_bytes\":{}}}",
                json_string(&e.to_string()),
                bytes.len()
            );
            return out;
        }
    };
    let expires = |out: &mut String, at: UnixMillis| {
        let _ = write!(
            out,
            "\"expires_at_ms\":{},\"expires_in_ms\":{}",
            at.0,
            at.0.saturating_sub(now.0)
        );
    };
    match &value.record {
        Record::InFlight(claim) => {
            let _ = write!(
                out,
                "\"state\":\"in_flight\",\"lease_until_ms\":{},\"lease_left_ms\":{},",
                claim.lease_until.0,
                claim.lease_until.0.saturating_sub(now.0)
            );
            expires(&mut out, claim.expires_at);
        }
        Record::Completed(done) => {
            let response = &done.response;
            let _ = write!(
                out,
                "\"state\":\"completed\",\"status\":{},\"headers\":[",
                response.status
            );
            for (i, (name, value)) in response.headers.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(out, "[{},{}]", json_string(name), json_string(value));
            }
            out.push_str("],");
            match &response.body {
                StoredBody::Kept(body) => {
                    let _ = write!(out, "\"body_kept\":true,\"body_bytes\":{},", body.len());
                    if with_body {
                        let _ = write!(out, "\"body_base64\":\"{}\",", base64(body));
                    }
                }
                StoredBody::NotKept => out.push_str("\"body_kept\":false,"),
            }
            expires(&mut out, done.expires_at);
        }
        Record::TokenUsed { expires_at } => {
            out.push_str("\"state\":\"token_used\",");
            expires(&mut out, *expires_at);
        }
        // A record kind this build does not know: say so rather than guess.
        _ => out.push_str("\"state\":\"unknown\""),
    }
    out.push('}');
    out
}

/// The answer for a key that holds no record.
pub fn absent_json(key: &StorageKey) -> String {
    format!(
        "{{\"storage_key\":\"{}\",\"scope_tag\":\"{}\",\"state\":\"absent\"}}",
        key.to_hex(),
        scope_tag_hex(key.quota_tag())
    )
}

/// What an eviction did, and what it means for the client.
pub fn evicted_json(key: &StorageKey, evicted: bool) -> String {
    let meaning = if evicted {
        "the record is gone: the next request with this key runs again at the upstream"
    } else {
        "no record was held under this key"
    };
    format!(
        "{{\"storage_key\":\"{}\",\"evicted\":{evicted},\"meaning\":{}}}",
        key.to_hex(),
        json_string(meaning)
    )
}

/// One structured line per eviction (the record events' target and key hash, see [`crate::log`]):
/// never the client's key or scope in clear. `via`: `cli` or `admin`.
pub fn log_eviction(key: &StorageKey, evicted: bool, via: &str) {
    if evicted {
        crate::log::record_event_via(crate::log::RecordEvent::Evicted, key, via);
    }
}

/// `stats` as JSON: totals, then the scopes holding the most records.
pub fn survey_json(survey: &Survey) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "{{\"records\":{},\"bytes\":{},\"complete\":{},\"top_scopes\":[",
        survey.records, survey.bytes, survey.complete
    );
    for (i, scope) in survey.top.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&usage_json(scope));
    }
    out.push_str("]}");
    out
}

fn usage_json(scope: &UsageOfScope) -> String {
    let class = match scope.tag.class() {
        QuotaClass::Peer => "peer",
        QuotaClass::Identified => "identified",
    };
    format!(
        "{{\"scope_tag\":\"{}\",\"class\":\"{class}\",\"records\":{},\"bytes\":{}}}",
        scope_tag_hex(scope.tag),
        scope.records,
        scope.bytes
    )
}

/// A JSON string literal (RFC 8259 escapes).
pub fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Standard base64 with padding (RFC 4648 §4).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(route: &str, scope: Option<&str>) -> Query {
        Query {
            key: "order-1".into(),
            scope: scope.map(String::from),
            scope_source: None,
            method: "POST".into(),
            route: route.into(),
        }
    }

    #[test]
    fn the_key_is_the_core_derivation_of_the_filters_parts() {
        let policy = Policy::defaults();
        let key = IdempotencyKey::parse(b"order-1").unwrap();
        let scope = Scope {
            source: "header:authorization",
            value: b"Bearer alice",
        };
        // The default route is case-insensitive and normalises the path, as the filter does.
        let expected = StorageKey::derive(scope, "POST", "/orders/7", &key);
        for route in ["/orders/7", "/Orders/./7", "/orders//7"] {
            assert_eq!(
                query(route, Some("Bearer alice")).storage_key(&policy),
                Ok(expected),
                "{route}"
            );
        }
        let mut peer = query("/orders/7", Some("10.0.0.1"));
        peer.scope_source = Some("peer".into());
        let peer_scope = Scope {
            source: "peer",
            value: b"10.0.0.1",
        };
        assert_eq!(
            peer.storage_key(&policy),
            Ok(StorageKey::derive(peer_scope, "POST", "/orders/7", &key))
        );
    }

    #[test]
    fn bad_queries_are_typed_errors() {
        let policy = Policy::defaults();
        assert_eq!(
            query("/orders", None).storage_key(&policy),
            Err(QueryError::NoScope)
        );
        let mut q = query("/orders", Some("x"));
        q.key = String::new();
        assert!(matches!(q.storage_key(&policy), Err(QueryError::BadKey(_))));
        let mut q = query("/orders", Some("x"));
        q.method = "GET".into();
        assert!(matches!(
            q.storage_key(&policy),
            Err(QueryError::NoRoute { .. })
        ));
        let mut q = query("/orders", Some("x"));
        q.scope_source = Some("header:x-api-key".into());
        assert!(matches!(
            q.storage_key(&policy),
            Err(QueryError::UnknownScopeSource(_))
        ));
    }

    #[test]
    fn base64_and_json_strings() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(json_string("a\"b\\\n\u{1}"), "\"a\\\"b\\\\\\n\\u0001\"");
    }
}
