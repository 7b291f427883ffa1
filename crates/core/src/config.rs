//! Plugin configuration as operators write it (JSON), validated once into a [`Policy`]. Unknown
//! fields are refused (a typo must not silently become a default); every error names the field and
//! the reason, so Envoy's log line for a rejected config is enough to fix it.
//!
//! The document is read with [`crate::request::json::Value`] and mapped field by field (no serde):
//! the shipped filter stays free of serde's code size, and the mapping is where the unknown-field
//! and type checks live, each naming the field's path (`routes[1].methods`).

use crate::client::signature::{SignatureRule, SignatureScheme, DEFAULT_TOLERANCE};
use crate::client::token::TokenSecret;
use crate::headers::NEVER_REPLAYED;
use crate::order::transition::TableError;
use crate::policy::RouteKind;
use crate::policy::{
    Capacity, Detached, FailureMode, Forward, KeyRequirement, PassThrough, PassThroughSource,
    Policy, Route, ScopeSource, StoreKind, StoreRule, TokenPolicy, TokenRequirement, Via,
    DEFAULT_RELEASE_STATUSES, DEFAULT_REPLAY_HEADERS,
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
pub(crate) use client::FingerprintConfig;
pub(crate) use client::ModeConfig;
pub(crate) use client::ScopeConfig;
pub(crate) use client::TokenConfig;
use core::fmt;
pub use error::ConfigError;
use error::{copy, decimal, invalid, item, owned, refuse, shown, Refusal};
pub(crate) use in_flight::InFlightConfig;
pub(crate) use routes::ForwardConfig;
pub(crate) use routes::KeyConfig;
pub(crate) use routes::KeySourceConfig;
pub(crate) use routes::OrderConfig;
pub(crate) use routes::PassThroughConfig;
pub(crate) use routes::PreconditionConfig;
pub(crate) use routes::RouteConfig;
pub(crate) use routes::RouteKindConfig;
pub(crate) use routes::SignatureConfig;
pub(crate) use routes::SignatureSchemeConfig;
pub(crate) use routes::TokenRequirementConfig;
pub(crate) use routes::UpstreamConfig;
pub(crate) use shares::ShareAmount;
pub(crate) use shares::SharesConfig;
use shares::{default_bytes, defaults_share, fits_one_answer_per_shard};

mod budget;
mod client;
#[cfg(test)]
mod describe;
mod error;
mod in_flight;
mod keys;
mod order;
mod preset;
mod problems;
mod read;
mod routes;
mod shadow;
mod shares;
mod store;

/// The configuration document. Every field is optional; each default is in
/// `docs/reference/configuration.md`, generated from `describe`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Config {
    pub(crate) header: Option<String>,
    pub(crate) routes: Option<Vec<RouteConfig>>,
    pub(crate) scope: Option<Vec<ScopeConfig>>,
    pub(crate) fingerprint: Option<FingerprintConfig>,
    pub(crate) ttl: Option<String>,
    pub(crate) lease: Option<String>,
    pub(crate) replay_headers: Option<Vec<String>>,
    pub(crate) store_responses: Option<StoreConfig>,
    pub(crate) release_statuses: Option<Vec<u16>>,
    pub(crate) max_request_body: Option<Size>,
    pub(crate) hashing_budget: Option<Size>,
    pub(crate) hashing_budget_per_peer: Option<Size>,
    pub(crate) relay_budget: Option<Size>,
    pub(crate) relay_budget_per_peer: Option<Size>,
    pub(crate) max_response_body: Option<Size>,
    pub(crate) capacity: Option<u32>,
    pub(crate) records_per_cell: Option<u16>,
    pub(crate) shares: Option<SharesConfig>,
    pub(crate) max_memory: Option<Size>,
    pub(crate) on_store_full: Option<FailureConfig>,
    pub(crate) on_store_error: Option<FailureConfig>,
    pub(crate) token: Option<TokenConfig>,
    pub(crate) upstream: Option<UpstreamConfig>,
    pub(crate) store: Option<StoreBackendConfig>,
    /// Where the edge publishes the policy: a path, or `false` for nowhere.
    pub(crate) policy_path: Option<PolicyPathConfig>,
    /// `key_format`, `key_mismatch`, `key_scope`: the default of every API route.
    pub(crate) keys: keys::KeyRulesConfig,
    /// Every route's `in_flight`, unless it says its own.
    pub(crate) in_flight: Option<InFlightConfig>,
    /// How the edge writes its problems (`problems`).
    pub(crate) problems: Option<ProblemsConfig>,
}

/// `policy_path`: where the policy document is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PolicyPathConfig {
    /// `false`: the edge publishes nothing (the upstream may).
    Off,
    At(String),
}

/// The `store` section: `{"kind": "local"}` or `{"kind": "remote", "cluster": …, "timeout": …,
/// "record_secret_env": …}`. A remote store's answers are sealed with a secret from the VM's
/// environment: `record_secret_env` names one variable, `record_secrets_env` several (rotation:
/// the first seals, each is accepted); neither means [`defaults::RECORD_SECRET_ENV`].
#[derive(Debug, Clone, Default)]
pub(crate) struct StoreBackendConfig {
    pub(crate) kind: Option<String>,
    pub(crate) cluster: Option<String>,
    pub(crate) timeout: Option<String>,
    pub(crate) record_secret_env: Option<String>,
    pub(crate) record_secrets_env: Option<Vec<String>>,
}

pub(crate) use preset::PresetConfig;
pub(crate) use problems::ProblemsConfig;

#[derive(Debug, Clone, Copy)]
pub(crate) enum StoreConfig {
    NotDone,
    All,
    Success,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum FailureConfig {
    Reject,
    PassThrough,
}

/// A byte size: a number of bytes, or a string such as `"64KiB"`, `"1MiB"`.
#[derive(Debug, Clone)]
pub(crate) enum Size {
    Bytes(u64),
    Text(String),
}

/// Defaults, in one place (the generated reference states the same values, and a test holds
/// them equal: `describe::tests::documented_defaults_are_the_defaults`).
pub(crate) mod defaults {
    pub(crate) const HEADER: &str = crate::request::key::HEADER;
    /// Where the policy is published unless `policy_path` says otherwise.
    pub(crate) const POLICY_PATH: &str = "/.well-known/idempotency";
    pub(crate) const TTL: &str = "24h";
    pub(crate) const LEASE: &str = "60s";
    pub(crate) const MAX_REQUEST_BODY: u64 = 1024 * 1024;
    pub(crate) const HASHING_BUDGET: u64 = 64 * 1024 * 1024;
    /// `hashing_budget_per_peer` is by default `hashing_budget` divided by this (and at least
    /// what a lone stream needs): more than four, so four address groups — four IPv6 /64s are
    /// cheap — holding their whole parts still leave half of the budget to everyone else.
    pub(crate) const PEER_SHARES: u64 = 8;
    /// Answers of ordinary APIs are kept whole: a JSON list or document of a megabyte replays as
    /// it was sent. What the store may hold is bounded in bytes by [`MAX_MEMORY`], not by
    /// `capacity` times this.
    pub(crate) const MAX_RESPONSE_BODY: u64 = 1024 * 1024;
    /// The local store's byte bound (`max_memory`): what a sidecar can spare. Split over the fill
    /// shards; an answer that does not fit its shard's part is kept without its body.
    pub(crate) const MAX_MEMORY: u64 = 256 * 1024 * 1024;
    pub(crate) const CAPACITY: u32 = 10_000;
    pub(crate) const RECORDS_PER_CELL: u16 = 8;
    /// Each payer's share of the whole store, in percent of `capacity`: one address or
    /// one verified identity may hold a tenth of it, so ten flooding clients are needed to fill it.
    pub(crate) const SHARE_PERCENT: u64 = 10;
    /// Shares bind only while the store is at least this full (percent of `capacity`): below it
    /// a busy client is served however much it holds. Not half: with 8 records per cell, a store
    /// 20 % full has a full cell for one key in 4,000, a store half full for one in 20 — a flood
    /// let through to half would turn away everyone's every twentieth request as `store_full`.
    pub(crate) const PRESSURE_PERCENT: u8 = 20;
    /// One IPv4 address is one peer; an IPv6 host holds a whole /64.
    pub(crate) const IPV4_PREFIX: u8 = 32;
    pub(crate) const IPV6_PREFIX: u8 = 64;
    pub(crate) const TOKEN_TTL: &str = "10m";
    pub(crate) const TOKEN_ISSUE_PATH: &str = crate::client::token::ISSUE_PATH;
    pub(crate) const TOKEN_HEADER: &str = "idemgate-token";
    pub(crate) const TOKEN_SECRET_ENV: &str = "IDEMGATE_TOKEN_SECRET";
    /// The variable holding the secret that seals a remote store's answers (`store.kind: "remote"`).
    pub(crate) const RECORD_SECRET_ENV: &str = "IDEMGATE_RECORD_SECRET";
    pub(crate) const METHODS: &[&str] = &["POST", "PATCH"];
    /// Envoy's own default route timeout.
    pub(crate) const UPSTREAM_TIMEOUT: &str = "15s";
    /// A detached exchange relays answers up to this whole to its first client.
    pub(crate) const MAX_RELAY_BODY: u64 = 8 * 1024 * 1024;
    /// `relay_budget` is by default this many exchanges' worth of `upstream.max_body` per VM (a
    /// worker), so that a peer's part ([`PEER_SHARES`]) is eight exchanges in flight: a
    /// provider's burst of callbacks from one address passes on every worker, while what Envoy
    /// may buffer for a worker's answers stays bounded (512 MiB at the default 8 MiB bound, an
    /// address group's part 64 MiB).
    pub(crate) const RELAY_EXCHANGES: u64 = 64;
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
    /// `src/tests/defaults.rs` holds it equal to `Policy::from_json("{}")`, field by field.
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
                keys: crate::request::key_format::KeyRules::DEFAULT,
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
                wait: None,
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
            published: Some(String::from(defaults::POLICY_PATH)),
            problems: crate::policy::ProblemStyle::DEFAULT,
        }
    }
}

fn span(field: &str, value: Option<&str>, default: &str) -> Result<Span, Refusal> {
    value
        .unwrap_or(default)
        .parse::<Span>()
        .map_err(|e| invalid(field, &[e.text()]))
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
pub(crate) fn parse_size(text: &str) -> Option<u64> {
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
    pub(crate) fn compile(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Policy, ConfigError> {
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
                    // The degraded mark too: only the edge says it, of an answer never stored.
                    if NEVER_REPLAYED.contains(&name.as_str())
                        || name.starts_with("x-envoy-")
                        || name == crate::answer::DEGRADED_HEADER
                    {
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
        let published = match self.policy_path.clone() {
            None => Some(String::from(defaults::POLICY_PATH)),
            Some(PolicyPathConfig::Off) => None,
            Some(PolicyPathConfig::At(path)) if path.starts_with('/') && !path.contains('?') => {
                Some(path)
            }
            Some(PolicyPathConfig::At(_)) => {
                return Err(refuse(
                    String::from("policy_path"),
                    &["must be a path starting with `/`, without a query, or false"],
                ))
            }
        };
        let problems = problems::compile(self.problems.as_ref())?;
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
            published,
            problems,
        })
    }
}
