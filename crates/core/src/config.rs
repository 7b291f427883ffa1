//! Plugin configuration as operators write it (JSON), validated once into a [`Policy`]. Unknown
//! fields are refused (a typo must not silently become a default); every error names the field and
//! the reason, so Envoy's log line for a rejected config is enough to fix it.
//!
//! The document is read with [`crate::request::json::Value`] and mapped field by field (no serde):
//! the shipped filter stays free of serde's code size, and the mapping is where the unknown-field
//! and type checks live, each naming the field's path (`routes[1].methods`).

use crate::client::signature::{SignatureRule, SignatureScheme, DEFAULT_TOLERANCE};
use crate::client::token::TokenSecret;
use crate::order::transition::TableError;
use crate::policy::RouteKind;
use crate::policy::{
    Capacity, Detached, FailureMode, Forward, KeyRequirement, PassThrough, PassThroughSource,
    Policy, Route, ScopeSource, StoreKind, StoreRule, TokenPolicy, TokenRequirement, Via,
    DEFAULT_RELEASE_STATUSES, DEFAULT_REPLAY_HEADERS, NEVER_REPLAYED,
};
use crate::request::fingerprint::{FingerprintMode, FingerprintSpec};
use crate::request::json::{JsonLimits, JsonPointer};
use crate::request::key_source::KeySource;
use crate::store::share::fill::byte_part;
use crate::store::share::{Share, Shares};
use crate::text::Text;
use crate::time::Span;
use alloc::boxed::Box;
use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

mod budget;
mod order;
mod preset;
mod read;
mod shadow;
mod store;

/// The configuration document. Every field is optional; see the README for defaults.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub header: Option<String>,
    pub routes: Option<Vec<RouteConfig>>,
    pub scope: Option<Vec<ScopeConfig>>,
    pub fingerprint: Option<FingerprintConfig>,
    pub ttl: Option<String>,
    pub lease: Option<String>,
    pub replay_headers: Option<Vec<String>>,
    pub store_responses: Option<StoreConfig>,
    pub release_statuses: Option<Vec<u16>>,
    pub max_request_body: Option<Size>,
    pub hashing_budget: Option<Size>,
    pub hashing_budget_per_peer: Option<Size>,
    pub relay_budget: Option<Size>,
    pub relay_budget_per_peer: Option<Size>,
    pub max_response_body: Option<Size>,
    pub capacity: Option<u32>,
    pub records_per_cell: Option<u16>,
    pub shares: Option<SharesConfig>,
    pub max_memory: Option<Size>,
    pub on_store_full: Option<FailureConfig>,
    pub on_store_error: Option<FailureConfig>,
    pub token: Option<TokenConfig>,
    pub upstream: Option<UpstreamConfig>,
    pub store: Option<StoreBackendConfig>,
}

/// The `store` section: `{"kind": "local"}` or `{"kind": "remote", "cluster": …, "timeout": …,
/// "record_secret_env": …}`. A remote store's answers are sealed with a secret from the VM's
/// environment: `record_secret_env` names one variable, `record_secrets_env` several (rotation:
/// the first seals, each is accepted); neither means [`defaults::RECORD_SECRET_ENV`].
#[derive(Debug, Clone, Default)]
pub struct StoreBackendConfig {
    pub kind: Option<String>,
    pub cluster: Option<String>,
    pub timeout: Option<String>,
    pub record_secret_env: Option<String>,
    pub record_secrets_env: Option<Vec<String>>,
}

#[derive(Debug, Clone)]
pub struct RouteConfig {
    pub prefix: String,
    pub methods: Option<Vec<String>>,
    pub key: Option<KeyConfig>,
    pub token: Option<TokenRequirementConfig>,
    pub case_sensitive: Option<bool>,
    pub forward: Option<ForwardConfig>,
    pub cluster: Option<String>,
    pub upstream_timeout: Option<String>,
    pub kind: Option<RouteKindConfig>,
    pub key_from: Option<Vec<KeySourceConfig>>,
    pub signature: Option<SignatureConfig>,
    /// A sender's usual settings (`preset`); every other field overrides them.
    pub preset: Option<PresetConfig>,
    pub pass_through: Option<PassThroughConfig>,
    /// The ordering guard ([`crate::order`]); callback routes only.
    pub order: Option<OrderConfig>,
    /// What the route itself may hold in the whole store under pressure; callback routes only.
    pub share: Option<ShareAmount>,
    pub precondition: Option<PreconditionConfig>,
}

pub use preset::PresetConfig;

/// `routes[i].order`: where the resource id and the event type are, the state table (kept as JSON
/// for [`DeclaredTable`](crate::order::transition::DeclaredTable) to read), and `early.retry_after`
/// / `early.forward_after`.
#[derive(Debug, Clone, Default)]
pub struct OrderConfig {
    pub resource: Option<KeySourceConfig>,
    pub event: Option<KeySourceConfig>,
    pub table: Option<crate::request::json::Value>,
    pub retry_after: Option<String>,
    pub forward_after: Option<String>,
    /// `unsigned: "allow"`: the guard on a route that checks no signature, said explicitly.
    pub allow_unsigned: bool,
}

/// `routes[i].precondition`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreconditionConfig {
    /// `"if-match"`: a version required (`If-Match: *` refused).
    IfMatch,
    /// `"if-match-or-any"`: a version, or `If-Match: *`.
    IfMatchOrAny,
}

/// `routes[i].pass_through`: `{"header": name, "values": [value, ...]}`, or `{"json": pointer,
/// "values": [...]}` where the message type is a field of the (signed) body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassThroughConfig {
    pub header: Option<String>,
    pub json: Option<String>,
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKindConfig {
    Api,
    Callback,
}

/// `{"header": name}`, `{"json": pointer}`, `{"form": field}` or `{"cloudevents": true}`.
#[derive(Debug, Clone)]
pub enum KeySourceConfig {
    Header(String),
    Json(String),
    Form(String),
    CloudEvent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureSchemeConfig {
    GitHub,
    Stripe,
    StandardWebhooks,
    Svix,
    Shopify,
    Slack,
}

/// `routes[i].signature`. The scheme may come from the route's preset; the secret is exactly one
/// of `secret`, `secret_env`, `secrets` or `secrets_env` (the lists: several secrets at once, while
/// a sender rotates them).
#[derive(Debug, Clone, Default)]
pub struct SignatureConfig {
    pub scheme: Option<SignatureSchemeConfig>,
    pub secret: Option<String>,
    pub secret_env: Option<String>,
    pub secrets: Option<Vec<String>>,
    pub secrets_env: Option<Vec<String>>,
    pub tolerance: Option<String>,
}

/// `routes[i].forward`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForwardConfig {
    Detached,
    Router,
}

/// The `upstream` section: where detached exchanges go by default.
#[derive(Debug, Clone, Default)]
pub struct UpstreamConfig {
    /// The cluster of the internal listener that carries the routes.
    pub reentry: Option<String>,
    /// The explicit opt-out: a cluster reached directly, skipping routes and later filters.
    pub cluster_skipping_routes_and_filters: Option<String>,
    /// The name before re-entry was built; read only to refuse it with the way forward.
    pub cluster: Option<String>,
    pub timeout: Option<String>,
    pub max_body: Option<Size>,
}

#[derive(Debug, Clone, Copy)]
pub enum KeyConfig {
    Required,
    Optional,
}

#[derive(Debug, Clone, Copy)]
pub enum TokenRequirementConfig {
    None,
    Required,
}

/// The `shares` section: what each payer may hold in the whole store.
#[derive(Debug, Clone, Default)]
pub struct SharesConfig {
    pub identity: Option<ShareAmount>,
    pub peer: Option<ShareAmount>,
    /// Bytes: a size, a percentage of the memory bound (`"10%"`), or `"off"`.
    pub identity_bytes: Option<Size>,
    pub peer_bytes: Option<Size>,
    pub ipv4_prefix: Option<u16>,
    pub ipv6_prefix: Option<u16>,
    /// The fill, in percent of the store (`"50%"`), from which shares bind.
    pub pressure: Option<String>,
}

/// A share as written: records, or a percentage of `capacity` (`"10%"`).
#[derive(Debug, Clone)]
pub enum ShareAmount {
    Records(u64),
    Text(String),
}

#[derive(Debug, Clone)]
pub enum ScopeConfig {
    Header(String),
    /// `{"header": name, "verified": true}`: set by Envoy, not by the client.
    VerifiedHeader(String),
    Property(Vec<String>),
    Peer,
}

#[derive(Debug, Clone)]
pub struct FingerprintConfig {
    pub mode: Option<ModeConfig>,
    pub headers: Option<Vec<String>>,
    pub fields: Option<Vec<String>>,
    pub max_depth: Option<u16>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeConfig {
    Auto,
    Raw,
    Json,
    Form,
    Fields,
    None,
}

#[derive(Debug, Clone, Copy)]
pub enum StoreConfig {
    NotDone,
    All,
    Success,
}

#[derive(Debug, Clone, Copy)]
pub enum FailureConfig {
    Reject,
    PassThrough,
}

#[derive(Debug, Clone)]
pub struct TokenConfig {
    pub secret: Option<String>,
    pub secret_env: Option<String>,
    pub ttl: Option<String>,
    pub issue_path: Option<String>,
    pub header: Option<String>,
}

/// A byte size: a number of bytes, or a string such as `"64KiB"`, `"1MiB"`.
#[derive(Debug, Clone)]
pub enum Size {
    Bytes(u64),
    Text(String),
}

/// Defaults, in one place (the README's configuration reference lists the same values).
pub mod defaults {
    pub const HEADER: &str = crate::request::key::HEADER;
    pub const TTL: &str = "24h";
    pub const LEASE: &str = "60s";
    pub const MAX_REQUEST_BODY: u64 = 1024 * 1024;
    pub const HASHING_BUDGET: u64 = 64 * 1024 * 1024;
    /// `hashing_budget_per_peer` is by default `hashing_budget` divided by this (and at least
    /// what a lone stream needs): more than four, so four address groups — four IPv6 /64s are
    /// cheap — holding their whole parts still leave half of the budget to everyone else.
    pub const PEER_SHARES: u64 = 8;
    /// Answers of ordinary APIs are kept whole: a JSON list or document of a megabyte replays as
    /// it was sent. What the store may hold is bounded in bytes by [`MAX_MEMORY`], not by
    /// `capacity` times this.
    pub const MAX_RESPONSE_BODY: u64 = 1024 * 1024;
    /// The local store's byte bound (`max_memory`): what a sidecar can spare. Split over the fill
    /// shards; an answer that does not fit its shard's part is kept without its body.
    pub const MAX_MEMORY: u64 = 256 * 1024 * 1024;
    pub const CAPACITY: u32 = 10_000;
    pub const RECORDS_PER_CELL: u16 = 8;
    /// Each payer's share of the whole store, in percent of `capacity`: one address or
    /// one verified identity may hold a tenth of it, so ten flooding clients are needed to fill it.
    pub const SHARE_PERCENT: u64 = 10;
    /// Shares bind only while the store is at least this full (percent of `capacity`): below it
    /// a busy client is served however much it holds. Not half: with 8 records per cell, a store
    /// 20 % full has a full cell for one key in 4,000, a store half full for one in 20 — a flood
    /// let through to half would turn away everyone's every twentieth request as `store_full`.
    pub const PRESSURE_PERCENT: u8 = 20;
    /// One IPv4 address is one peer; an IPv6 host holds a whole /64.
    pub const IPV4_PREFIX: u8 = 32;
    pub const IPV6_PREFIX: u8 = 64;
    pub const TOKEN_TTL: &str = "10m";
    pub const TOKEN_ISSUE_PATH: &str = crate::client::token::ISSUE_PATH;
    pub const TOKEN_HEADER: &str = "idemgate-token";
    pub const TOKEN_SECRET_ENV: &str = "IDEMGATE_TOKEN_SECRET";
    /// The variable holding the secret that seals a remote store's answers (`store.kind: "remote"`).
    pub const RECORD_SECRET_ENV: &str = "IDEMGATE_RECORD_SECRET";
    pub const METHODS: &[&str] = &["POST", "PATCH"];
    /// Envoy's own default route timeout.
    pub const UPSTREAM_TIMEOUT: &str = "15s";
    /// A detached exchange relays answers up to this whole to its first client.
    pub const MAX_RELAY_BODY: u64 = 8 * 1024 * 1024;
    /// `relay_budget` is by default this many exchanges' worth of `upstream.max_body` per VM (a
    /// worker), so that a peer's part ([`PEER_SHARES`]) is eight exchanges in flight: a
    /// provider's burst of callbacks from one address passes on every worker, while what Envoy
    /// may buffer for a worker's answers stays bounded (512 MiB at the default 8 MiB bound, an
    /// address group's part 64 MiB).
    pub const RELAY_EXCHANGES: u64 = 64;
}

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// Not JSON, or not of the document's shape (unknown field, wrong type, missing `prefix`);
    /// `message` names the byte offset (not JSON) or the field's path and what was expected.
    Syntax { message: String },
    /// A field holds a value the rules refuse.
    Invalid { field: String, reason: String },
    /// A route's state table (`routes[i].order.table`) is not a valid table: the code is the
    /// table's own (`transition_table_*`), the same one the browser module reports.
    Table { field: String, error: TableError },
}

impl ConfigError {
    pub fn code(&self) -> &'static str {
        match self {
            ConfigError::Syntax { .. } => "config_syntax",
            ConfigError::Invalid { .. } => "config_invalid",
            ConfigError::Table { error, .. } => error.code(),
        }
    }

    /// The field at fault (`"routes[1].methods"`), when known.
    pub fn field(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { field, .. } | ConfigError::Table { field, .. } => Some(field),
            ConfigError::Syntax { .. } => None,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Syntax { message } => write!(f, "configuration is not valid: {message}"),
            ConfigError::Invalid { field, reason } => {
                write!(f, "configuration field `{field}`: {reason}")
            }
            ConfigError::Table { field, error } => {
                write!(
                    f,
                    "configuration field `{field}`: {} ({error})",
                    error.code()
                )
            }
        }
    }
}

/// A refusal of `field`, for the reason `reason`'s pieces say (joined). Out of line: configuration
/// is read once, so its code is written for size.
#[cold]
#[inline(never)]
fn invalid(field: &str, reason: &[&str]) -> Refusal {
    refuse(copy(field), reason)
}

/// [`invalid`] for a field path built for the error.
#[cold]
#[inline(never)]
fn refuse(field: String, reason: &[&str]) -> Refusal {
    Refusal(Box::new(ConfigError::Invalid {
        field,
        reason: reason.concat(),
    }))
}

/// A [`ConfigError::Invalid`], boxed: one word, so that every `?` of the validation passes a
/// pointer on rather than a whole `ConfigError`.
struct Refusal(Box<ConfigError>);

/// `list[i]` and then `rest`: the path of a list's item (`routes[1]`) or of its field
/// (`routes[1].methods`).
fn item(list: &str, i: usize, rest: &str) -> String {
    [list, "[", &decimal(i as u64), "]", rest].concat()
}

/// Owned copies of `names` (the default lists).
fn owned(names: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for name in names {
        out.push(copy(name));
    }
    out
}

/// An owned copy of `text`. Out of line, so that the many places that keep a configured name
/// share one copy routine (configuration is read once; its code is written for size).
#[inline(never)]
fn copy(text: &str) -> String {
    String::from(text)
}

/// An error's text, by one out-of-line `to_string` for every error type.
#[inline(never)]
fn shown(error: &dyn fmt::Display) -> String {
    error.to_string()
}

/// `n` in decimal.
fn decimal(n: u64) -> String {
    let mut out = String::new();
    // Writing into a `String` cannot fail.
    let _ = out.put_u64(n);
    out
}

impl Policy {
    /// Parses and validates a JSON configuration. An empty document (`""`, `{}`) gives the
    /// defaults. `env` resolves `token.secret_env` (the VM's environment in Envoy).
    pub fn from_json(
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Policy, ConfigError> {
        let config = if text.trim().is_empty() {
            Config::default()
        } else {
            Config::from_json(text)?
        };
        config.compile(env)
    }

    /// A filter configuration compiled only to derive storage keys as the filter does — what the
    /// store service's operator controls need (`idemgate-store records …`). Routes, key sources
    /// and scopes are the filter's; the secrets the configuration names (the remote store's record
    /// secrets, the token secret, webhook signature secrets) are never read, because only the
    /// Envoys hold them. So the policy it returns verifies no signature, seals nothing and issues
    /// or checks no token: use it for storage keys alone.
    pub fn for_storage_keys(text: &str) -> Result<Policy, ConfigError> {
        let config = if text.trim().is_empty() {
            Config::default()
        } else {
            Config::from_json(text)?
        };
        config
            .without_secrets()
            .map_err(|refusal| *refusal.0)?
            .compile(&|_| None)
    }

    /// The default policy: what `{}` (or an empty document) configures, built directly.
    /// `tests/defaults.rs` holds it equal to `Policy::from_json("{}")`, field by field.
    pub fn defaults() -> Policy {
        let header = String::from(defaults::HEADER);
        let per_cell = defaults::RECORDS_PER_CELL;
        let capacity = Capacity {
            cells: defaults::CAPACITY.div_ceil(u32::from(per_cell)),
            per_cell,
        };
        let replay_headers = owned(DEFAULT_REPLAY_HEADERS);
        let records = defaults_share(u64::from(defaults::CAPACITY));
        let share = Share {
            records,
            bytes: default_bytes(defaults::MAX_MEMORY),
        };
        Policy {
            routes: alloc::vec![Route {
                prefix: "/".into(),
                methods: owned(defaults::METHODS),
                key: KeyRequirement::Optional,
                token: TokenRequirement::None,
                case_sensitive: crate::request::target::CASE_SENSITIVE_BY_DEFAULT,
                forward: Forward::Router,
                kind: RouteKind::Api,
                key_from: alloc::vec![KeySource::Header(header.clone())].into(),
                signature: None,
                pass_through: None,
                order: None,
                precondition: None,
                share: None,
            }],
            header,
            scope: alloc::vec![
                ScopeSource::Header("authorization".into()),
                ScopeSource::Peer
            ],
            fingerprint: FingerprintSpec::default(),
            ttl: Span::from_secs(24 * 60 * 60),
            lease: Span::from_secs(60),
            replay_headers,
            store_rule: StoreRule::ReleaseStatuses(DEFAULT_RELEASE_STATUSES.to_vec()),
            max_request_body: defaults::MAX_REQUEST_BODY,
            hashing_budget: defaults::HASHING_BUDGET.max(defaults::MAX_REQUEST_BODY),
            hashing_budget_per_peer: (defaults::HASHING_BUDGET / defaults::PEER_SHARES)
                .max(defaults::MAX_REQUEST_BODY),
            max_response_body: defaults::MAX_RESPONSE_BODY,
            max_relay_body: defaults::MAX_RELAY_BODY,
            relay_budget: defaults::MAX_RELAY_BODY * defaults::RELAY_EXCHANGES,
            relay_budget_per_peer: (defaults::MAX_RELAY_BODY * defaults::RELAY_EXCHANGES
                / defaults::PEER_SHARES)
                .max(defaults::MAX_RELAY_BODY),
            capacity,
            shares: Shares {
                identity: Some(share),
                peer: Some(share),
                ipv4_prefix: defaults::IPV4_PREFIX,
                ipv6_prefix: defaults::IPV6_PREFIX,
                pressure: defaults::PRESSURE_PERCENT,
                memory: defaults::MAX_MEMORY,
                memory_counted: true,
            },
            on_store_full: FailureMode::Reject,
            on_store_error: FailureMode::Reject,
            token: None,
            store: StoreKind::Local,
        }
    }
}

fn span(field: &str, value: Option<&str>, default: &str) -> Result<Span, Refusal> {
    value
        .unwrap_or(default)
        .parse::<Span>()
        .map_err(|e| invalid(field, &[e.text()]))
}

/// The default share of `whole` (records, or the memory bound's bytes):
/// [`defaults::SHARE_PERCENT`] of it, at least one.
fn defaults_share(whole: u64) -> u64 {
    percent_of(whole, defaults::SHARE_PERCENT)
}

fn percent_of(whole: u64, percent: u64) -> u64 {
    let part = u128::from(whole) * u128::from(percent) / 100;
    u64::try_from(part).unwrap_or(u64::MAX).max(1)
}

/// `"N%"` with N from 1 to 100: N; anything else `None`. Both kinds of share take percentages.
fn percentage(text: &str) -> Option<u64> {
    text.strip_suffix('%')
        .and_then(|p| p.trim().parse::<u64>().ok())
        .filter(|p| (1..=100).contains(p))
}

/// `shares.pressure`: `"0%"` (shares always bind) to `"100%"` (never).
fn pressure(text: &str) -> Result<u8, Refusal> {
    text.strip_suffix('%')
        .and_then(|p| p.trim().parse::<u8>().ok())
        .filter(|p| *p <= 100)
        .ok_or_else(|| {
            invalid(
                "shares.pressure",
                &["expected a percentage of `capacity` from \"0%\" to \"100%\""],
            )
        })
}

/// Each fill shard of the local store keeps its part of `max_memory`: the smallest part must hold
/// one answer of `max_response_body`, or such answers could never be kept there. The refusal
/// names the `max_memory` that would do.
fn fits_one_answer_per_shard(
    capacity: Capacity,
    max_memory: u64,
    max_response_body: u64,
    replay_headers: &[String],
) -> Result<(), Refusal> {
    let layout = crate::store::Layout { capacity };
    let one = crate::policy::record_bound(max_response_body, replay_headers);
    let smallest = layout.smallest_fill_part(max_memory);
    if smallest >= one {
        return Ok(());
    }
    Err(invalid(
        "max_memory",
        &[
            "gives the smallest fill shard of the local store ",
            &decimal(smallest),
            " bytes, less than one answer of max_response_body with its replayed headers and \
             record overhead (",
            &decimal(one),
            "): raise max_memory to at least ",
            &decimal(layout.max_memory_for(one)),
            ", or lower max_response_body or capacity",
        ],
    ))
}

/// The default byte share of a payer in a store of `max_memory` bytes: the same part of it as
/// the default record share is of `capacity`, so ten flooding clients are needed to fill it.
fn default_bytes(max_memory: u64) -> u64 {
    percent_of(max_memory, defaults::SHARE_PERCENT)
}

/// A byte share as configured, of a store whose byte bound is `bound` bytes (`max_memory`):
/// by default [`default_bytes`]; `u64::MAX` (never reached) for `"off"`.
fn byte_share(field: &str, value: Option<&Size>, bound: u64) -> Result<u64, Refusal> {
    const EXPECTED: &str =
        "expected a size such as \"16MiB\", a percentage of `max_memory` from \"1%\" to \"100%\", or \"off\"";
    let bytes = match value {
        None => default_bytes(bound),
        Some(Size::Bytes(n)) => *n,
        Some(Size::Text(text)) if text == "off" => return Ok(u64::MAX),
        Some(Size::Text(text)) if text.ends_with('%') => percentage(text)
            .map(|p| percent_of(bound, p))
            .ok_or_else(|| invalid(field, &[EXPECTED]))?,
        Some(Size::Text(text)) => parse_size(text).ok_or_else(|| invalid(field, &[EXPECTED]))?,
    };
    if bytes == 0 {
        return Err(invalid(field, &["must be at least 1 byte"]));
    }
    Ok(bytes)
}

/// A share as configured, in records of a store of `records`; `None` for `"off"`.
fn share(field: &str, value: Option<&ShareAmount>, records: u64) -> Result<Option<u64>, Refusal> {
    let n = match value {
        None => defaults_share(records),
        Some(ShareAmount::Records(n)) => *n,
        Some(ShareAmount::Text(text)) if text == "off" => return Ok(None),
        Some(ShareAmount::Text(text)) => {
            let percent = percentage(text).ok_or_else(|| {
                invalid(
                    field,
                    &["expected a number of records, a percentage from \"1%\" to \"100%\", or \"off\""],
                )
            })?;
            percent_of(records, percent)
        }
    };
    if n == 0 || n > records {
        return Err(invalid(
            field,
            &["must be between 1 and `capacity` (", &decimal(records), ")"],
        ));
    }
    Ok(Some(n))
}

fn size(field: &str, value: Option<&Size>, default: u64) -> Result<u64, Refusal> {
    match value {
        None => Ok(default),
        Some(Size::Bytes(n)) => Ok(*n),
        Some(Size::Text(text)) => parse_size(text).ok_or_else(|| {
            invalid(
                field,
                &["expected a byte count or a size such as \"64KiB\", \"1MiB\""],
            )
        }),
    }
}

/// `"512"`, `"64KiB"`, `"1MiB"`, `"1GiB"` (also `KB`/`MB`/`GB` as powers of 1000).
pub fn parse_size(text: &str) -> Option<u64> {
    const UNITS: [(&str, u64); 8] = [
        ("", 1),
        ("B", 1),
        ("KiB", 1 << 10),
        ("MiB", 1 << 20),
        ("GiB", 1 << 30),
        ("KB", 1_000),
        ("MB", 1_000_000),
        ("GB", 1_000_000_000),
    ];
    let text = text.trim();
    // A digit is one byte, so the first byte that is not one starts the unit.
    let digits = text
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at_checked(digits)?;
    let number: u64 = number.parse().ok()?;
    let unit = unit.trim();
    let (_, scale) = UNITS.iter().find(|(name, _)| *name == unit)?;
    number.checked_mul(*scale)
}

fn header_name(field: &str, name: &str) -> Result<String, Refusal> {
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if valid {
        let mut name = copy(name);
        name.make_ascii_lowercase();
        Ok(name)
    } else {
        Err(invalid(
            field,
            &["`", name, "` is not a valid HTTP header name"],
        ))
    }
}

impl Config {
    /// The configuration without what needs a secret: the store section (its record secrets), the
    /// token section and routes' token requirements, and signature rules — each preset filled in
    /// first, so a callback route keeps the key source and scope its preset gives it.
    fn without_secrets(mut self) -> Result<Config, Refusal> {
        self.store = None;
        self.token = None;
        for (i, route) in self.routes.iter_mut().flatten().enumerate() {
            if let Some(preset) = route.preset.take() {
                let filled = preset.fill(i, route)?;
                *route = filled;
            }
            // The route's events are still the signed ones the filter admits: its ordering
            // guard's keys are derived all the same.
            if let (Some(order), Some(_)) = (&mut route.order, &route.signature) {
                order.allow_unsigned = true;
            }
            route.signature = None;
            route.token = None;
        }
        Ok(self)
    }

    /// Validates into a [`Policy`].
    pub fn compile(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Policy, ConfigError> {
        self.validate(env).map_err(|refusal| *refusal.0)
    }

    /// [`Config::compile`], with the error in a [`Refusal`].
    fn validate(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Policy, Refusal> {
        let header = header_name("header", self.header.as_deref().unwrap_or(defaults::HEADER))?;
        let scope = self.compile_scope()?;
        let fingerprint = self.compile_fingerprint()?;
        let ttl = span("ttl", self.ttl.as_deref(), defaults::TTL)?;
        let lease = span("lease", self.lease.as_deref(), defaults::LEASE)?;
        if ttl.as_millis() == 0 {
            return Err(invalid("ttl", &["must be longer than zero"]));
        }
        if lease.as_millis() == 0 || lease > ttl {
            return Err(invalid(
                "lease",
                &["must be longer than zero and not longer than `ttl`"],
            ));
        }
        let routes = self.compile_routes(lease, &header, env)?;
        let replay_headers = match &self.replay_headers {
            None => owned(DEFAULT_REPLAY_HEADERS),
            Some(list) => {
                let mut out = Vec::new();
                for (i, name) in list.iter().enumerate() {
                    let field = item("replay_headers", i, "");
                    let name = header_name(&field, name)?;
                    if NEVER_REPLAYED.contains(&name.as_str()) || name.starts_with("x-envoy-") {
                        return Err(refuse(field, &["`", &name, "` may never be replayed"]));
                    }
                    out.push(name);
                }
                out
            }
        };
        let store_rule = match (self.store_responses, &self.release_statuses) {
            (None | Some(StoreConfig::NotDone), None) => {
                StoreRule::ReleaseStatuses(DEFAULT_RELEASE_STATUSES.to_vec())
            }
            (None | Some(StoreConfig::NotDone), Some(list)) => {
                if let Some(bad) = list.iter().find(|s| !(100..=599).contains(*s)) {
                    return Err(invalid(
                        "release_statuses",
                        &[&decimal(u64::from(*bad)), " is not an HTTP status"],
                    ));
                }
                StoreRule::ReleaseStatuses(list.clone())
            }
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "release_statuses",
                    &["only applies when `store_responses` is \"not_done\""],
                ))
            }
            (Some(StoreConfig::All), None) => StoreRule::StoreAll,
            (Some(StoreConfig::Success), None) => StoreRule::SuccessOnly,
        };
        let max_request_body = size(
            "max_request_body",
            self.max_request_body.as_ref(),
            defaults::MAX_REQUEST_BODY,
        )?;
        // What one stream may hold: `max_request_body` for each copy of its body its route
        // keeps. Both the budget and a peer's part of it must fit one stream alone.
        let copies = routes.iter().map(Route::body_copies).max().unwrap_or(1);
        let one_stream = max_request_body.saturating_mul(copies);
        let at_least: &[&str] = if copies == 1 {
            &["must be at least `max_request_body` (one stream alone could never finish)"]
        } else {
            &[
                "must be at least `max_request_body` times ",
                &decimal(copies),
                ", the copies of a body a route keeps (one stream alone could never finish)",
            ]
        };
        let (hashing_budget, hashing_budget_per_peer) = budget::BudgetFields {
            total: ("hashing_budget", self.hashing_budget.as_ref()),
            per_peer: (
                "hashing_budget_per_peer",
                self.hashing_budget_per_peer.as_ref(),
            ),
            default_total: defaults::HASHING_BUDGET,
            one: one_stream,
            at_least,
        }
        .compile()?;
        let max_response_body = size(
            "max_response_body",
            self.max_response_body.as_ref(),
            defaults::MAX_RESPONSE_BODY,
        )?;
        if max_response_body > u64::from(u32::MAX) {
            return Err(invalid("max_response_body", &["must be below 4 GiB"]));
        }
        let max_relay_body = size(
            "upstream.max_body",
            self.upstream.as_ref().and_then(|u| u.max_body.as_ref()),
            defaults::MAX_RELAY_BODY,
        )?;
        if max_relay_body > u64::from(u32::MAX) {
            return Err(invalid("upstream.max_body", &["must be below 4 GiB"]));
        }
        let (relay_budget, relay_budget_per_peer) = self.compile_relay_budget(max_relay_body)?;
        let records = self.capacity.unwrap_or(defaults::CAPACITY);
        let per_cell = self.records_per_cell.unwrap_or(defaults::RECORDS_PER_CELL);
        if records == 0 {
            return Err(invalid("capacity", &["must be at least 1"]));
        }
        if per_cell == 0 || per_cell > 64 {
            return Err(invalid("records_per_cell", &["must be between 1 and 64"]));
        }
        let capacity = Capacity {
            cells: records.div_ceil(u32::from(per_cell)),
            per_cell,
        };
        let max_memory = size("max_memory", self.max_memory.as_ref(), defaults::MAX_MEMORY)?;
        // A store whose every record at its largest fits `max_memory` needs no byte count.
        let largest = crate::policy::record_bound(max_response_body, &replay_headers);
        let memory_counted = capacity.records().saturating_mul(largest) > max_memory;
        let shares = self.compile_shares(records, (max_memory, memory_counted))?;
        let mut routes = routes;
        self.compile_route_shares(&mut routes, &shares, records)?;
        let failure = |value: Option<FailureConfig>| match value {
            Some(FailureConfig::PassThrough) => FailureMode::PassThrough,
            Some(FailureConfig::Reject) | None => FailureMode::Reject,
        };
        let token = self.compile_token(env)?;
        if let Some(i) = routes
            .iter()
            .position(|r| r.token == TokenRequirement::Required)
        {
            if token.is_none() {
                return Err(refuse(
                    item("routes", i, ".token"),
                    &["requires a `token` section with a secret"],
                ));
            }
        }
        let store = self.compile_store(env)?;
        if matches!(store, StoreKind::Local) {
            fits_one_answer_per_shard(capacity, max_memory, max_response_body, &replay_headers)?;
        }
        Ok(Policy {
            header,
            routes,
            scope,
            fingerprint,
            ttl,
            lease,
            replay_headers,
            store_rule,
            max_request_body,
            hashing_budget,
            hashing_budget_per_peer,
            max_response_body,
            max_relay_body,
            relay_budget,
            relay_budget_per_peer,
            capacity,
            shares,
            on_store_full: failure(self.on_store_full),
            on_store_error: failure(self.on_store_error),
            token,
            store,
        })
    }

    fn compile_routes(
        &self,
        lease: Span,
        header: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Vec<Route>, Refusal> {
        let default_key_from: Arc<[KeySource]> =
            alloc::vec![KeySource::Header(copy(header))].into();
        let Some(list) = &self.routes else {
            return Ok(alloc::vec![Route {
                prefix: copy("/"),
                methods: owned(defaults::METHODS),
                key: KeyRequirement::Optional,
                token: TokenRequirement::None,
                case_sensitive: crate::request::target::CASE_SENSITIVE_BY_DEFAULT,
                forward: self.compile_forward(None, lease)?,
                kind: RouteKind::Api,
                key_from: default_key_from,
                signature: None,
                pass_through: None,
                order: None,
                precondition: None,
                share: None,
            }]);
        };
        let mut routes = Vec::new();
        for (i, route) in list.iter().enumerate() {
            let filled;
            let route = match route.preset {
                Some(preset) => {
                    filled = preset.fill(i, route)?;
                    &filled
                }
                None => route,
            };
            if !route.prefix.starts_with('/') {
                return Err(refuse(
                    item("routes", i, ".prefix"),
                    &["must start with `/`"],
                ));
            }
            if route.prefix.contains(['?', '#']) {
                return Err(refuse(
                    item("routes", i, ".prefix"),
                    &["is matched against the path without its query, so it may not contain `?` or `#`"],
                ));
            }
            let kind = match route.kind {
                Some(RouteKindConfig::Callback) => RouteKind::Callback,
                Some(RouteKindConfig::Api) | None => RouteKind::Api,
            };
            let methods = match &route.methods {
                None if kind == RouteKind::Callback => alloc::vec![copy("POST")],
                None => owned(defaults::METHODS),
                Some(methods) if methods.is_empty() => {
                    return Err(refuse(
                        item("routes", i, ".methods"),
                        &["must name at least one method"],
                    ))
                }
                Some(methods) => {
                    let mut out = Vec::new();
                    for (j, m) in methods.iter().enumerate() {
                        if m.is_empty() || !m.bytes().all(|b| b.is_ascii_alphabetic()) {
                            return Err(refuse(
                                item(&item("routes", i, ".methods"), j, ""),
                                &["`", m, "` is not an HTTP method"],
                            ));
                        }
                        let mut m = copy(m);
                        m.make_ascii_uppercase();
                        out.push(m);
                    }
                    out
                }
            };
            let key_from = match (&route.key_from, kind) {
                (None, RouteKind::Api) => Arc::clone(&default_key_from),
                (None, RouteKind::Callback) => {
                    return Err(refuse(
                        item("routes", i, ".key_from"),
                        &["a callback route needs the provider's delivery id, e.g. [{\"header\": \"x-github-delivery\"}] or [{\"json\": \"/id\"}]"],
                    ))
                }
                (Some(list), _) => compile_key_from(i, list)?,
            };
            let signature = match (&route.signature, kind) {
                (None, _) => None,
                (Some(_), RouteKind::Api) => {
                    return Err(refuse(
                        item("routes", i, ".signature"),
                        &["only applies to routes of kind \"callback\""],
                    ))
                }
                (Some(sig), RouteKind::Callback) => Some(compile_signature(i, sig, env)?),
            };
            let pass_through = match (&route.pass_through, kind) {
                (None, _) => None,
                (Some(_), RouteKind::Api) => {
                    return Err(refuse(
                        item("routes", i, ".pass_through"),
                        &["only applies to routes of kind \"callback\""],
                    ))
                }
                (Some(pass), RouteKind::Callback) => {
                    let at = item("routes", i, ".pass_through.values");
                    if pass.values.is_empty() {
                        return Err(refuse(at, &["must name at least one value"]));
                    }
                    let from = match (&pass.header, &pass.json) {
                        (Some(name), None) => PassThroughSource::Header(header_name(
                            &item("routes", i, ".pass_through.header"),
                            name,
                        )?),
                        (None, Some(pointer)) => {
                            PassThroughSource::Json(JsonPointer::parse(pointer).map_err(|e| {
                                refuse(item("routes", i, ".pass_through.json"), &[&e.message()])
                            })?)
                        }
                        _ => {
                            return Err(refuse(
                                item("routes", i, ".pass_through"),
                                &["needs exactly one of `header` and `json`"],
                            ))
                        }
                    };
                    Some(Arc::new(PassThrough {
                        from,
                        values: pass.values.clone(),
                    }))
                }
            };
            // Stored in the form requests are compared in (see `crate::request::path`).
            let case_sensitive = route
                .case_sensitive
                .unwrap_or(crate::request::target::CASE_SENSITIVE_BY_DEFAULT);
            let mut prefix = crate::request::path::normalize(&route.prefix);
            if !case_sensitive {
                prefix.make_ascii_lowercase();
            }
            let order = order::compile(i, route.order.as_ref(), kind, signature.is_some())?;
            let precondition = route.precondition.map(|p| match p {
                PreconditionConfig::IfMatch => crate::order::Precondition::IfMatch,
                PreconditionConfig::IfMatchOrAny => crate::order::Precondition::IfMatchOrAny,
            });
            routes.push(Route {
                prefix,
                case_sensitive,
                methods,
                kind,
                key_from,
                signature,
                pass_through,
                order,
                precondition,
                share: None,
                key: match (route.key, kind) {
                    (Some(KeyConfig::Required), _) | (None, RouteKind::Callback) => {
                        KeyRequirement::Required
                    }
                    (Some(KeyConfig::Optional), _) | (None, RouteKind::Api) => {
                        KeyRequirement::Optional
                    }
                },
                token: match route.token {
                    Some(TokenRequirementConfig::Required) => TokenRequirement::Required,
                    Some(TokenRequirementConfig::None) | None => TokenRequirement::None,
                },
                forward: self.compile_forward(Some((i, route)), lease)?,
            });
        }
        shadow::refuse_shadowed(&routes)?;
        Ok(routes)
    }

    /// A route's [`Forward`]: detached wherever a destination is configured (`upstream.reentry`,
    /// or the explicit `upstream.cluster_skipping_routes_and_filters`), unless the route opts back
    /// into `"router"`; without one the router path is the only one possible. The upstream timeout
    /// must be shorter than the lease.
    fn compile_forward(
        &self,
        route: Option<(usize, &RouteConfig)>,
        lease: Span,
    ) -> Result<Forward, Refusal> {
        let upstream = self.upstream.as_ref();
        let upstream_timeout = upstream.and_then(|u| u.timeout.as_deref());
        // `.field` of the route, or of `upstream`.
        let at = |field: &str| match route {
            Some((i, _)) => item("routes", i, field),
            None => ["upstream", field].concat(),
        };
        let (forward, timeout) = match route {
            Some((_, r)) => {
                if r.cluster.is_some() {
                    return Err(refuse(
                        at(".cluster"),
                        &["is no longer read: on re-entry Envoy's route configuration picks the cluster (match this path with an Envoy route instead; README, Deploy)"],
                    ));
                }
                (r.forward, r.upstream_timeout.as_ref())
            }
            None => (None, None),
        };
        if upstream.is_some_and(|u| u.cluster.is_some()) {
            return Err(refuse(
                copy("upstream.cluster"),
                &["is no longer read: set `upstream.reentry` to the cluster of the internal listener that carries your routes and the filters after idemgate (README, Deploy), or, to send claimed requests straight to a cluster and skip them, `upstream.cluster_skipping_routes_and_filters`"],
            ));
        }
        if forward == Some(ForwardConfig::Router) {
            if timeout.is_some() {
                return Err(refuse(
                    at(".upstream_timeout"),
                    &["only applies when `forward` is \"detached\""],
                ));
            }
            return Ok(Forward::Router);
        }
        let destination = match upstream {
            Some(UpstreamConfig {
                reentry: Some(_),
                cluster_skipping_routes_and_filters: Some(_),
                ..
            }) => {
                return Err(refuse(
                    copy("upstream.cluster_skipping_routes_and_filters"),
                    &["cannot be set together with `upstream.reentry`: pick one"],
                ))
            }
            Some(UpstreamConfig {
                reentry: Some(cluster),
                ..
            }) => Some(("upstream.reentry", cluster, Via::Reentry)),
            Some(UpstreamConfig {
                cluster_skipping_routes_and_filters: Some(cluster),
                ..
            }) => Some((
                "upstream.cluster_skipping_routes_and_filters",
                cluster,
                Via::SkippingRoutesAndFilters,
            )),
            _ => None,
        };
        let Some((field, cluster, via)) = destination else {
            if forward == Some(ForwardConfig::Detached) {
                return Err(refuse(
                    at(".forward"),
                    &["a detached route needs `upstream.reentry`: the cluster of the internal listener that carries the routes (README, Deploy)"],
                ));
            }
            return Ok(Forward::Router);
        };
        if cluster.is_empty() {
            return Err(refuse(copy(field), &["must name an Envoy cluster"]));
        }
        let (timeout_field, timeout) = match timeout {
            Some(t) => (at(".upstream_timeout"), Some(t.as_str())),
            None => (copy("upstream.timeout"), upstream_timeout),
        };
        let timeout = span(&timeout_field, timeout, defaults::UPSTREAM_TIMEOUT)?;
        if timeout.as_millis() == 0 || timeout >= lease {
            return Err(refuse(
                timeout_field,
                &[
                    "must be longer than zero and shorter than `lease` (",
                    &decimal(lease.as_millis()),
                    " ms): a retry must never take over a key whose upstream exchange may still answer",
                ],
            ));
        }
        Ok(Forward::Detached(Detached {
            cluster: copy(cluster),
            via,
            timeout,
        }))
    }

    /// The shares of a store of `records` whose byte bound is `max_memory` bytes, counted in its
    /// fill shards where `memory_counted`.
    fn compile_shares(
        &self,
        records: u32,
        (max_memory, memory_counted): (u64, bool),
    ) -> Result<Shares, Refusal> {
        let given = self.shares.clone().unwrap_or_default();
        let records = u64::from(records);
        let prefix = |field: &str, value: Option<u16>, default: u8, max: u16| match value {
            None => Ok(default),
            Some(n) if (1..=max).contains(&n) => Ok(n as u8),
            Some(_) => Err(invalid(
                field,
                &["must be between 1 and ", &decimal(u64::from(max))],
            )),
        };
        // One kind of payer's share: its records, then its bytes within them.
        let kind = |name: &str, count: Option<&ShareAmount>, bytes: Option<&Size>| {
            let Some(records) = share(&["shares.", name].concat(), count, records)? else {
                return Ok(None);
            };
            let field = ["shares.", name, "_bytes"].concat();
            let bytes = byte_share(&field, bytes, max_memory)?;
            Ok::<_, Refusal>(Some(Share { records, bytes }))
        };
        Ok(Shares {
            identity: kind(
                "identity",
                given.identity.as_ref(),
                given.identity_bytes.as_ref(),
            )?,
            peer: kind("peer", given.peer.as_ref(), given.peer_bytes.as_ref())?,
            ipv4_prefix: prefix(
                "shares.ipv4_prefix",
                given.ipv4_prefix,
                defaults::IPV4_PREFIX,
                32,
            )?,
            ipv6_prefix: prefix(
                "shares.ipv6_prefix",
                given.ipv6_prefix,
                defaults::IPV6_PREFIX,
                128,
            )?,
            pressure: match given.pressure.as_deref() {
                None => defaults::PRESSURE_PERCENT,
                Some(text) => pressure(text)?,
            },
            memory: max_memory,
            memory_counted,
        })
    }

    /// Each callback route's own share (`routes[i].share`), of a store of `records` records, its
    /// bytes the same part of `max_memory`. An API route has none to give: its clients are the
    /// payers, each within `shares.identity` and `shares.peer`.
    fn compile_route_shares(
        &self,
        routes: &mut [Route],
        shares: &Shares,
        records: u32,
    ) -> Result<(), Refusal> {
        for (i, (route, config)) in routes
            .iter_mut()
            .zip(self.routes.iter().flatten())
            .enumerate()
        {
            let Some(given) = &config.share else {
                continue;
            };
            let field = item("routes", i, ".share");
            if route.kind != RouteKind::Callback {
                return Err(refuse(
                    field,
                    &["only applies to routes of kind \"callback\" (or with a `preset`), whose deliveries the route itself pays for; an API route's clients each pay within `shares.identity` and `shares.peer`"],
                ));
            }
            if !shares.counted() {
                return Err(refuse(
                    field,
                    &["is counted only while shares are: `shares.identity` and `shares.peer` are both \"off\""],
                ));
            }
            route.share = share(&field, Some(given), u64::from(records))?.map(|held| Share {
                records: held,
                bytes: byte_part(held, u64::from(records), shares.memory),
            });
        }
        Ok(())
    }

    fn compile_scope(&self) -> Result<Vec<ScopeSource>, Refusal> {
        let Some(list) = &self.scope else {
            return Ok(alloc::vec![
                ScopeSource::Header(copy("authorization")),
                ScopeSource::Peer
            ]);
        };
        if list.is_empty() {
            return Err(invalid(
                "scope",
                &["must name at least one source (use [\"peer\"] for the client address)"],
            ));
        }
        let mut sources = Vec::new();
        for (i, source) in list.iter().enumerate() {
            sources.push(match source {
                ScopeConfig::Header(name) => {
                    ScopeSource::Header(header_name(&item("scope", i, ".header"), name)?)
                }
                ScopeConfig::VerifiedHeader(name) => {
                    ScopeSource::VerifiedHeader(header_name(&item("scope", i, ".header"), name)?)
                }
                ScopeConfig::Property(path)
                    if path.is_empty() || path.iter().any(String::is_empty) =>
                {
                    return Err(refuse(
                        item("scope", i, ".property"),
                        &["must be a non-empty list of non-empty path segments"],
                    ))
                }
                ScopeConfig::Property(path) => ScopeSource::Property(path.clone()),
                ScopeConfig::Peer => ScopeSource::Peer,
            });
        }
        Ok(sources)
    }

    fn compile_fingerprint(&self) -> Result<FingerprintSpec, Refusal> {
        let Some(fp) = &self.fingerprint else {
            return Ok(FingerprintSpec::default());
        };
        let mut limits = JsonLimits::default();
        if let Some(depth) = fp.max_depth {
            if depth == 0 {
                return Err(invalid("fingerprint.max_depth", &["must be at least 1"]));
            }
            limits.max_depth = depth;
        }
        let mode = match (fp.mode.unwrap_or(ModeConfig::Auto), &fp.fields) {
            (ModeConfig::Fields, None) => {
                return Err(invalid(
                    "fingerprint.fields",
                    &["mode \"fields\" needs a list of JSON pointers"],
                ))
            }
            (ModeConfig::Fields, Some(fields)) => {
                let mut pointers = Vec::new();
                for (i, text) in fields.iter().enumerate() {
                    let pointer = JsonPointer::parse(text)
                        .map_err(|e| refuse(item("fingerprint.fields", i, ""), &[&e.message()]))?;
                    pointers.push(pointer);
                }
                FingerprintMode::Fields(pointers.into())
            }
            (_, Some(_)) => {
                return Err(invalid(
                    "fingerprint.fields",
                    &["only applies to mode \"fields\""],
                ))
            }
            (ModeConfig::Auto, None) => FingerprintMode::Auto,
            (ModeConfig::Raw, None) => FingerprintMode::Raw,
            (ModeConfig::Json, None) => FingerprintMode::Json,
            (ModeConfig::Form, None) => FingerprintMode::Form,
            (ModeConfig::None, None) => FingerprintMode::None,
        };
        let headers = match &fp.headers {
            None => FingerprintSpec::default().headers,
            Some(list) => {
                let mut headers = Vec::new();
                for (i, h) in list.iter().enumerate() {
                    headers.push(header_name(&item("fingerprint.headers", i, ""), h)?);
                }
                headers
            }
        };
        Ok(FingerprintSpec {
            mode,
            headers,
            json_limits: limits,
        })
    }

    fn compile_token(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<TokenPolicy>, Refusal> {
        let Some(token) = &self.token else {
            return Ok(None);
        };
        let from_env;
        let secret = match (&token.secret, &token.secret_env) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "token.secret",
                    &["give either `secret` or `secret_env`, not both"],
                ))
            }
            (Some(secret), None) => secret,
            (None, env_name) => {
                let name = env_name.as_deref().unwrap_or(defaults::TOKEN_SECRET_ENV);
                from_env = env(name).ok_or_else(|| {
                    invalid(
                        "token.secret_env",
                        &["environment variable `", name, "` is not set for the VM"],
                    )
                })?;
                &from_env
            }
        };
        // The error names the rule, never the secret.
        let secret = TokenSecret::new(secret.as_bytes())
            .map_err(|e| invalid("token.secret", &[&shown(&e)]))?;
        let issue_path = token
            .issue_path
            .as_deref()
            .unwrap_or(defaults::TOKEN_ISSUE_PATH);
        if !issue_path.starts_with('/') {
            return Err(invalid("token.issue_path", &["must start with `/`"]));
        }
        let ttl = span("token.ttl", token.ttl.as_deref(), defaults::TOKEN_TTL)?;
        if ttl.as_millis() == 0 {
            return Err(invalid("token.ttl", &["must be longer than zero"]));
        }
        Ok(Some(TokenPolicy {
            secret,
            ttl,
            issue_path: copy(issue_path),
            header: header_name(
                "token.header",
                token.header.as_deref().unwrap_or(defaults::TOKEN_HEADER),
            )?,
        }))
    }
}

fn compile_key_from(route: usize, list: &[KeySourceConfig]) -> Result<Arc<[KeySource]>, Refusal> {
    let list_field = item("routes", route, ".key_from");
    if list.is_empty() {
        return Err(refuse(list_field, &["must name at least one source"]));
    }
    let mut sources = Vec::new();
    for (j, source) in list.iter().enumerate() {
        let field = item(&list_field, j, "");
        sources.push(match source {
            KeySourceConfig::Header(name) => KeySource::Header(header_name(&field, name)?),
            KeySourceConfig::Json(pointer) => KeySource::Json(
                JsonPointer::parse(pointer).map_err(|e| refuse(field, &[&e.message()]))?,
            ),
            KeySourceConfig::Form(name) if name.is_empty() => {
                return Err(refuse(field, &["the form field name may not be empty"]))
            }
            KeySourceConfig::Form(name) => KeySource::Form(copy(name)),
            KeySourceConfig::CloudEvent => KeySource::CloudEvent,
        });
    }
    Ok(sources.into())
}

fn compile_signature(
    route: usize,
    sig: &SignatureConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<SignatureRule, Refusal> {
    let at = |name: &str| item("routes", route, &[".signature.", name].concat());
    let from_env = |field: &str, name: &str| {
        env(name).ok_or_else(|| {
            refuse(
                at(field),
                &["environment variable `", name, "` is not set for the VM"],
            )
        })
    };
    let secrets: Vec<String> = match (&sig.secret, &sig.secret_env, &sig.secrets, &sig.secrets_env)
    {
        (Some(secret), None, None, None) => alloc::vec![copy(secret)],
        (None, Some(name), None, None) => alloc::vec![from_env("secret_env", name)?],
        (None, None, Some(list), None) if !list.is_empty() => list.clone(),
        (None, None, None, Some(names)) if !names.is_empty() => {
            let mut out = Vec::new();
            for name in names {
                out.push(from_env("secrets_env", name)?);
            }
            out
        }
        (None, None, Some(_), None) | (None, None, None, Some(_)) => {
            return Err(refuse(at("secrets"), &["must name at least one secret"]))
        }
        _ => {
            return Err(refuse(
                at("secret"),
                &["give exactly one of `secret`, `secret_env`, `secrets` or `secrets_env`"],
            ))
        }
    };
    let Some(scheme) = sig.scheme else {
        return Err(refuse(
            at("scheme"),
            &["missing field (or give the route a `preset` that names one)"],
        ));
    };
    let tolerance = || -> Result<Span, Refusal> {
        match &sig.tolerance {
            None => Ok(DEFAULT_TOLERANCE),
            Some(text) => text
                .parse::<Span>()
                .map_err(|e| refuse(at("tolerance"), &[e.text()])),
        }
    };
    let scheme = match scheme {
        SignatureSchemeConfig::GitHub | SignatureSchemeConfig::Shopify if sig.tolerance.is_some() => {
            return Err(refuse(
                at("tolerance"),
                &["only applies to schemes that sign a timestamp (stripe, standard-webhooks, svix, slack); this one signs none"],
            ))
        }
        SignatureSchemeConfig::GitHub => SignatureScheme::GitHub,
        SignatureSchemeConfig::Shopify => SignatureScheme::Shopify,
        SignatureSchemeConfig::Stripe => SignatureScheme::Stripe {
            tolerance: tolerance()?,
        },
        SignatureSchemeConfig::StandardWebhooks => SignatureScheme::StandardWebhooks {
            tolerance: tolerance()?,
        },
        SignatureSchemeConfig::Svix => SignatureScheme::Svix {
            tolerance: tolerance()?,
        },
        SignatureSchemeConfig::Slack => SignatureScheme::Slack {
            tolerance: tolerance()?,
        },
    };
    let secrets: Vec<&[u8]> = secrets.iter().map(|s| s.as_bytes()).collect();
    // The error names the rule, never the secret.
    SignatureRule::new(scheme, &secrets).map_err(|e| refuse(at("secret"), &[&shown(&e)]))
}
