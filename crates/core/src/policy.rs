//! The compiled policy: configuration after validation, in the shape the rules use. Hosts build it
//! once (Envoy's `on_configure`) and share it by reference into every request; nothing here is
//! re-parsed per request.

pub(crate) use crate::client::scope::ScopeSource;
pub(crate) use crate::record::never_replayed;
use crate::request::budget::Limits;
use crate::request::fingerprint::FingerprintSpec;
use crate::request::target::path_without_query;
use crate::time::Span;
use alloc::string::String;
use alloc::vec::Vec;

pub(crate) mod problems;
pub(crate) use problems::ProblemStyle;

/// Replayed by default (`docs/semantics.md` §5): headers that describe the stored representation.
/// Never `set-cookie`, hop-by-hop headers, or the proxy's own.
pub const DEFAULT_REPLAY_HEADERS: &[&str] = &[
    "content-type",
    "content-language",
    "content-encoding",
    "location",
    "etag",
    "last-modified",
    "cache-control",
    "link",
    "vary",
];

/// Upstream answers by which the upstream says it did not act: release the claim so a retry runs.
pub const DEFAULT_RELEASE_STATUSES: &[u16] = &[408, 425, 429, 502, 503, 504];

/// A method-and-path rule that says the filter guards these requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Path prefix, matched against the normalised path without its query (`crate::request::path`);
    /// stored normalised, and in lower case when the route is not case-sensitive.
    pub prefix: String,
    /// Upper-case methods guarded on this route.
    pub methods: Vec<String>,
    pub(crate) key: KeyRequirement,
    /// The key's format, what a key of another format gets, and the key's namespace.
    pub(crate) keys: crate::request::key_format::KeyRules,
    pub token: TokenRequirement,
    /// Whether `/Payments` is another path than `/payments` (default: no, as in most upstreams'
    /// routers; a rule that matches more spellings can only add protection).
    pub(crate) case_sensitive: bool,
    /// How a request that claims its key reaches the upstream.
    pub forward: Forward,
    /// An API route (clients send keys) or a provider's callback route.
    pub kind: RouteKind,
    /// Where the key comes from, in order; the first source present wins (default: the key
    /// header).
    pub(crate) key_from: alloc::sync::Arc<[crate::request::key_source::KeySource]>,
    /// On callback routes: the provider's signature every delivery must carry.
    pub(crate) signature: Option<crate::client::signature::SignatureRule>,
    /// On callback routes: the control messages that pass unguarded (an SNS subscription
    /// confirmation): never claimed, never stored.
    pub(crate) pass_through: Option<alloc::sync::Arc<PassThrough>>,
    /// On callback routes: the sequencer of each resource's events.
    pub(crate) order: Option<alloc::sync::Arc<crate::order::OrderRule>>,
    /// Whether updates must name the version they read (`If-Match`).
    pub precondition: Option<crate::order::Precondition>,
    /// On callback routes: what the route itself, as the payer of its deliveries' records, may
    /// hold in the whole store while it is under pressure (`share`); `None`: the whole store, so
    /// the route is charged nothing and only a full store refuses it.
    pub(crate) share: Option<crate::client::payer::Share>,
    /// How long a duplicate of a request in flight waits for the first's answer (`in_flight.wait`);
    /// `None`: it is answered 409 at once.
    pub(crate) wait: Option<crate::time::Span>,
}

impl Route {
    /// How long a duplicate of a request in flight waits here for its answer; `None`: it is
    /// answered 409 at once.
    pub fn wait(&self) -> Option<crate::time::Span> {
        self.wait
    }

    /// How many copies of a request body a host may keep on this route at once, each bounded by
    /// `max_request_body`: the fingerprint's state, plus the body kept for a body key source,
    /// for the sequencer's body sources, and for a detached exchange. A lone stream on the
    /// route needs `max_request_body` times this much of the hashing budget.
    pub fn body_copies(&self) -> u64 {
        let key = self
            .key_from
            .iter()
            .any(|source| !matches!(source, crate::request::key_source::KeySource::Header(_)));
        let key = key
            || self
                .pass_through
                .as_ref()
                .is_some_and(|pass| matches!(pass.from, PassThroughSource::Json(_)));
        let order = self.order.as_ref().is_some_and(|rule| rule.needs_body());
        let detached = matches!(self.forward, Forward::Detached(_));
        1 + u64::from(key) + u64::from(order) + u64::from(detached)
    }
}

/// Requests a callback route lets through without a key: those whose message type —
/// a header, or a field of the body — is one of `values` (exact; a header after optional
/// whitespace). Such a message is not a delivery to deduplicate — AWS SNS sends a body with
/// `"Type": "SubscriptionConfirmation"`, and each one must reach the subscriber.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PassThrough {
    pub(crate) from: PassThroughSource,
    pub(crate) values: Vec<String>,
}

/// Where a route reads the message type that lets a request through.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PassThroughSource {
    /// A request header (lowercase name): decided with the headers, but the sender's signature
    /// rarely covers it.
    Header(String),
    /// A string field of a JSON body: decided at the end of the body, and covered by a signature
    /// over the body (SNS signs `Type` with the message).
    Json(crate::request::json::JsonPointer),
}

impl PassThrough {
    /// Whether a request with these headers passes (`header` gives every value of a lowercase
    /// name). Every occurrence must name a passing value: a control type and a notification type
    /// in one request is not a control message. Never true for a body field.
    pub(crate) fn matches<'h>(&self, header: &dyn Fn(&str) -> Vec<&'h [u8]>) -> bool {
        let PassThroughSource::Header(name) = &self.from else {
            return false;
        };
        let values = header(name);
        !values.is_empty()
            && values.iter().all(|value| {
                let value = crate::request::key::trim_ows(value);
                self.values.iter().any(|v| v.as_bytes() == value)
            })
    }

    /// Whether a request with this whole body passes, for a body field: the body is JSON and the
    /// field a string equal to one of `values`. A body that is not JSON, or lacks the field, is
    /// not a control message.
    pub(crate) fn matches_body(&self, body: &[u8]) -> bool {
        let PassThroughSource::Json(pointer) = &self.from else {
            return false;
        };
        core::str::from_utf8(body)
            .ok()
            .and_then(|text| crate::request::json::Value::parse(text).ok())
            .is_some_and(|doc| {
                pointer
                    .resolve(&doc)
                    .and_then(|value| value.as_str())
                    .is_some_and(|value| self.values.iter().any(|v| v == value))
            })
    }

    /// Whether the decision waits for the body.
    pub(crate) fn reads_body(&self) -> bool {
        matches!(self.from, PassThroughSource::Json(_))
    }
}

/// What kind of traffic a route guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    /// Clients send their own keys; the scope is the client; the policy's store rule applies.
    Api,
    /// At-least-once deliveries from a provider (`docs/semantics.md` §11): the delivery id is the
    /// key, the route is the scope (the provider is the client), and only a 2xx is stored —
    /// anything else releases the claim, so a forged or failing delivery can never pre-empt the
    /// real one.
    Callback,
}

/// How a claimed request reaches the upstream (answers outlive the client).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forward {
    /// Envoy's router, on the client's stream: if the client goes away, Envoy resets the upstream
    /// request and the outcome is in doubt (the key stays in flight until its lease ends).
    Router,
    /// The edge sends the request itself, on an exchange that belongs to the key, and relays the
    /// answer: the answer is stored even if the client has gone.
    Detached(Detached),
}

/// Where and how long a detached exchange runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detached {
    /// The Envoy cluster the request is sent to.
    pub cluster: String,
    /// What that cluster is: the way back into Envoy, or a shortcut that skips it.
    pub via: Via,
    /// The upstream timeout; always shorter than the lease (checked at configuration), so a retry
    /// never takes over a key whose exchange may still answer.
    pub timeout: Span,
}

/// What a detached exchange's cluster leads to (adding idemgate takes nothing away).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// An internal listener that carries the same route configuration and the filters after
    /// idemgate (`upstream.reentry`): the request is routed, rewritten, authorised and rate-limited
    /// exactly as the same request without a key. Its answers carry [`REENTRY_MARK`](crate::headers::REENTRY_MARK).
    Reentry,
    /// A cluster reached directly (`upstream.cluster_skipping_routes_and_filters`, an explicit
    /// opt-in): the route's rewrites, header rules, direct responses and cluster choice, and every
    /// filter after idemgate, do not apply to a claimed request.
    SkippingRoutesAndFilters,
}

impl Route {
    /// The path as this route sees it: normalised, and lower-cased unless case-sensitive.
    fn path_for(&self, normalized: String) -> String {
        crate::request::target::spell(normalized, self.case_sensitive)
    }

    /// Whether this route matches every request `later` would match with `method`: then `later`
    /// never sees that method, since the first matching route wins. Exact for the prefix rule of
    /// [`Route::matches`]: a case-sensitive route covers a case-insensitive one only where its
    /// prefix has no letter (any other spelling of them escapes it).
    #[cfg(feature = "config")]
    pub(crate) fn covers(&self, later: &Route, method: &str) -> bool {
        let head = later.prefix.get(..self.prefix.len());
        self.methods.iter().any(|m| m == method)
            && match (self.case_sensitive, later.case_sensitive) {
                (false, _) => head.is_some_and(|head| head.eq_ignore_ascii_case(&self.prefix)),
                (true, true) => head == Some(self.prefix.as_str()),
                (true, false) => {
                    head == Some(self.prefix.as_str())
                        && !self.prefix.bytes().any(|b| b.is_ascii_alphabetic())
                }
            }
    }

    fn matches(&self, method: &str, normalized: &str) -> bool {
        self.methods.iter().any(|m| m == method)
            && match self.case_sensitive {
                true => normalized.starts_with(self.prefix.as_str()),
                false => normalized
                    .get(..self.prefix.len())
                    .is_some_and(|head| head.eq_ignore_ascii_case(&self.prefix)),
            }
    }
}

/// A request matched to the rule that guards it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matched<'p> {
    pub route: &'p Route,
    /// The path the rules use — for the storage key and the fingerprint — without its query:
    /// normalised, lower-cased on a case-insensitive route. Every spelling of one path gives one.
    pub path: String,
}

impl Matched<'_> {
    /// What the request's fingerprint hashes as its path: [`Matched::path`] with the query of
    /// `path_and_query` (the raw `:path`) as sent. The browser module gets the same spelling from
    /// [`crate::request::target::of_fetch`].
    #[must_use]
    pub(crate) fn target<'a>(&'a self, path_and_query: &str) -> alloc::borrow::Cow<'a, str> {
        crate::request::target::with_query(&self.path, path_and_query)
    }

    /// The storage key the filter derives for `key` sent by `scope` with `method` on this match:
    /// on a route with `key_scope: "client"` the method and path are left out, so the client's
    /// key names one record across every such route. What a host outside the filter (the store
    /// service's operator commands) uses, so it never spells the derivation differently.
    pub fn storage_key(
        &self,
        scope: crate::client::scope::Scope<'_>,
        method: &str,
        key: &crate::request::key::IdempotencyKey,
    ) -> crate::client::scope::StorageKey {
        let (method, path) = self.route.keys.namespace(method, &self.path);
        crate::client::scope::StorageKey::derive(scope, method, path, key)
    }
}

/// Whether a guarded request must carry a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRequirement {
    /// Missing key → 400.
    Required,
    /// Missing key → passed through untouched (and counted).
    Optional,
}

/// Whether a guarded request must carry a one-time token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenRequirement {
    None,
    Required,
}

/// Which upstream answers become the idempotent result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreRule {
    /// Store every answer except these statuses, which release the claim (default: the "did not
    /// act" set).
    ReleaseStatuses(Vec<u16>),
    /// Stripe-like: once started, every answer is the result.
    StoreAll,
    /// Store only 2xx; anything else releases the claim so the client may try again.
    SuccessOnly,
}

impl StoreRule {
    pub fn stores(&self, status: u16) -> bool {
        match self {
            StoreRule::ReleaseStatuses(release) => !release.contains(&status),
            StoreRule::StoreAll => true,
            StoreRule::SuccessOnly => (200..300).contains(&status),
        }
    }
}

/// What to do when the store cannot take a request (full of live records, or failing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureMode {
    /// Answer 503 with `Retry-After`: never risk a duplicate.
    Reject,
    /// Forward without idempotency protection: never block traffic.
    PassThrough,
}

/// How many records the store holds, and in how many cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    /// Cells in the store (a fixed set of names; memory is bounded by cells × per-cell records).
    pub cells: u32,
    /// Records one cell may hold.
    pub per_cell: u16,
}

impl Capacity {
    /// Total records the store can hold at most.
    pub fn records(&self) -> u64 {
        u64::from(self.cells) * u64::from(self.per_cell)
    }
}

/// Bytes a stored answer's replayed headers may take at most: Envoy's own limit on a response's
/// headers (`max_response_headers_kb`, 60 KiB by default), which no stored subset can exceed.
pub const REPLAYED_HEADERS_BOUND: u64 = 60 * 1024;

/// Bytes one record takes besides its body and headers: key, fingerprint, seal, times, status,
/// lengths, and its ledger holds ([`crate::store::share::ledger`]).
pub(crate) const RECORD_OVERHEAD: u64 = 160;

/// The most memory the local store can take: `max_memory` for the answers it kept whole (an
/// answer is kept whole only while its fill shard stays within its part of `max_memory`), and
/// beyond it every record at most what it takes without a body (claims and answers kept
/// without their body are never refused for bytes: a completion must land). The README's
/// configuration reference gives the same formula.
pub fn memory_bound(capacity: &Capacity, max_memory: u64, replay_headers: &[String]) -> u64 {
    capacity
        .records()
        .saturating_mul(record_bound(0, replay_headers))
        .saturating_add(max_memory)
}

/// The most memory one record can take: a stored answer with a body of `max_response_body`, the
/// most headers Envoy lets a response have if any is replayed, and the record's own overhead.
pub fn record_bound(max_response_body: u64, replay_headers: &[String]) -> u64 {
    let headers = if replay_headers.is_empty() {
        0
    } else {
        REPLAYED_HEADERS_BOUND
    };
    max_response_body.saturating_add(headers + RECORD_OVERHEAD)
}

/// One-time token settings.
#[derive(Clone)]
pub struct TokenPolicy {
    pub secret: crate::client::token::TokenSecret,
    pub ttl: Span,
    /// Path of the issuing endpoint (GET or POST).
    pub issue_path: String,
    /// Request header that carries the token on routes that require one.
    pub header: String,
}

impl core::fmt::Debug for TokenPolicy {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TokenPolicy")
            .field("secret", &"<redacted>")
            .field("ttl", &self.ttl)
            .field("issue_path", &self.issue_path)
            .field("header", &self.header)
            .finish()
    }
}

/// The whole compiled policy.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Lowercase name of the key header.
    pub header: String,
    pub routes: Vec<Route>,
    pub scope: Vec<ScopeSource>,
    pub fingerprint: FingerprintSpec,
    /// Life of a record from its claim.
    pub ttl: Span,
    /// How long a claim stays exclusively in flight before a retry may take it over.
    pub lease: Span,
    /// Lowercase names of replayed headers.
    pub replay_headers: Vec<String>,
    pub store_rule: StoreRule,
    pub(crate) max_request_body: u64,
    /// Body bytes all of a VM's streams may have in fingerprinting at once, each
    /// copy of a body the filter keeps counted.
    pub(crate) hashing_budget: u64,
    /// The part of `hashing_budget` the streams of one peer (an IPv6 /64) may hold together:
    /// one client cannot take the whole budget.
    pub(crate) hashing_budget_per_peer: u64,
    pub max_response_body: u64,
    /// Largest upstream body a detached exchange relays to the client (`upstream.max_body`).
    pub(crate) max_relay_body: u64,
    /// Answer bytes a VM's detached exchanges may have Envoy buffer at once, each exchange
    /// counted at `max_relay_body` from before it is sent until its answer has been read.
    pub(crate) relay_budget: u64,
    /// The part of `relay_budget` the exchanges of one peer (an IPv6 /64) may hold together.
    pub(crate) relay_budget_per_peer: u64,
    pub capacity: Capacity,
    /// Each payer's share of the whole store ([`crate::store::share`]).
    pub shares: crate::client::payer::Shares,
    pub on_store_full: FailureMode,
    pub on_store_error: FailureMode,
    pub token: Option<TokenPolicy>,
    /// Where records and token uses live (`store`).
    pub store: StoreKind,
    /// The path the edge publishes this policy at (`policy_path`; `None`: not published).
    pub(crate) published: Option<String>,
    /// How problem answers are written (`problems`).
    pub(crate) problems: ProblemStyle,
}

/// Where the filter keeps its records (`store`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreKind {
    /// Envoy's shared data: one Envoy process (every worker), forgotten on restart.
    Local,
    /// The remote store service (`idemgate-store`), reached through an Envoy cluster: every Envoy
    /// sharing it behaves as one. Every claim and token use is one `POST /v1/op`; a worker's
    /// finishes go together, one `POST /v1/op` per batch.
    Remote {
        /// The Envoy cluster of the store service.
        cluster: String,
        /// How long one operation may take; no answer by then is a store failure.
        timeout: Span,
        /// Seal every stored answer and check it before a replay (`store.record_secret_env`).
        secrets: crate::record::seal::RecordSecrets,
    },
}

impl Policy {
    /// The hashing budget's limits: `hashing_budget` and `hashing_budget_per_peer`.
    pub(crate) fn hashing_limits(&self) -> Limits {
        Limits {
            total: self.hashing_budget,
            per_peer: self.hashing_budget_per_peer,
        }
    }

    /// The relay budget's limits: `relay_budget` and `relay_budget_per_peer`.
    pub(crate) fn relay_limits(&self) -> Limits {
        Limits {
            total: self.relay_budget,
            per_peer: self.relay_budget_per_peer,
        }
    }

    /// The first route guarding this request, if any. `path` may include a query.
    pub fn route_for(&self, method: &str, path: &str) -> Option<&Route> {
        self.match_request(method, path).map(|m| m.route)
    }

    /// The first route guarding this request and the path its rules use. `path` is the raw
    /// request path (a query allowed); it is normalised first (`crate::request::path::normalize`).
    pub fn match_request(&self, method: &str, path: &str) -> Option<Matched<'_>> {
        let normalized = crate::request::path::normalize(path_without_query(path));
        let route = self
            .routes
            .iter()
            .find(|route| route.matches(method, &normalized))?;
        Some(Matched {
            route,
            path: route.path_for(normalized),
        })
    }

    /// Whether a response header is stored for replay.
    pub fn replays_header(&self, name: &str) -> bool {
        replayable(name, &self.replay_headers)
    }
}

/// Whether `name` is replayed under the allow-list `replay_headers` (`Policy::replay_headers`).
pub(crate) fn replayable(name: &str, replay_headers: &[String]) -> bool {
    // `never_replayed`, not a lowercased copy of the name: no allocation per response header.
    // The short allow-list first: most of an answer's headers are not on it, and then the long
    // never-replayed list is not walked for them.
    replay_headers.iter().any(|h| h.eq_ignore_ascii_case(name)) && !never_replayed(name)
}
