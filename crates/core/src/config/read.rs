//! Reading a configuration document into [`Config`]: an explicit mapping, field by field.
//!
//! Every object refuses members it does not know (a typo must not silently become a default), every
//! optional field accepts `null` as "not given", and every error is [`ConfigError::Syntax`] with a
//! message that starts with the field's path (`routes[0].methods[1]`) and says what was expected.
//! Values are never echoed except the spelling of an unknown choice, so a secret cannot leak into
//! Envoy's log through a type error.

use super::{
    Config, ConfigError, FailureConfig, FingerprintConfig, ForwardConfig, KeyConfig, ModeConfig,
    RouteConfig, ScopeConfig, ShareAmount, SharesConfig, Size, StoreBackendConfig, StoreConfig,
    TokenConfig, TokenRequirementConfig, UpstreamConfig,
};
use super::{KeySourceConfig, RouteKindConfig, SignatureConfig, SignatureSchemeConfig};
use super::{OrderConfig, PassThroughConfig, PreconditionConfig, PresetConfig};
use crate::request::json::Value;
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;

// Each section's members, in the order its unknown-field error lists them. A member is looked up
// by its position in its section's list (one loop and a jump table, smaller than a `match` on the
// strings), so the readers' `Some(i)` arms follow these lists' order; `each_member_lands_in_its_field`
// below holds them together.
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
    "shares",
    "max_memory",
    "on_store_full",
    "on_store_error",
    "token",
    "upstream",
    "store",
    "hashing_budget_per_peer",
    "relay_budget",
    "relay_budget_per_peer",
];
const SHARES_FIELDS: &[&str] = &[
    "identity",
    "peer",
    "ipv4_prefix",
    "ipv6_prefix",
    "identity_bytes",
    "peer_bytes",
    "pressure",
];
const STORE_FIELDS: &[&str] = &[
    "kind",
    "cluster",
    "timeout",
    "record_secret_env",
    "record_secrets_env",
];
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
    "preset",
    "pass_through",
    "order",
    "precondition",
    "share",
];
const ORDER_FIELDS: &[&str] = &["resource", "event", "table", "early", "unsigned"];
/// `order.unsigned`: the one word that keeps an ordering guard on a route without a signature.
const UNSIGNED: Choices<(), 1> = (["allow"], [()]);
const EARLY_FIELDS: &[&str] = &["retry_after", "forward_after"];
const PRECONDITIONS: Choices<PreconditionConfig, 2> = (
    ["if-match", "if-match-or-any"],
    [
        PreconditionConfig::IfMatch,
        PreconditionConfig::IfMatchOrAny,
    ],
);
const SIGNATURE_FIELDS: &[&str] = &[
    "scheme",
    "secret",
    "secret_env",
    "tolerance",
    "secrets",
    "secrets_env",
];
const PASS_THROUGH_FIELDS: &[&str] = &["header", "json", "values"];
const UPSTREAM_FIELDS: &[&str] = &[
    "reentry",
    "cluster_skipping_routes_and_filters",
    "timeout",
    "max_body",
    "cluster",
];
const FINGERPRINT_FIELDS: &[&str] = &["mode", "headers", "fields", "max_depth"];
const TOKEN_FIELDS: &[&str] = &["secret", "secret_env", "ttl", "issue_path", "header"];

// The choices: each one's spellings, in the order error messages list them, and what they mean.
type Choices<T, const N: usize> = ([&'static str; N], [T; N]);
const STORE_RESPONSES: Choices<StoreConfig, 3> = (
    ["not_done", "all", "2xx"],
    [StoreConfig::NotDone, StoreConfig::All, StoreConfig::Success],
);
const FAILURES: Choices<FailureConfig, 2> = (
    ["reject", "pass_through"],
    [FailureConfig::Reject, FailureConfig::PassThrough],
);
const KEYS: Choices<KeyConfig, 2> = (
    ["required", "optional"],
    [KeyConfig::Required, KeyConfig::Optional],
);
const TOKENS: Choices<TokenRequirementConfig, 2> = (
    ["none", "required"],
    [
        TokenRequirementConfig::None,
        TokenRequirementConfig::Required,
    ],
);
const FORWARDS: Choices<ForwardConfig, 2> = (
    ["detached", "router"],
    [ForwardConfig::Detached, ForwardConfig::Router],
);
const ROUTE_KINDS: Choices<RouteKindConfig, 2> = (
    ["api", "callback"],
    [RouteKindConfig::Api, RouteKindConfig::Callback],
);
const SCHEMES: Choices<SignatureSchemeConfig, 6> = (
    [
        "github",
        "stripe",
        "standard-webhooks",
        "svix",
        "shopify",
        "slack",
    ],
    [
        SignatureSchemeConfig::GitHub,
        SignatureSchemeConfig::Stripe,
        SignatureSchemeConfig::StandardWebhooks,
        SignatureSchemeConfig::Svix,
        SignatureSchemeConfig::Shopify,
        SignatureSchemeConfig::Slack,
    ],
);
const PRESETS: Choices<PresetConfig, 9> = (
    [
        "standard-webhooks",
        "svix",
        "stripe",
        "github",
        "shopify",
        "slack",
        "cloudevents",
        "pubsub-push",
        "sns",
    ],
    [
        PresetConfig::StandardWebhooks,
        PresetConfig::Svix,
        PresetConfig::Stripe,
        PresetConfig::GitHub,
        PresetConfig::Shopify,
        PresetConfig::Slack,
        PresetConfig::CloudEvents,
        PresetConfig::PubSubPush,
        PresetConfig::Sns,
    ],
);
const MODES: Choices<ModeConfig, 6> = (
    ["auto", "raw", "json", "form", "fields", "none"],
    [
        ModeConfig::Auto,
        ModeConfig::Raw,
        ModeConfig::Json,
        ModeConfig::Form,
        ModeConfig::Fields,
        ModeConfig::None,
    ],
);

impl Config {
    /// Parses a configuration document (JSON text) without validating the values; see
    /// [`Config::compile`] for that.
    pub fn from_json(text: &str) -> Result<Config, ConfigError> {
        let doc = Value::parse(text).map_err(|e| ConfigError::Syntax {
            message: e.message(),
        })?;
        Config::from_document(&doc)
    }

    /// Maps a parsed document onto the configuration's shape.
    pub fn from_document(doc: &Value) -> Result<Config, ConfigError> {
        document(doc).map_err(|shape| ConfigError::Syntax { message: *shape.0 })
    }
}

/// [`Config::from_document`], with the error in a [`Shape`].
fn document(doc: &Value) -> Result<Config, Shape> {
    let mut c = Config::default();
    for (key, value) in members("", doc)? {
        let at = key.as_str();
        let slot = match CONFIG_FIELDS.iter().position(|name| *name == at) {
            // `header`
            Some(0) => Slot::Text(&mut c.header),
            // `routes`
            Some(1) => {
                c.routes = match opt_array(at, value)? {
                    None => None,
                    Some(items) => {
                        let mut routes = Vec::new();
                        for (i, item) in items.iter().enumerate() {
                            routes.push(route(&index(at, i), item)?);
                        }
                        Some(routes)
                    }
                };
                continue;
            }
            // `scope`
            Some(2) => {
                c.scope = match opt_array(at, value)? {
                    None => None,
                    Some(items) => {
                        let mut sources = Vec::new();
                        for (i, item) in items.iter().enumerate() {
                            sources.push(scope_source(&index(at, i), item)?);
                        }
                        Some(sources)
                    }
                };
                continue;
            }
            // `fingerprint`
            Some(3) => {
                c.fingerprint = if value.is_null() {
                    None
                } else {
                    Some(fingerprint(at, value)?)
                };
                continue;
            }
            // `ttl`
            Some(4) => Slot::Text(&mut c.ttl),
            // `lease`
            Some(5) => Slot::Text(&mut c.lease),
            // `replay_headers`
            Some(6) => Slot::Texts(&mut c.replay_headers),
            // `store_responses`
            Some(7) => {
                c.store_responses = opt_pick(at, value, &STORE_RESPONSES)?;
                continue;
            }
            // `release_statuses`
            Some(8) => {
                c.release_statuses = match opt_array(at, value)? {
                    None => None,
                    Some(items) => {
                        let mut statuses = Vec::new();
                        for (i, item) in items.iter().enumerate() {
                            statuses.push(u16_at(&index(at, i), item)?);
                        }
                        Some(statuses)
                    }
                };
                continue;
            }
            // `max_request_body`
            Some(9) => Slot::Size(&mut c.max_request_body),
            // `hashing_budget`
            Some(10) => Slot::Size(&mut c.hashing_budget),
            // `max_response_body`
            Some(11) => Slot::Size(&mut c.max_response_body),
            // `capacity`
            Some(12) => Slot::U32(&mut c.capacity),
            // `records_per_cell`
            Some(13) => Slot::U16(&mut c.records_per_cell),
            // `shares`
            Some(14) => {
                c.shares = if value.is_null() {
                    None
                } else {
                    Some(shares(at, value)?)
                };
                continue;
            }
            // `max_memory`
            Some(15) => Slot::Size(&mut c.max_memory),
            // `on_store_full`
            Some(16) => {
                c.on_store_full = opt_pick(at, value, &FAILURES)?;
                continue;
            }
            // `on_store_error`
            Some(17) => {
                c.on_store_error = opt_pick(at, value, &FAILURES)?;
                continue;
            }
            // `token`
            Some(18) => {
                c.token = if value.is_null() {
                    None
                } else {
                    Some(token(at, value)?)
                };
                continue;
            }
            // `upstream`
            Some(19) => {
                c.upstream = if value.is_null() {
                    None
                } else {
                    Some(upstream(at, value)?)
                };
                continue;
            }
            // `store`
            Some(20) => {
                c.store = if value.is_null() {
                    None
                } else {
                    Some(store_backend(at, value)?)
                };
                continue;
            }
            // `hashing_budget_per_peer`
            Some(21) => Slot::Size(&mut c.hashing_budget_per_peer),
            // `relay_budget`
            Some(22) => Slot::Size(&mut c.relay_budget),
            // `relay_budget_per_peer`
            Some(23) => Slot::Size(&mut c.relay_budget_per_peer),
            _ => return Err(unknown("", key, CONFIG_FIELDS)),
        };
        fill(at, value, slot)?;
    }
    Ok(c)
}

/// Where a plain field's value goes. Every field of a kind is read by the same code (`fill`),
/// whichever section it is in.
enum Slot<'a> {
    Text(&'a mut Option<String>),
    Texts(&'a mut Option<Vec<String>>),
    Size(&'a mut Option<Size>),
    U16(&'a mut Option<u16>),
    U32(&'a mut Option<u32>),
    Bool(&'a mut Option<bool>),
}

/// Reads `value` into `slot`; `null` is "not given", like a missing member.
fn fill(path: &str, value: &Value, slot: Slot<'_>) -> Result<(), Shape> {
    match slot {
        Slot::Text(out) => *out = opt_string(path, value)?,
        Slot::Texts(out) => *out = opt_strings(path, value)?,
        Slot::Size(out) => *out = opt_size(path, value)?,
        Slot::U16(out) => *out = opt_u16(path, value)?,
        Slot::U32(out) => *out = opt_u32(path, value)?,
        Slot::Bool(out) => {
            *out = if value.is_null() {
                None
            } else {
                Some(boolean(path, value)?)
            }
        }
    }
    Ok(())
}

fn route(path: &str, value: &Value) -> Result<RouteConfig, Shape> {
    let mut r = RouteConfig {
        prefix: String::new(),
        methods: None,
        key: None,
        token: None,
        case_sensitive: None,
        forward: None,
        cluster: None,
        upstream_timeout: None,
        kind: None,
        key_from: None,
        signature: None,
        preset: None,
        pass_through: None,
        order: None,
        precondition: None,
        share: None,
    };
    // `prefix` has no "not given": it must be there.
    let mut has_prefix = false;
    for (key, value) in members(path, value)? {
        let at = join(path, key);
        let slot = match ROUTE_FIELDS.iter().position(|name| name == key) {
            // `prefix`
            Some(0) => {
                r.prefix = string(&at, value)?;
                has_prefix = true;
                continue;
            }
            // `methods`
            Some(1) => Slot::Texts(&mut r.methods),
            // `key`
            Some(2) => {
                r.key = opt_pick(&at, value, &KEYS)?;
                continue;
            }
            // `token`
            Some(3) => {
                r.token = opt_pick(&at, value, &TOKENS)?;
                continue;
            }
            // `case_sensitive`
            Some(7) => Slot::Bool(&mut r.case_sensitive),
            // `forward`
            Some(4) => {
                r.forward = opt_pick(&at, value, &FORWARDS)?;
                continue;
            }
            // `cluster`
            Some(5) => Slot::Text(&mut r.cluster),
            // `upstream_timeout`
            Some(6) => Slot::Text(&mut r.upstream_timeout),
            // `kind`
            Some(8) => {
                r.kind = opt_pick(&at, value, &ROUTE_KINDS)?;
                continue;
            }
            // `key_from`
            Some(9) => {
                r.key_from = match opt_array(&at, value)? {
                    None => None,
                    Some(items) => {
                        let mut sources = Vec::new();
                        for (i, item) in items.iter().enumerate() {
                            sources.push(key_source(&index(&at, i), item)?);
                        }
                        Some(sources)
                    }
                };
                continue;
            }
            // `signature`
            Some(10) => {
                r.signature = if value.is_null() {
                    None
                } else {
                    Some(signature(&at, value)?)
                };
                continue;
            }
            // `preset`
            Some(11) => {
                r.preset = opt_pick(&at, value, &PRESETS)?;
                continue;
            }
            // `pass_through`
            Some(12) => {
                r.pass_through = if value.is_null() {
                    None
                } else {
                    Some(pass_through(&at, value)?)
                };
                continue;
            }
            // `order`
            Some(13) => {
                r.order = if value.is_null() {
                    None
                } else {
                    Some(order(&at, value)?)
                };
                continue;
            }
            // `precondition`
            Some(14) => {
                r.precondition = opt_pick(&at, value, &PRECONDITIONS)?;
                continue;
            }
            // `share`
            Some(15) => {
                r.share = opt_share(&at, value)?;
                continue;
            }
            _ => return Err(unknown(path, key, ROUTE_FIELDS)),
        };
        fill(&at, value, slot)?;
    }
    if !has_prefix {
        return Err(shape(&join(path, "prefix"), &["missing field"]));
    }
    Ok(r)
}

fn upstream(path: &str, value: &Value) -> Result<UpstreamConfig, Shape> {
    let mut u = UpstreamConfig::default();
    for (key, value) in members(path, value)? {
        let slot = match UPSTREAM_FIELDS.iter().position(|name| name == key) {
            // `reentry`
            Some(0) => Slot::Text(&mut u.reentry),
            // `cluster_skipping_routes_and_filters`
            Some(1) => Slot::Text(&mut u.cluster_skipping_routes_and_filters),
            // `timeout`
            Some(2) => Slot::Text(&mut u.timeout),
            // `max_body`
            Some(3) => Slot::Size(&mut u.max_body),
            // `cluster` (read to be refused with the way forward)
            Some(4) => Slot::Text(&mut u.cluster),
            _ => return Err(unknown(path, key, UPSTREAM_FIELDS)),
        };
        fill(&join(path, key), value, slot)?;
    }
    Ok(u)
}

fn shares(path: &str, value: &Value) -> Result<SharesConfig, Shape> {
    let mut s = SharesConfig::default();
    for (key, value) in members(path, value)? {
        let at = join(path, key);
        let slot = match SHARES_FIELDS.iter().position(|name| name == key) {
            // `identity`
            Some(0) => {
                s.identity = opt_share(&at, value)?;
                continue;
            }
            // `peer`
            Some(1) => {
                s.peer = opt_share(&at, value)?;
                continue;
            }
            // `ipv4_prefix`
            Some(2) => Slot::U16(&mut s.ipv4_prefix),
            // `ipv6_prefix`
            Some(3) => Slot::U16(&mut s.ipv6_prefix),
            // `identity_bytes`
            Some(4) => Slot::Size(&mut s.identity_bytes),
            // `peer_bytes`
            Some(5) => Slot::Size(&mut s.peer_bytes),
            // `pressure`
            Some(6) => Slot::Text(&mut s.pressure),
            _ => return Err(unknown(path, key, SHARES_FIELDS)),
        };
        fill(&at, value, slot)?;
    }
    Ok(s)
}

/// A share: a number of records, or a percentage of `capacity` as text (`"10%"`, checked by
/// `compile`).
fn opt_share(path: &str, value: &Value) -> Result<Option<ShareAmount>, Shape> {
    const EXPECTED: &str = "expected a number of records or a percentage such as \"10%\"";
    match value {
        Value::Null => Ok(None),
        Value::String(text) => Ok(Some(ShareAmount::Text(super::copy(text)))),
        Value::Number(n) => match n.as_u64() {
            Some(n) => Ok(Some(ShareAmount::Records(n))),
            None => Err(shape(path, &[EXPECTED])),
        },
        other => Err(found(path, EXPECTED, other)),
    }
}

fn store_backend(path: &str, value: &Value) -> Result<StoreBackendConfig, Shape> {
    let mut s = StoreBackendConfig::default();
    for (key, value) in members(path, value)? {
        let slot = match STORE_FIELDS.iter().position(|name| name == key) {
            // `kind`
            Some(0) => Slot::Text(&mut s.kind),
            // `cluster`
            Some(1) => Slot::Text(&mut s.cluster),
            // `timeout`
            Some(2) => Slot::Text(&mut s.timeout),
            // `record_secret_env`
            Some(3) => Slot::Text(&mut s.record_secret_env),
            // `record_secrets_env`
            Some(4) => Slot::Texts(&mut s.record_secrets_env),
            _ => return Err(unknown(path, key, STORE_FIELDS)),
        };
        fill(&join(path, key), value, slot)?;
    }
    Ok(s)
}

/// `{"header": name}`, `{"json": pointer}`, `{"form": field}` or `{"cloudevents": true}`.
fn key_source(path: &str, value: &Value) -> Result<KeySourceConfig, Shape> {
    const EXPECTED: &str = "expected {\"header\": name}, {\"json\": pointer}, {\"form\": field} or {\"cloudevents\": true}";
    let Value::Object(members) = value else {
        return Err(found(path, EXPECTED, value));
    };
    let [(key, value)] = members.as_slice() else {
        return Err(shape(path, &[EXPECTED]));
    };
    let at = join(path, key);
    if key == "cloudevents" {
        return match value {
            Value::Bool(true) => Ok(KeySourceConfig::CloudEvent),
            _ => Err(found(&at, "expected true", value)),
        };
    }
    let make = match key.as_str() {
        "header" => KeySourceConfig::Header,
        "json" => KeySourceConfig::Json,
        "form" => KeySourceConfig::Form,
        _ => return Err(shape(&at, &["unknown key source; ", EXPECTED])),
    };
    Ok(make(string(&at, value)?))
}

/// The `scheme` may be left to the route's preset; `compile` refuses a rule without one.
fn signature(path: &str, value: &Value) -> Result<SignatureConfig, Shape> {
    let mut sig = SignatureConfig::default();
    for (key, value) in members(path, value)? {
        let at = join(path, key);
        let slot = match SIGNATURE_FIELDS.iter().position(|name| name == key) {
            // `scheme`
            Some(0) => {
                sig.scheme = opt_pick(&at, value, &SCHEMES)?;
                continue;
            }
            // `secret`
            Some(1) => Slot::Text(&mut sig.secret),
            // `secret_env`
            Some(2) => Slot::Text(&mut sig.secret_env),
            // `tolerance`
            Some(3) => Slot::Text(&mut sig.tolerance),
            // `secrets`
            Some(4) => Slot::Texts(&mut sig.secrets),
            // `secrets_env`
            Some(5) => Slot::Texts(&mut sig.secrets_env),
            _ => return Err(unknown(path, key, SIGNATURE_FIELDS)),
        };
        fill(&at, value, slot)?;
    }
    Ok(sig)
}

/// `{"header": name, "values": [value, ...]}` or `{"json": pointer, "values": [...]}`; which of
/// `header` and `json` is given is checked when the route is compiled.
fn pass_through(path: &str, value: &Value) -> Result<PassThroughConfig, Shape> {
    let mut header = None;
    let mut json = None;
    let mut values = None;
    for (key, value) in members(path, value)? {
        let slot = match PASS_THROUGH_FIELDS.iter().position(|name| name == key) {
            // `header`
            Some(0) => Slot::Text(&mut header),
            // `json`
            Some(1) => Slot::Text(&mut json),
            // `values`
            Some(2) => Slot::Texts(&mut values),
            _ => return Err(unknown(path, key, PASS_THROUGH_FIELDS)),
        };
        fill(&join(path, key), value, slot)?;
    }
    match values {
        Some(values) => Ok(PassThroughConfig {
            header,
            json,
            values,
        }),
        None => Err(shape(&join(path, "values"), &["missing field"])),
    }
}

/// `{"resource": source, "event": source, "table": {...}, "early"?: {...}}`; the table is kept
/// as JSON for [`crate::order::transition::DeclaredTable`] to read (the one reader of that format).
fn order(path: &str, value: &Value) -> Result<OrderConfig, Shape> {
    let mut o = OrderConfig::default();
    for (key, value) in members(path, value)? {
        let at = join(path, key);
        match ORDER_FIELDS.iter().position(|name| name == key) {
            // `resource`, `event`
            Some(i @ (0 | 1)) if !value.is_null() => {
                let source = key_source(&at, value)?;
                if matches!(source, KeySourceConfig::CloudEvent) {
                    return Err(shape(
                        &at,
                        &["expected {\"header\": name}, {\"json\": pointer} or {\"form\": field}"],
                    ));
                }
                *(if i == 0 {
                    &mut o.resource
                } else {
                    &mut o.event
                }) = Some(source);
            }
            Some(0 | 1) => {}
            // `table`
            Some(2) => o.table = (!value.is_null()).then(|| value.clone()),
            // `early`
            Some(3) if value.is_null() => {}
            Some(3) => {
                for (key, value) in members(&at, value)? {
                    let slot = match EARLY_FIELDS.iter().position(|name| name == key) {
                        Some(0) => Slot::Text(&mut o.retry_after),
                        Some(1) => Slot::Text(&mut o.forward_after),
                        _ => return Err(unknown(&at, key, EARLY_FIELDS)),
                    };
                    fill(&join(&at, key), value, slot)?;
                }
            }
            // `unsigned`
            Some(4) => o.allow_unsigned = opt_pick(&at, value, &UNSIGNED)?.is_some(),
            _ => return Err(unknown(path, key, ORDER_FIELDS)),
        }
    }
    for (name, given) in [
        ("resource", o.resource.is_some()),
        ("event", o.event.is_some()),
        ("table", o.table.is_some()),
    ] {
        if !given {
            return Err(shape(&join(path, name), &["missing field"]));
        }
    }
    Ok(o)
}

/// `"peer"`, `{"header": name}` (with `"verified": true` for a header Envoy sets) or
/// `{"property": [segment, ...]}`.
fn scope_source(path: &str, value: &Value) -> Result<ScopeConfig, Shape> {
    const EXPECTED: &str =
        "expected \"peer\", {\"header\": name} or {\"property\": [segment, ...]}";
    match value {
        Value::String(s) if s == "peer" => Ok(ScopeConfig::Peer),
        Value::Object(members) => match members.as_slice() {
            // A header the operator declares Envoy sets: its value is not the
            // client's own word, so its records are not also charged to the peer.
            [(key, name), (flag, verified)] | [(flag, verified), (key, name)]
                if key == "header" && flag == "verified" =>
            {
                let name = string(&join(path, key), name)?;
                if boolean(&join(path, flag), verified)? {
                    Ok(ScopeConfig::VerifiedHeader(name))
                } else {
                    Ok(ScopeConfig::Header(name))
                }
            }
            [(key, value)] => {
                let at = join(path, key);
                match key.as_str() {
                    "header" => Ok(ScopeConfig::Header(string(&at, value)?)),
                    "property" => Ok(ScopeConfig::Property(strings(&at, value)?)),
                    _ => Err(shape(&at, &["unknown scope source; ", EXPECTED])),
                }
            }
            _ => Err(shape(path, &[EXPECTED])),
        },
        Value::String(s) => Err(shape(path, &["unknown scope source `", s, "`; ", EXPECTED])),
        other => Err(found(path, EXPECTED, other)),
    }
}

fn fingerprint(path: &str, value: &Value) -> Result<FingerprintConfig, Shape> {
    let mut fp = FingerprintConfig {
        mode: None,
        headers: None,
        fields: None,
        max_depth: None,
    };
    for (key, value) in members(path, value)? {
        let at = join(path, key);
        let slot = match FINGERPRINT_FIELDS.iter().position(|name| name == key) {
            // `mode`
            Some(0) => {
                fp.mode = opt_pick(&at, value, &MODES)?;
                continue;
            }
            // `headers`
            Some(1) => Slot::Texts(&mut fp.headers),
            // `fields`
            Some(2) => Slot::Texts(&mut fp.fields),
            // `max_depth`
            Some(3) => Slot::U16(&mut fp.max_depth),
            _ => return Err(unknown(path, key, FINGERPRINT_FIELDS)),
        };
        fill(&at, value, slot)?;
    }
    Ok(fp)
}

fn token(path: &str, value: &Value) -> Result<TokenConfig, Shape> {
    let mut t = TokenConfig {
        secret: None,
        secret_env: None,
        ttl: None,
        issue_path: None,
        header: None,
    };
    for (key, value) in members(path, value)? {
        let slot = match TOKEN_FIELDS.iter().position(|name| name == key) {
            // `secret`
            Some(0) => &mut t.secret,
            // `secret_env`
            Some(1) => &mut t.secret_env,
            // `ttl`
            Some(2) => &mut t.ttl,
            // `issue_path`
            Some(3) => &mut t.issue_path,
            // `header`
            Some(4) => &mut t.header,
            _ => return Err(unknown(path, key, TOKEN_FIELDS)),
        };
        fill(&join(path, key), value, Slot::Text(slot))?;
    }
    Ok(t)
}

/// A byte count (integer) or a size as text (`"64KiB"`, checked later by `compile`); `null` is
/// "not given".
fn opt_size(path: &str, value: &Value) -> Result<Option<Size>, Shape> {
    match value {
        Value::Null => Ok(None),
        Value::String(text) => Ok(Some(Size::Text(super::copy(text)))),
        Value::Number(n) => match n.as_u64() {
            Some(n) => Ok(Some(Size::Bytes(n))),
            None => Err(shape(
                path,
                &["expected a byte count (a non-negative integer) or a size such as \"64KiB\""],
            )),
        },
        other => Err(found(
            path,
            "expected a byte count or a size such as \"64KiB\"",
            other,
        )),
    }
}

/// A shape error's message ([`ConfigError::Syntax`]), boxed: one word, so that every `?` of the
/// readers passes a pointer on rather than a whole `ConfigError`.
// The extra allocation is the point: a `Box` is one word, a `String` three.
#[allow(clippy::box_collection)]
struct Shape(Box<String>);

// --- Shapes ---------------------------------------------------------------------------------
// Every reader below is one function for all the fields it serves (no closures, no generics but
// the one-line `opt_pick`), and every error is built out of line: this code runs once per
// configuration, so it is written for size.

/// A shape error at `path` (empty for the document itself): the path, then `reason`'s pieces.
#[cold]
#[inline(never)]
fn shape(path: &str, reason: &[&str]) -> Shape {
    let mut message = if path.is_empty() {
        super::copy("the document: ")
    } else {
        ["`", path, "`: "].concat()
    };
    message.push_str(&reason.concat());
    Shape(Box::new(message))
}

/// `{expected}, found {what value is}`.
#[cold]
#[inline(never)]
fn found(path: &str, expected: &str, value: &Value) -> Shape {
    shape(path, &[expected, ", found ", value.kind()])
}

/// `names`, each between `quote`s, separated by `, `.
fn quoted(names: &[&str], quote: &str) -> String {
    let mut out = String::new();
    for (i, name) in names.iter().enumerate() {
        let comma = if i > 0 { ", " } else { "" };
        out.push_str(&[comma, quote, name, quote].concat());
    }
    out
}

#[cold]
#[inline(never)]
fn unknown(path: &str, key: &str, expected: &[&str]) -> Shape {
    shape(
        &join(path, key),
        &["unknown field, expected one of ", &quoted(expected, "`")],
    )
}

/// `path.key` (`key` alone at the top).
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        return super::copy(key);
    }
    [path, ".", key].concat()
}

/// `path[i]`, an item's path.
fn index(path: &str, i: usize) -> String {
    super::item(path, i, "")
}

fn members<'v>(path: &str, value: &'v Value) -> Result<&'v [(String, Value)], Shape> {
    value
        .as_object()
        .ok_or_else(|| found(path, "expected an object", value))
}

fn boolean(path: &str, value: &Value) -> Result<bool, Shape> {
    value
        .as_bool()
        .ok_or_else(|| found(path, "expected true or false", value))
}

fn string(path: &str, value: &Value) -> Result<String, Shape> {
    match value.as_str() {
        Some(s) => Ok(super::copy(s)),
        None => Err(found(path, "expected a string", value)),
    }
}

/// A string; `null` is "not given", like a missing member.
fn opt_string(path: &str, value: &Value) -> Result<Option<String>, Shape> {
    if value.is_null() {
        return Ok(None);
    }
    string(path, value).map(Some)
}

/// An array's items; `null` is "not given".
fn opt_array<'v>(path: &str, value: &'v Value) -> Result<Option<&'v [Value]>, Shape> {
    if value.is_null() {
        return Ok(None);
    }
    match value.as_array() {
        Some(items) => Ok(Some(items)),
        None => Err(found(path, "expected an array", value)),
    }
}

/// An array of strings; item paths are `path[i]`.
fn strings(path: &str, value: &Value) -> Result<Vec<String>, Shape> {
    let Some(items) = value.as_array() else {
        return Err(found(path, "expected an array", value));
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        out.push(string(&index(path, i), item)?);
    }
    Ok(out)
}

fn opt_strings(path: &str, value: &Value) -> Result<Option<Vec<String>>, Shape> {
    if value.is_null() {
        return Ok(None);
    }
    strings(path, value).map(Some)
}

/// A non-negative integer up to `max` (spelled `max_text` in the message).
fn integer(path: &str, value: &Value, max: u64, max_text: &str) -> Result<u64, Shape> {
    match value.as_u64() {
        Some(n) if n <= max => Ok(n),
        _ => {
            let found = match value {
                Value::Number(n) => n.as_str(),
                other => other.kind(),
            };
            Err(shape(
                path,
                &[
                    "expected an integer from 0 to ",
                    max_text,
                    ", found ",
                    found,
                ],
            ))
        }
    }
}

fn u16_at(path: &str, value: &Value) -> Result<u16, Shape> {
    // In range: `integer` checked it.
    integer(path, value, u64::from(u16::MAX), "65535").map(|n| n as u16)
}

fn opt_u16(path: &str, value: &Value) -> Result<Option<u16>, Shape> {
    if value.is_null() {
        return Ok(None);
    }
    u16_at(path, value).map(Some)
}

fn opt_u32(path: &str, value: &Value) -> Result<Option<u32>, Shape> {
    if value.is_null() {
        return Ok(None);
    }
    // In range: `integer` checked it.
    integer(path, value, u64::from(u32::MAX), "4294967295").map(|n| Some(n as u32))
}

/// The position in `names` of the string `value` holds.
fn choice(path: &str, value: &Value, names: &[&str]) -> Result<usize, Shape> {
    let Some(text) = value.as_str() else {
        return Err(shape(
            path,
            &[
                "expected one of ",
                &quoted(names, "\""),
                ", found ",
                value.kind(),
            ],
        ));
    };
    match names.iter().position(|name| *name == text) {
        Some(i) => Ok(i),
        None => Err(shape(
            path,
            &[
                "unknown value \"",
                text,
                "\", expected one of ",
                &quoted(names, "\""),
            ],
        )),
    }
}

/// One of `choices`; `null` is "not given".
fn opt_pick<T: Copy, const N: usize>(
    path: &str,
    value: &Value,
    choices: &Choices<T, N>,
) -> Result<Option<T>, Shape> {
    if value.is_null() {
        return Ok(None);
    }
    let i = choice(path, value, &choices.0)?;
    Ok(choices.1.get(i).copied())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;

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

    /// Fields of the same kind get distinct values, so a reader arm out of step with its section's
    /// list of names would put one where another belongs.
    #[test]
    fn each_member_lands_in_its_field() {
        let c = Config::from_json(
            r#"{"header":"h","ttl":"t","lease":"l","replay_headers":["r"],
                "max_request_body":1,"hashing_budget":2,"max_response_body":3,"capacity":4,
                "hashing_budget_per_peer":10,"relay_budget":13,"relay_budget_per_peer":14,
                "records_per_cell":5,"shares":{"identity":6,"peer":"7%","ipv4_prefix":24,"ipv6_prefix":48,"pressure":"30%",
                  "identity_bytes":11,"peer_bytes":"12MiB"},
                "max_memory":"1GiB",
                "on_store_full":"pass_through","on_store_error":"reject",
                "routes":[{"prefix":"/p","methods":["M"],"key":"required","token":"required",
                  "forward":"detached","cluster":"c","upstream_timeout":"u","case_sensitive":true,
                  "kind":"callback","key_from":[{"header":"k"}],
                  "signature":{"scheme":"stripe","secret":"s","secret_env":"e","tolerance":"o",
                    "secrets":["s1"],"secrets_env":["e1"]},
                  "preset":"sns","pass_through":{"header":"ph","values":["pv"]}}],
                "fingerprint":{"mode":"raw","headers":["fh"],"fields":["/ff"],"max_depth":8},
                "token":{"secret":"ts","secret_env":"te","ttl":"tt","issue_path":"/ti","header":"th"},
                "upstream":{"reentry":"ur","cluster_skipping_routes_and_filters":"us","timeout":"ut","max_body":9,"cluster":"uc"},
                "store":{"kind":"sk","cluster":"sc","timeout":"st","record_secret_env":"rs",
                  "record_secrets_env":["r1"]}}"#,
        )
        .unwrap();
        let shown = format!("{c:?}");
        let want = [
            "header: Some(\"h\")",
            "ttl: Some(\"t\")",
            "lease: Some(\"l\")",
            "replay_headers: Some([\"r\"])",
            "max_request_body: Some(Bytes(1))",
            "hashing_budget: Some(Bytes(2))",
            "hashing_budget_per_peer: Some(Bytes(10))",
            "relay_budget: Some(Bytes(13))",
            "relay_budget_per_peer: Some(Bytes(14))",
            "max_response_body: Some(Bytes(3))",
            "capacity: Some(4)",
            "records_per_cell: Some(5)",
            "shares: Some(SharesConfig { identity: Some(Records(6)), peer: Some(Text(\"7%\")), identity_bytes: Some(Bytes(11)), peer_bytes: Some(Text(\"12MiB\")), ipv4_prefix: Some(24), ipv6_prefix: Some(48), pressure: Some(\"30%\") })",
            "max_memory: Some(Text(\"1GiB\"))",
            "on_store_full: Some(PassThrough)",
            "on_store_error: Some(Reject)",
            "prefix: \"/p\"",
            "methods: Some([\"M\"])",
            "key: Some(Required)",
            "token: Some(Required)",
            "case_sensitive: Some(true)",
            "forward: Some(Detached)",
            "cluster: Some(\"c\")",
            "upstream_timeout: Some(\"u\")",
            "kind: Some(Callback)",
            "key_from: Some([Header(\"k\")])",
            "scheme: Some(Stripe), secret: Some(\"s\"), secret_env: Some(\"e\"), secrets: Some([\"s1\"]), secrets_env: Some([\"e1\"]), tolerance: Some(\"o\")",
            "preset: Some(Sns)",
            "pass_through: Some(PassThroughConfig { header: Some(\"ph\"), json: None, values: [\"pv\"] })",
            "mode: Some(Raw), headers: Some([\"fh\"]), fields: Some([\"/ff\"]), max_depth: Some(8)",
            "secret: Some(\"ts\"), secret_env: Some(\"te\"), ttl: Some(\"tt\"), issue_path: Some(\"/ti\"), header: Some(\"th\")",
            "reentry: Some(\"ur\"), cluster_skipping_routes_and_filters: Some(\"us\"), cluster: Some(\"uc\"), timeout: Some(\"ut\"), max_body: Some(Bytes(9))",
            "kind: Some(\"sk\"), cluster: Some(\"sc\"), timeout: Some(\"st\"), record_secret_env: Some(\"rs\"), record_secrets_env: Some([\"r1\"])",
        ];
        for part in want {
            assert!(shown.contains(part), "{part} missing from {shown}");
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
