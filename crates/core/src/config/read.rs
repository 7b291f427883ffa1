//! Reading a configuration document into [`Config`]: an explicit mapping, field by field.
//!
//! Every object refuses members it does not know (a typo must not silently become a default), every
//! optional field accepts `null` as "not given", and every error is [`ConfigError::Syntax`] with a
//! message that starts with the field's path (`routes[0].methods[1]`) and says what was expected.
//! Values are never echoed except the spelling of an unknown choice, so a secret cannot leak into
//! Envoy's log through a type error.

use super::{
    Config, ConfigError, FailureConfig, FingerprintConfig, ForwardConfig, KeyConfig, ModeConfig,
    RouteConfig, ScopeConfig, Size, StoreBackendConfig, StoreConfig, TokenConfig,
    TokenRequirementConfig, UpstreamConfig,
};
use super::{KeySourceConfig, RouteKindConfig, SignatureConfig, SignatureSchemeConfig};
use crate::json::Value;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

const CONFIG_FIELDS: &[&str] = &[
    "header",
    "routes",
    "scope",
    "fingerprint",
    "ttl",
    "lease",
    "replay_headers",
    "store_responses",
    "release_statuses",
    "max_request_body",
    "hashing_budget",
    "max_response_body",
    "capacity",
    "records_per_cell",
    "scope_quota",
    "peer_quota",
    "on_store_full",
    "on_store_error",
    "token",
    "upstream",
    "store",
];
const STORE_FIELDS: &[&str] = &["kind", "cluster", "timeout"];
const ROUTE_FIELDS: &[&str] = &[
    "prefix",
    "methods",
    "key",
    "token",
    "forward",
    "cluster",
    "upstream_timeout",
    "case_sensitive",
    "kind",
    "key_from",
    "signature",
];
const SIGNATURE_FIELDS: &[&str] = &["scheme", "secret", "secret_env", "tolerance"];
const UPSTREAM_FIELDS: &[&str] = &["cluster", "timeout", "max_body"];
const FINGERPRINT_FIELDS: &[&str] = &["mode", "headers", "fields", "max_depth"];
const TOKEN_FIELDS: &[&str] = &["secret", "secret_env", "ttl", "issue_path", "header"];

impl Config {
    /// Parses a configuration document (JSON text) without validating the values; see
    /// [`Config::compile`] for that.
    pub fn from_json(text: &str) -> Result<Config, ConfigError> {
        let doc = Value::parse(text).map_err(|e| ConfigError::Syntax {
            message: e.to_string(),
        })?;
        Config::from_document(&doc)
    }

    /// Maps a parsed document onto the configuration's shape.
    pub fn from_document(doc: &Value) -> Result<Config, ConfigError> {
        let mut c = Config::default();
        for (key, value) in members("", doc)? {
            let at = key.as_str();
            match at {
                "header" => c.header = opt(value, |v| string(at, v))?,
                "routes" => c.routes = opt(value, |v| list(at, v, route))?,
                "scope" => c.scope = opt(value, |v| list(at, v, scope_source))?,
                "fingerprint" => c.fingerprint = opt(value, |v| fingerprint(at, v))?,
                "ttl" => c.ttl = opt(value, |v| string(at, v))?,
                "lease" => c.lease = opt(value, |v| string(at, v))?,
                "replay_headers" => c.replay_headers = opt(value, |v| list(at, v, string))?,
                "store_responses" => {
                    c.store_responses = opt(value, |v| {
                        choice(
                            at,
                            v,
                            &[
                                ("not_done", StoreConfig::NotDone),
                                ("all", StoreConfig::All),
                                ("2xx", StoreConfig::Success),
                            ],
                        )
                    })?
                }
                "release_statuses" => c.release_statuses = opt(value, |v| list(at, v, integer))?,
                "max_request_body" => c.max_request_body = opt(value, |v| size(at, v))?,
                "hashing_budget" => c.hashing_budget = opt(value, |v| size(at, v))?,
                "max_response_body" => c.max_response_body = opt(value, |v| size(at, v))?,
                "capacity" => c.capacity = opt(value, |v| integer(at, v))?,
                "records_per_cell" => c.records_per_cell = opt(value, |v| integer(at, v))?,
                "scope_quota" => c.scope_quota = opt(value, |v| integer(at, v))?,
                "peer_quota" => c.peer_quota = opt(value, |v| integer(at, v))?,
                "on_store_full" => c.on_store_full = opt(value, |v| failure(at, v))?,
                "on_store_error" => c.on_store_error = opt(value, |v| failure(at, v))?,
                "token" => c.token = opt(value, |v| token(at, v))?,
                "upstream" => c.upstream = opt(value, |v| upstream(at, v))?,
                "store" => c.store = opt(value, |v| store_backend(at, v))?,
                _ => return Err(unknown("", key, CONFIG_FIELDS)),
            }
        }
        Ok(c)
    }
}

fn route(path: &str, value: &Value) -> Result<RouteConfig, ConfigError> {
    let mut prefix = None;
    let mut methods = None;
    let mut key_rule = None;
    let mut token_rule = None;
    let mut case_sensitive = None;
    let mut forward = None;
    let mut cluster = None;
    let mut upstream_timeout = None;
    let mut kind = None;
    let mut key_from = None;
    let mut signature_rule = None;
    for (key, value) in members(path, value)? {
        let at = join(path, key);
        match key.as_str() {
            "prefix" => prefix = Some(string(&at, value)?),
            "methods" => methods = opt(value, |v| list(&at, v, string))?,
            "key" => {
                key_rule = opt(value, |v| {
                    choice(
                        &at,
                        v,
                        &[
                            ("required", KeyConfig::Required),
                            ("optional", KeyConfig::Optional),
                        ],
                    )
                })?
            }
            "token" => {
                token_rule = opt(value, |v| {
                    choice(
                        &at,
                        v,
                        &[
                            ("none", TokenRequirementConfig::None),
                            ("required", TokenRequirementConfig::Required),
                        ],
                    )
                })?
            }
            "case_sensitive" => case_sensitive = opt(value, |v| boolean(&at, v))?,
            "forward" => {
                forward = opt(value, |v| {
                    choice(
                        &at,
                        v,
                        &[
                            ("detached", ForwardConfig::Detached),
                            ("router", ForwardConfig::Router),
                        ],
                    )
                })?
            }
            "cluster" => cluster = opt(value, |v| string(&at, v))?,
            "upstream_timeout" => upstream_timeout = opt(value, |v| string(&at, v))?,
            "kind" => {
                kind = opt(value, |v| {
                    choice(
                        &at,
                        v,
                        &[
                            ("api", RouteKindConfig::Api),
                            ("callback", RouteKindConfig::Callback),
                        ],
                    )
                })?
            }
            "key_from" => key_from = opt(value, |v| list(&at, v, key_source))?,
            "signature" => signature_rule = opt(value, |v| signature(&at, v))?,
            _ => return Err(unknown(path, key, ROUTE_FIELDS)),
        }
    }
    Ok(RouteConfig {
        kind,
        key_from,
        signature: signature_rule,
        prefix: prefix.ok_or_else(|| shape(&join(path, "prefix"), "missing field"))?,
        methods,
        key: key_rule,
        token: token_rule,
        case_sensitive,
        forward,
        cluster,
        upstream_timeout,
    })
}

fn upstream(path: &str, value: &Value) -> Result<UpstreamConfig, ConfigError> {
    let mut u = UpstreamConfig::default();
    for (key, value) in members(path, value)? {
        let at = join(path, key);
        match key.as_str() {
            "cluster" => u.cluster = opt(value, |v| string(&at, v))?,
            "timeout" => u.timeout = opt(value, |v| string(&at, v))?,
            "max_body" => u.max_body = opt(value, |v| size(&at, v))?,
            _ => return Err(unknown(path, key, UPSTREAM_FIELDS)),
        }
    }
    Ok(u)
}

fn store_backend(path: &str, value: &Value) -> Result<StoreBackendConfig, ConfigError> {
    let mut s = StoreBackendConfig::default();
    for (key, value) in members(path, value)? {
        let at = join(path, key);
        match key.as_str() {
            "kind" => s.kind = opt(value, |v| string(&at, v))?,
            "cluster" => s.cluster = opt(value, |v| string(&at, v))?,
            "timeout" => s.timeout = opt(value, |v| string(&at, v))?,
            _ => return Err(unknown(path, key, STORE_FIELDS)),
        }
    }
    Ok(s)
}

/// `{"header": name}`, `{"json": pointer}` or `{"form": field}`.
fn key_source(path: &str, value: &Value) -> Result<KeySourceConfig, ConfigError> {
    const EXPECTED: &str = "expected {\"header\": name}, {\"json\": pointer} or {\"form\": field}";
    match value {
        Value::Object(members) => match members.as_slice() {
            [(key, value)] => {
                let at = join(path, key);
                match key.as_str() {
                    "header" => Ok(KeySourceConfig::Header(string(&at, value)?)),
                    "json" => Ok(KeySourceConfig::Json(string(&at, value)?)),
                    "form" => Ok(KeySourceConfig::Form(string(&at, value)?)),
                    _ => Err(shape(&at, format!("unknown key source; {EXPECTED}"))),
                }
            }
            _ => Err(shape(path, EXPECTED)),
        },
        other => Err(shape(path, format!("{EXPECTED}, found {}", other.kind()))),
    }
}

fn signature(path: &str, value: &Value) -> Result<SignatureConfig, ConfigError> {
    let mut scheme = None;
    let mut sig = SignatureConfig {
        scheme: SignatureSchemeConfig::GitHub,
        secret: None,
        secret_env: None,
        tolerance: None,
    };
    for (key, value) in members(path, value)? {
        let at = join(path, key);
        match key.as_str() {
            "scheme" => {
                scheme = Some(choice(
                    &at,
                    value,
                    &[
                        ("github", SignatureSchemeConfig::GitHub),
                        ("stripe", SignatureSchemeConfig::Stripe),
                    ],
                )?)
            }
            "secret" => sig.secret = opt(value, |v| string(&at, v))?,
            "secret_env" => sig.secret_env = opt(value, |v| string(&at, v))?,
            "tolerance" => sig.tolerance = opt(value, |v| string(&at, v))?,
            _ => return Err(unknown(path, key, SIGNATURE_FIELDS)),
        }
    }
    sig.scheme = scheme.ok_or_else(|| shape(&join(path, "scheme"), "missing field"))?;
    Ok(sig)
}

/// `"peer"`, `{"header": name}` or `{"property": [segment, ...]}`.
fn scope_source(path: &str, value: &Value) -> Result<ScopeConfig, ConfigError> {
    const EXPECTED: &str =
        "expected \"peer\", {\"header\": name} or {\"property\": [segment, ...]}";
    match value {
        Value::String(s) if s == "peer" => Ok(ScopeConfig::Peer),
        Value::Object(members) => match members.as_slice() {
            [(key, value)] => {
                let at = join(path, key);
                match key.as_str() {
                    "header" => Ok(ScopeConfig::Header(string(&at, value)?)),
                    "property" => Ok(ScopeConfig::Property(list(&at, value, string)?)),
                    _ => Err(shape(&at, format!("unknown scope source; {EXPECTED}"))),
                }
            }
            _ => Err(shape(path, EXPECTED)),
        },
        Value::String(s) => Err(shape(
            path,
            format!("unknown scope source `{s}`; {EXPECTED}"),
        )),
        other => Err(shape(path, format!("{EXPECTED}, found {}", other.kind()))),
    }
}

fn fingerprint(path: &str, value: &Value) -> Result<FingerprintConfig, ConfigError> {
    let mut fp = FingerprintConfig {
        mode: None,
        headers: None,
        fields: None,
        max_depth: None,
    };
    for (key, value) in members(path, value)? {
        let at = join(path, key);
        match key.as_str() {
            "mode" => {
                fp.mode = opt(value, |v| {
                    choice(
                        &at,
                        v,
                        &[
                            ("auto", ModeConfig::Auto),
                            ("raw", ModeConfig::Raw),
                            ("json", ModeConfig::Json),
                            ("form", ModeConfig::Form),
                            ("fields", ModeConfig::Fields),
                            ("none", ModeConfig::None),
                        ],
                    )
                })?
            }
            "headers" => fp.headers = opt(value, |v| list(&at, v, string))?,
            "fields" => fp.fields = opt(value, |v| list(&at, v, string))?,
            "max_depth" => fp.max_depth = opt(value, |v| integer(&at, v))?,
            _ => return Err(unknown(path, key, FINGERPRINT_FIELDS)),
        }
    }
    Ok(fp)
}

fn token(path: &str, value: &Value) -> Result<TokenConfig, ConfigError> {
    let mut t = TokenConfig {
        secret: None,
        secret_env: None,
        ttl: None,
        issue_path: None,
        header: None,
    };
    for (key, value) in members(path, value)? {
        let at = join(path, key);
        let slot = match key.as_str() {
            "secret" => &mut t.secret,
            "secret_env" => &mut t.secret_env,
            "ttl" => &mut t.ttl,
            "issue_path" => &mut t.issue_path,
            "header" => &mut t.header,
            _ => return Err(unknown(path, key, TOKEN_FIELDS)),
        };
        *slot = opt(value, |v| string(&at, v))?;
    }
    Ok(t)
}

fn failure(path: &str, value: &Value) -> Result<FailureConfig, ConfigError> {
    choice(
        path,
        value,
        &[
            ("reject", FailureConfig::Reject),
            ("pass_through", FailureConfig::PassThrough),
        ],
    )
}

/// A byte count (integer) or a size as text (`"64KiB"`, checked later by `compile`).
fn size(path: &str, value: &Value) -> Result<Size, ConfigError> {
    match value {
        Value::String(text) => Ok(Size::Text(text.clone())),
        Value::Number(n) => n.as_u64().map(Size::Bytes).ok_or_else(|| {
            shape(
                path,
                "expected a byte count (a non-negative integer) or a size such as \"64KiB\"",
            )
        }),
        other => Err(shape(
            path,
            format!(
                "expected a byte count or a size such as \"64KiB\", found {}",
                other.kind()
            ),
        )),
    }
}

// --- Shapes ---------------------------------------------------------------------------------

/// A shape error at `path` (empty for the document itself).
fn shape(path: &str, reason: impl core::fmt::Display) -> ConfigError {
    ConfigError::Syntax {
        message: if path.is_empty() {
            format!("the document: {reason}")
        } else {
            format!("`{path}`: {reason}")
        },
    }
}

fn unknown(path: &str, key: &str, expected: &[&str]) -> ConfigError {
    let mut names = String::new();
    for (i, name) in expected.iter().enumerate() {
        if i > 0 {
            names.push_str(", ");
        }
        names.push('`');
        names.push_str(name);
        names.push('`');
    }
    shape(
        &join(path, key),
        format!("unknown field, expected one of {names}"),
    )
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.into()
    } else {
        format!("{path}.{key}")
    }
}

/// `null` is "not given", like a missing member.
fn opt<T>(
    value: &Value,
    read: impl FnOnce(&Value) -> Result<T, ConfigError>,
) -> Result<Option<T>, ConfigError> {
    if value.is_null() {
        Ok(None)
    } else {
        read(value).map(Some)
    }
}

fn members<'v>(path: &str, value: &'v Value) -> Result<&'v [(String, Value)], ConfigError> {
    value
        .as_object()
        .ok_or_else(|| shape(path, format!("expected an object, found {}", value.kind())))
}

fn boolean(path: &str, value: &Value) -> Result<bool, ConfigError> {
    value.as_bool().ok_or_else(|| {
        shape(
            path,
            format!("expected true or false, found {}", value.kind()),
        )
    })
}

fn string(path: &str, value: &Value) -> Result<String, ConfigError> {
    value
        .as_str()
        .map(String::from)
        .ok_or_else(|| shape(path, format!("expected a string, found {}", value.kind())))
}

/// An array whose items `read` maps; item paths are `path[i]`.
fn list<T>(
    path: &str,
    value: &Value,
    read: impl Fn(&str, &Value) -> Result<T, ConfigError>,
) -> Result<Vec<T>, ConfigError> {
    let items = value
        .as_array()
        .ok_or_else(|| shape(path, format!("expected an array, found {}", value.kind())))?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| read(&format!("{path}[{i}]"), item))
        .collect()
}

/// A non-negative integer that fits `T`; the message gives the range.
fn integer<T: TryFrom<u64> + Bounded>(path: &str, value: &Value) -> Result<T, ConfigError> {
    value
        .as_u64()
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| {
            let found = match value {
                Value::Number(n) => n.as_str(),
                other => other.kind(),
            };
            shape(
                path,
                format!("expected an integer from 0 to {}, found {found}", T::MAX),
            )
        })
}

/// The largest value of an integer field, for error messages.
trait Bounded {
    const MAX: u64;
}
impl Bounded for u16 {
    const MAX: u64 = u16::MAX as u64;
}
impl Bounded for u32 {
    const MAX: u64 = u32::MAX as u64;
}

/// One of the strings in `options`.
fn choice<T: Copy>(path: &str, value: &Value, options: &[(&str, T)]) -> Result<T, ConfigError> {
    let mut names = String::new();
    for (i, (name, _)) in options.iter().enumerate() {
        if i > 0 {
            names.push_str(", ");
        }
        names.push('"');
        names.push_str(name);
        names.push('"');
    }
    let Some(text) = value.as_str() else {
        return Err(shape(
            path,
            format!("expected one of {names}, found {}", value.kind()),
        ));
    };
    options
        .iter()
        .find(|(name, _)| *name == text)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            shape(
                path,
                format!("unknown value \"{text}\", expected one of {names}"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(text: &str) -> String {
        match Config::from_json(text) {
            Err(ConfigError::Syntax { message }) => message,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn errors_name_the_field_and_the_reason() {
        let cases = [
            ("[]", "the document: expected an object, found an array"),
            ("{\"ttll\": \"1h\"}", "`ttll`: unknown field, expected one of `header`"),
            (
                "{\"routes\": [{\"prefix\": \"/\", \"method\": []}]}",
                "`routes[0].method`: unknown field, expected one of `prefix`, `methods`, `key`, `token`",
            ),
            ("{\"routes\": [{}]}", "`routes[0].prefix`: missing field"),
            (
                "{\"capacity\": \"many\"}",
                "`capacity`: expected an integer from 0 to 4294967295, found a string",
            ),
            (
                "{\"records_per_cell\": 70000}",
                "`records_per_cell`: expected an integer from 0 to 65535, found 70000",
            ),
            (
                "{\"release_statuses\": [200, -1]}",
                "`release_statuses[1]`: expected an integer from 0 to 65535, found -1",
            ),
            (
                "{\"on_store_full\": \"explode\"}",
                "`on_store_full`: unknown value \"explode\", expected one of \"reject\", \"pass_through\"",
            ),
            ("{\"scope\": [\"peer\", {\"cookie\": \"x\"}]}", "`scope[1].cookie`: unknown scope source"),
            ("{\"scope\": [{\"header\": 1}]}", "`scope[0].header`: expected a string, found a number"),
            ("{\"token\": {\"secret\": 12345678901234567890}}", "`token.secret`: expected a string, found a number"),
            ("{\"max_request_body\": 1.5}", "`max_request_body`: expected a byte count"),
            ("{\"ttl\": \"1h\", \"ttl\": \"2h\"}", "duplicate key `ttl` at byte 14"),
            ("{ttl: 24h}", "JSON syntax error at byte 1"),
        ];
        for (text, want) in cases {
            let got = message(text);
            assert!(
                got.starts_with(want) || got == want,
                "{text}\n  got  {got}\n  want {want}"
            );
        }
    }

    #[test]
    fn null_means_not_given() {
        let c = Config::from_json(
            r#"{"header": null, "routes": [{"prefix": "/a", "methods": null}], "token": {"ttl": null}}"#,
        )
        .unwrap();
        assert!(c.header.is_none());
        let routes = c.routes.unwrap();
        assert_eq!(routes[0].prefix, "/a");
        assert!(routes[0].methods.is_none());
        assert!(c.token.unwrap().ttl.is_none());
    }

    #[test]
    fn every_field_reads() {
        let c = Config::from_json(
            r#"{"header":"h","routes":[{"prefix":"/","methods":["POST"],"key":"required","token":"none"}],
                "scope":["peer",{"header":"x"},{"property":["a","b"]}],
                "fingerprint":{"mode":"fields","headers":["h"],"fields":["/a"],"max_depth":3},
                "ttl":"1h","lease":"1s","replay_headers":["a"],"store_responses":"2xx",
                "release_statuses":[500],"max_request_body":"1KiB","max_response_body":10,
                "capacity":5,"records_per_cell":2,"on_store_full":"pass_through",
                "on_store_error":"reject","token":{"secret":"s","secret_env":"E","ttl":"1m",
                "issue_path":"/t","header":"t"}}"#,
        )
        .unwrap();
        let shown = format!("{c:?}");
        for part in [
            "Required",
            "Property([\"a\", \"b\"])",
            "Fields",
            "max_depth: Some(3)",
            "Success",
            "Text(\"1KiB\")",
            "Bytes(10)",
            "PassThrough",
            "issue_path: Some(\"/t\")",
        ] {
            assert!(shown.contains(part), "{part} missing from {shown}");
        }
    }
}
