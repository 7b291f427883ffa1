//! Reading a configuration document into [`Config`]: an explicit mapping, field by field.
//!
//! Every object refuses members it does not know (a typo must not silently become a default), every
//! optional field accepts `null` as "not given", and every error is [`ConfigError::Syntax`] with a
//! message that starts with the field's path (`routes[0].methods[1]`) and says what was expected.
//! Values are never echoed except the spelling of an unknown choice, so a secret cannot leak into
//! Envoy's log through a type error.

mod in_flight;
mod keys;
mod problems;
mod route;
mod shape;

use super::{
    Config, ConfigError, FailureConfig, FingerprintConfig, ForwardConfig, InFlightConfig,
    KeyConfig, ModeConfig, RouteConfig, ScopeConfig, ShareAmount, SharesConfig, Size,
    StoreBackendConfig, StoreConfig, TokenConfig, TokenRequirementConfig, UpstreamConfig,
};
use super::{KeySourceConfig, RouteKindConfig, SignatureConfig, SignatureSchemeConfig};
use super::{OrderConfig, PassThroughConfig, PolicyPathConfig, PreconditionConfig, PresetConfig};
use crate::request::json::Value;
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use route::*;
use shape::*;

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
    "policy_path",
    "key_format",
    "key_mismatch",
    "key_scope",
    "in_flight",
    "problems",
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
    "key_format",
    "key_mismatch",
    "key_scope",
    "in_flight",
];
const ORDER_FIELDS: &[&str] = &["resource", "event", "table", "early", "unsigned"];
/// `order.unsigned`: the one word that keeps the sequencer on a route without a signature.
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
    pub(crate) fn from_document(doc: &Value) -> Result<Config, ConfigError> {
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
            // `policy_path`
            Some(24) => {
                c.policy_path = match value {
                    Value::Null => None,
                    Value::Bool(false) => Some(PolicyPathConfig::Off),
                    Value::String(path) => Some(PolicyPathConfig::At(super::copy(path))),
                    other => {
                        return Err(found(
                            at,
                            "expected a path such as \"/.well-known/idempotency\", or false",
                            other,
                        ))
                    }
                };
                continue;
            }
            Some(i @ 25..=27) => {
                keys::key_rule(at, i - 25, value, &mut c.keys)?;
                continue;
            }
            // `in_flight`
            Some(28) => {
                c.in_flight = in_flight::in_flight(at, value)?;
                continue;
            }
            // `problems`
            Some(29) => {
                c.problems = problems::read(at, value)?;
                continue;
            }
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

// --- Shapes ---------------------------------------------------------------------------------
// Every reader below is one function for all the fields it serves (no closures, no generics but
// the one-line `opt_pick`), and every error is built out of line: this code runs once per
// configuration, so it is written for size.

#[cfg(test)]
mod tests;
