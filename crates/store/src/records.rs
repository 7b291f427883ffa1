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
use idemgate_core::record::{Record, StoredBody};
use idemgate_core::request::key::IdempotencyKey;
use idemgate_core::store::remote::StoredValue;
use idemgate_core::time::UnixMillis;
use serde::Serialize;
use std::fmt;
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
            return Ok(matched.storage_key(own, &self.method, &key));
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
        Ok(matched.storage_key(scope, &self.method, &key))
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

/// What `records get` and the admin port show of one storage key: its record's state and times,
/// judged on the engine's clock. Serialized as one JSON object.
#[derive(Debug, Serialize)]
pub struct RecordView {
    storage_key: String,
    scope_tag: String,
    #[serde(flatten)]
    state: RecordState,
}

/// A record's state and what the operator needs of it (`"state"` names it). Times are the
/// engine's Unix milliseconds; `*_left_ms`/`*_in_ms` count from the moment it was read.
#[derive(Debug, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
enum RecordState {
    /// The key holds no record.
    Absent,
    /// Bytes the core cannot read as a record of this key.
    Corrupt { error: String, value_bytes: usize },
    InFlight {
        lease_until_ms: u64,
        lease_left_ms: u64,
        expires_at_ms: u64,
        expires_in_ms: u64,
    },
    Completed {
        status: u16,
        /// `[name, value]` pairs, as stored.
        headers: Vec<(String, String)>,
        body_kept: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        body_bytes: Option<usize>,
        #[serde(skip_serializing_if = "Option::is_none")]
        body_base64: Option<String>,
        expires_at_ms: u64,
        expires_in_ms: u64,
    },
    TokenUsed {
        expires_at_ms: u64,
        expires_in_ms: u64,
    },
    /// A record kind this build does not know: said so rather than guessed.
    Unknown,
}

impl RecordView {
    /// The record `bytes` (the value under `key`), judged at `now` (the engine's clock).
    /// `with_body`: include a kept body, base64.
    pub fn of(key: &StorageKey, bytes: &[u8], now: UnixMillis, with_body: bool) -> RecordView {
        let left = |at: UnixMillis| at.0.saturating_sub(now.0);
        let state = match StoredValue::decode(key, bytes) {
            Err(e) => RecordState::Corrupt {
                error: e.to_string(),
                value_bytes: bytes.len(),
            },
            Ok(value) => match value.record {
                Record::InFlight(claim) => RecordState::InFlight {
                    lease_until_ms: claim.lease_until.0,
                    lease_left_ms: left(claim.lease_until),
                    expires_at_ms: claim.expires_at.0,
                    expires_in_ms: left(claim.expires_at),
                },
                Record::Completed(done) => {
                    let response = done.response;
                    let (body_kept, body_bytes, body_base64) = match &response.body {
                        StoredBody::Kept(body) => {
                            (true, Some(body.len()), with_body.then(|| base64(body)))
                        }
                        StoredBody::NotKept => (false, None, None),
                    };
                    RecordState::Completed {
                        status: response.status,
                        headers: response.headers,
                        body_kept,
                        body_bytes,
                        body_base64,
                        expires_at_ms: done.expires_at.0,
                        expires_in_ms: left(done.expires_at),
                    }
                }
                Record::TokenUsed { expires_at } => RecordState::TokenUsed {
                    expires_at_ms: expires_at.0,
                    expires_in_ms: left(expires_at),
                },
                _ => RecordState::Unknown,
            },
        };
        RecordView::with_state(key, state)
    }

    /// The answer for a key that holds no record.
    pub fn absent(key: &StorageKey) -> RecordView {
        RecordView::with_state(key, RecordState::Absent)
    }

    fn with_state(key: &StorageKey, state: RecordState) -> RecordView {
        RecordView {
            storage_key: key.to_hex(),
            scope_tag: scope_tag_hex(key.quota_tag()),
            state,
        }
    }
}

/// What an eviction did, and what it means for the client.
#[derive(Debug, Serialize)]
pub struct EvictionView {
    storage_key: String,
    evicted: bool,
    meaning: &'static str,
}

impl EvictionView {
    pub fn of(key: &StorageKey, evicted: bool) -> EvictionView {
        EvictionView {
            storage_key: key.to_hex(),
            evicted,
            meaning: if evicted {
                "the record is gone: the next request with this key runs again at the upstream"
            } else {
                "no record was held under this key"
            },
        }
    }
}

/// One structured line per eviction (the record events' target and key hash, see [`crate::log`]):
/// never the client's key or scope in clear. `via`: `cli` or `admin`.
pub fn log_eviction(key: &StorageKey, evicted: bool, via: &str) {
    if evicted {
        crate::log::record_event_via(crate::log::RecordEvent::Evicted, key, via);
    }
}

/// `stats`: totals, then the scopes holding the most records.
#[derive(Debug, Serialize)]
pub struct SurveyView {
    records: u64,
    bytes: u64,
    complete: bool,
    top_scopes: Vec<ScopeView>,
}

/// One scope's use of the store, by its tag (never the scope in clear).
#[derive(Debug, Serialize)]
struct ScopeView {
    scope_tag: String,
    class: &'static str,
    records: u64,
    bytes: u64,
}

impl SurveyView {
    pub fn of(survey: &Survey) -> SurveyView {
        SurveyView {
            records: survey.records,
            bytes: survey.bytes,
            complete: survey.complete,
            top_scopes: survey.top.iter().map(ScopeView::of).collect(),
        }
    }
}

impl ScopeView {
    fn of(scope: &UsageOfScope) -> ScopeView {
        ScopeView {
            scope_tag: scope_tag_hex(scope.tag),
            class: match scope.tag.class() {
                QuotaClass::Peer => "peer",
                QuotaClass::Identified => "identified",
            },
            records: scope.records,
            bytes: scope.bytes,
        }
    }
}

/// Standard base64 with padding (RFC 4648 §4), the core's one encoder.
fn base64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    idemgate_core::base64::encode(bytes, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use idemgate_core::record::{Completed, StoredResponse};
    use idemgate_core::request::fingerprint::Fingerprint;
    use idemgate_core::store::remote::ValueVersion;

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
    fn a_client_scoped_route_keeps_the_clients_keys_in_one_namespace() {
        let policy = Policy::for_storage_keys(
            r#"{"routes": [{"prefix": "/orders", "key_scope": "client"},
                           {"prefix": "/refunds", "key_scope": "client"}]}"#,
        )
        .unwrap();
        let key = IdempotencyKey::parse(b"order-1").unwrap();
        let scope = Scope {
            source: "header:authorization",
            value: b"Bearer alice",
        };
        // Where the filter keeps them: no method, no route.
        let expected = StorageKey::derive(scope, "", "", &key);
        for route in ["/orders/7", "/refunds"] {
            assert_eq!(
                query(route, Some("Bearer alice")).storage_key(&policy),
                Ok(expected),
                "{route}"
            );
        }
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
    fn base64_encodes_as_rfc_4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    fn json(view: &impl Serialize) -> String {
        serde_json::to_string(view).unwrap()
    }

    #[test]
    fn views_are_the_json_objects_the_readme_documents() {
        let key = StorageKey::from_stored([0xab; 32]);
        let hex = key.to_hex();
        let tag = scope_tag_hex(key.quota_tag());
        assert_eq!(
            json(&RecordView::absent(&key)),
            format!(r#"{{"storage_key":"{hex}","scope_tag":"{tag}","state":"absent"}}"#)
        );
        assert_eq!(
            json(&RecordView::of(&key, b"not a value", UnixMillis(5), false)),
            format!(
                r#"{{"storage_key":"{hex}","scope_tag":"{tag}","state":"corrupt","error":"{}","value_bytes":11}}"#,
                StoredValue::decode(&key, b"not a value").unwrap_err()
            )
        );
        let completed = |body: StoredBody| {
            let value = StoredValue {
                version: ValueVersion([1; 16]),
                record: Record::Completed(Completed {
                    fingerprint: Fingerprint([2; 32]),
                    response: StoredResponse {
                        status: 201,
                        headers: vec![("location".into(), "/o/\"7\"".into())],
                        body,
                        seal: None,
                    },
                    expires_at: UnixMillis(1_000),
                }),
            };
            value.encode(&key)
        };
        let kept = completed(StoredBody::Kept(b"fo".to_vec()));
        let head = format!(
            r#"{{"storage_key":"{hex}","scope_tag":"{tag}","state":"completed","status":201,"headers":[["location","/o/\"7\""]],"body_kept":true,"body_bytes":2,"#
        );
        assert_eq!(
            json(&RecordView::of(&key, &kept, UnixMillis(400), false)),
            format!(r#"{head}"expires_at_ms":1000,"expires_in_ms":600}}"#)
        );
        assert_eq!(
            json(&RecordView::of(&key, &kept, UnixMillis(400), true)),
            format!(r#"{head}"body_base64":"Zm8=","expires_at_ms":1000,"expires_in_ms":600}}"#)
        );
        let not_kept = completed(StoredBody::NotKept);
        assert!(json(&RecordView::of(&key, &not_kept, UnixMillis(2_000), true)).ends_with(
            r#""headers":[["location","/o/\"7\""]],"body_kept":false,"expires_at_ms":1000,"expires_in_ms":0}"#
        ));
        let used = StoredValue {
            version: ValueVersion([1; 16]),
            record: Record::TokenUsed {
                expires_at: UnixMillis(900),
            },
        };
        assert!(json(&RecordView::of(
            &key,
            &used.encode(&key),
            UnixMillis(100),
            false
        ))
        .ends_with(r#""state":"token_used","expires_at_ms":900,"expires_in_ms":800}"#));
        assert_eq!(
            json(&EvictionView::of(&key, false)),
            format!(
                r#"{{"storage_key":"{hex}","evicted":false,"meaning":"no record was held under this key"}}"#
            )
        );
        let survey = Survey {
            records: 4,
            bytes: 90,
            top: vec![UsageOfScope {
                tag: key.quota_tag(),
                records: 3,
                bytes: 70,
            }],
            complete: true,
        };
        assert_eq!(
            json(&SurveyView::of(&survey)),
            format!(
                r#"{{"records":4,"bytes":90,"complete":true,"top_scopes":[{{"scope_tag":"{tag}","class":"identified","records":3,"bytes":70}}]}}"#
            )
        );
    }
}
