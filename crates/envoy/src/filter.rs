//! The HTTP context: turns one request's Envoy facts into core values, and carries out what the core
//! decides. No rule lives here: claims, completions and every answer's status, headers and body come
//! from `idemgate-core`.
//!
//! Request: route match → key → scope → storage key → fingerprint (headers, then each body chunk,
//! within `max_request_body`) → claim → forward, or answer. A request with a body is claimed at the
//! end of its body; `envoy.filters.http.buffer` placed *after* this filter holds the request until
//! then, so the upstream is never contacted before the claim is won (see `examples/envoy`).
//!
//! Detached routes (the default where a cluster is configured): the request is kept (headers and
//! the hashed body) and, once claimed, sent by the edge itself on an exchange that outlives the
//! client ([`crate::detached`]); the stream stays paused and is answered with the relayed answer.
//!
//! Response: only an answer that came from the upstream (`response.code_details == via_upstream`) is
//! captured and, at the end of the whole response, completed through the core; anything else is
//! classified by [`crate::origin`] as "never reached" (release) or "in doubt" (keep in flight).

use crate::abi::{Action, BufferType, Headers, LogLevel, MapType};
use crate::budget::{Limits, Reservation};
use crate::client::{identify, peer_host, ClientIdentity, Facts, Unreadable};
use crate::detached::{self, Relay, RELAY_DETAILS};
use crate::host;
use crate::metrics::Counter;
use crate::order;
use crate::origin::{classify_attempts, doubt_cause, DoubtCause, Origin};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::remote_store;
use crate::settle::settle;
use crate::shared::{Exchange, OrderClaim, Pending, Shared, StoreCall};
use crate::token_endpoint::{self, VerifiedToken};
use alloc::rc::Rc;
use idemgate_core::admission::{admit, Admission, Refusal};
use idemgate_core::answer::{answer, EdgeAnswer, HttpAnswer, RelayProblem};
use idemgate_core::decision::ResponseFacts;
use idemgate_core::fingerprint::FingerprintBuilder;
use idemgate_core::guard::{self, Next};
use idemgate_core::policy::{Detached, Forward, Policy, Route, RouteKind, TokenRequirement};
use idemgate_core::protocol::{ClaimOutcome, ConsumeOutcome, Engine, ProtocolError};
use idemgate_core::record::OwnerToken;
use idemgate_core::remote::client;
use idemgate_core::scope::StorageKey;
use idemgate_core::share::Payers;
use idemgate_core::time::UnixMillis;

mod ordering;
use ordering::OrderWait;

/// A guarded request whose body is being fingerprinted.
struct Hashing {
    key: KeyState,
    fingerprint: FingerprintBuilder,
    seen: u64,
    /// The one-time token the request carries, verified, on routes that require one.
    token: Option<VerifiedToken>,
    /// This stream's share of the VM's `hashing_budget`, its peer's part of it: the body bytes
    /// it keeps, each copy counted (returned when hashing ends; the detached exchange's copy
    /// when the exchange is sent).
    reservation: Reservation,
    /// How many copies of each body byte this stream keeps (see [`Policy::hashing_budget`]).
    copies: u64,
    /// On a detached route: the request as it will be sent upstream.
    held: Option<Held>,
    /// On an ordered route: what the ordering guard reads ([`crate::order`]).
    order: Option<Box<order::Probe>>,
}

/// The storage key, or what still decides it at the end of the body (a body key source, a
/// provider signature).
enum KeyState {
    Known(StorageKey),
    Pending {
        admission: Box<Admission>,
        client: ClientIdentity,
        method: String,
        /// The normalised path the storage key uses.
        path: String,
    },
}

/// A request kept for its detached exchange: all its headers, and its body as hashed (bounded by
/// `max_request_body`, like the hashing).
struct Held {
    /// The route's detached settings, kept with the request rather than looked up again by
    /// index, so a "route not found" case cannot exist (issue 22).
    route: Detached,
    headers: Headers,
    body: Vec<u8>,
    /// The body's bytes in the hashing budget, returned when the request is sent (or dropped).
    /// `None` while the body is hashed: the stream's reservation counts it until then. Boxed:
    /// a held request waits in [`AfterUse`] and [`Claiming`], which stay small.
    reserved: Option<Box<Reservation>>,
}

/// A forwarded request that holds a claim.
struct Forwarded {
    key: StorageKey,
    owner: OwnerToken,
    /// The resource this request's event applies to, claimed until the upstream answers.
    order: Option<OrderClaim>,
    /// The upstream's answer as it arrives (`None` until response headers came via the upstream).
    answer: Option<Capture>,
}

struct Capture {
    /// `None` when the answer's `:status` is missing or not a number, or the host could not hand
    /// its headers or a body chunk over whole: never stored, in doubt (issue 22).
    status: Option<u16>,
    headers: Vec<(String, String)>,
    /// `None` once the body went over `max_response_body` (passed on, not kept).
    body: Option<Vec<u8>>,
}

enum Stage {
    /// Nothing (more) to do for this request.
    Idle,
    Hashing(Box<Hashing>),
    Forwarded(Forwarded),
    /// The claimed request is on a detached exchange (callout `token`); the stream waits, paused.
    Detached {
        token: u32,
    },
    /// The claim is on its way to the remote store (callout `call`); the request waits, paused.
    Claiming(Box<Claiming>),
    /// The token's use is on its way to the remote store; the request waits, paused.
    Using {
        call: u32,
        after: AfterUse,
    },
    /// The ordering guard's begin is on its way to the remote store; the request waits, paused.
    Ordering(Box<OrderWait>),
}

/// A claim sent to the remote store, and what the request does once it answers.
struct Claiming {
    call: u32,
    key: StorageKey,
    token: Option<VerifiedToken>,
    held: Option<Held>,
}

/// What a request does once its token is used.
enum AfterUse {
    /// Go on with the claim it holds (released if the token cannot be used).
    Forward {
        key: StorageKey,
        owner: OwnerToken,
        held: Option<Held>,
        order: Option<OrderClaim>,
    },
    /// No key on an optional-key route: forward without idempotency.
    PassThrough,
    /// The failure mode forwards without protection (already counted).
    Unprotected,
}

pub struct Filter {
    shared: Rc<Shared>,
    stage: Stage,
    /// This HTTP context's id (the exchange's answer is relayed to it, if it still exists).
    context_id: u32,
    /// The guarded route's kind: it decides which answers count as the outcome (core).
    kind: RouteKind,
    /// An ordered event, between the end of its body and its delivery id's claim.
    ordered: Option<order::Ordered>,
    /// Who this request's records are charged to (issue 23), once its client is known.
    payers: Payers,
}

struct HeaderFacts<'a> {
    headers: &'a Headers,
}

impl Facts for HeaderFacts<'_> {
    fn header_values<'b>(&'b self, name: &str) -> Vec<&'b [u8]> {
        header_values(self.headers, name)
    }
    fn property(&self, path: &[&str]) -> Result<Option<Vec<u8>>, Unreadable> {
        host::property_read(path).ok_or(Unreadable)
    }
}

/// The peer group a stream's body bytes are charged to in the hashing budget: the address group
/// the shares use ([`idemgate_core::share::Shares::peer_group`]: the connection's address without
/// its port, an IPv6 address's /64 by default). Without an address, the empty group (every such
/// stream shares one part). `None` when the host failed to read it (issue 22: not "no address").
fn budget_peer(policy: &Policy) -> Option<Vec<u8>> {
    Some(match host::property_read(&["source", "address"])? {
        Some(address) => policy
            .shares
            .peer_group(peer_host(&String::from_utf8_lossy(&address))),
        None => Vec::new(),
    })
}

/// The first value of a header, if it is UTF-8.
/// The warning every store failure a request meets is logged with.
fn log_store_failure(e: &ProtocolError) {
    host::log(LogLevel::Warn, &format!("store failed: {e}"));
}

fn header_text<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| *n == name)
        .and_then(|(_, v)| core::str::from_utf8(v).ok())
}

fn header_values<'a>(headers: &'a Headers, name: &str) -> Vec<&'a [u8]> {
    headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
        .collect()
}

impl Filter {
    pub fn new(shared: Rc<Shared>, context_id: u32) -> Filter {
        Filter {
            shared,
            stage: Stage::Idle,
            context_id,
            kind: RouteKind::Api,
            ordered: None,
            payers: Payers::NONE,
        }
    }

    /// The compiled policy, shared (a reference-count bump, never a copy or a re-parse).
    fn policy(&self) -> Rc<Policy> {
        Rc::clone(&self.shared.policy)
    }

    /// Counts a decision and writes it for the access log ([`crate::access_log`]).
    fn count(&self, counter: Counter) {
        self.shared.metrics.bump(counter);
        crate::access_log::record(counter);
    }

    fn debug(&self, key: &StorageKey, what: &str) {
        if self.shared.debug.get() {
            host::log(LogLevel::Debug, &format!("key {} {what}", key.log_label()));
        }
    }

    /// Sends an edge answer made by the core and ends this request's part.
    fn reply(&mut self, edge: &EdgeAnswer<'_>) -> Action {
        self.stage = Stage::Idle;
        host::send(&answer(edge));
        Action::Pause
    }

    fn send(&mut self, http: &HttpAnswer) -> Action {
        self.stage = Stage::Idle;
        host::send(http);
        Action::Pause
    }

    fn issue_token(&mut self, headers: &Headers, path: &str) -> Action {
        let policy = self.policy();
        let Some(token) = &policy.token else {
            return Action::Continue;
        };
        let Ok(client) = identify(&policy, &HeaderFacts { headers }) else {
            return self.reply(&EdgeAnswer::RequestUnreadable);
        };
        let Some(client) = client else {
            return self.unscoped(&policy);
        };
        let Some(now) = host::now() else {
            return self.reply(&EdgeAnswer::ClockUnavailable);
        };
        let http = token_endpoint::issue_answer(
            &policy,
            token,
            path,
            client.scope(),
            now,
            crate::entropy::random16(),
        );
        if http.status == 200 {
            self.count(Counter::TokenIssued);
        }
        self.send(&http)
    }

    /// Verifies the token a route requires, before any store decision (issue 14): `Err(action)`
    /// was answered (no identity to bind it to, or a token that is missing or not valid here).
    fn verify_token(
        &mut self,
        client: Option<&ClientIdentity>,
        route: &Route,
        method: &str,
        headers: &Headers,
    ) -> Result<Option<VerifiedToken>, Action> {
        let policy = self.policy();
        let (TokenRequirement::Required, Some(token)) = (route.token, &policy.token) else {
            return Ok(None);
        };
        let Some(client) = client else {
            // A token is bound to a client: without one it cannot be checked, so never forward.
            self.count(Counter::ScopeUnavailable);
            return Err(self.reply(&EdgeAnswer::ScopeUnavailable));
        };
        let text = header_values(headers, &token.header)
            .first()
            .and_then(|v| core::str::from_utf8(v).ok());
        let Some(now) = host::now() else {
            return Err(self.reply(&EdgeAnswer::ClockUnavailable));
        };
        match token_endpoint::verify_for(token, text, client.scope(), route, method, now) {
            Ok(claims) => Ok(Some(claims)),
            Err(e) => {
                self.count(Counter::TokenRejected);
                Err(self.reply(&EdgeAnswer::Token(&e)))
            }
        }
    }

    /// Uses a verified token, then does `after`: locally at once, or (remote store) once the
    /// store answers, the request paused meanwhile.
    fn use_token(&mut self, claims: &VerifiedToken, after: AfterUse) -> Action {
        if remote_store::is_remote(&self.shared) {
            let claim = match &after {
                AfterUse::Forward { key, owner, .. } => Some((*key, *owner)),
                _ => None,
            };
            let stream = self.context_id;
            let shared = Rc::clone(&self.shared);
            let policy = self.policy();
            let request = client::consume(claims.use_key, claims.expires_at, self.payers, &policy);
            return match remote_store::call(&self.shared, &request, |_| StoreCall::Consume {
                stream,
                shared,
                claim,
            }) {
                Ok(call) => {
                    self.stage = Stage::Using { call, after };
                    Action::Pause
                }
                Err(e) => self.token_used(Err(e), after),
            };
        }
        let policy = self.policy();
        let mut store = self.shared.store();
        let Some(now) = host::now() else {
            // Whether the token is still good cannot be judged without the clock.
            let action = self.reply(&EdgeAnswer::ClockUnavailable);
            self.not_forwarded(after);
            return action;
        };
        let outcome = token_endpoint::consume(&mut store, &policy, claims, self.payers, now);
        self.token_used(outcome, after)
    }

    /// The token's use is decided (the core's [`guard::after_use`]): go on with `after`, or
    /// answer (and release a claim held).
    fn token_used(
        &mut self,
        outcome: Result<ConsumeOutcome, ProtocolError>,
        after: AfterUse,
    ) -> Action {
        let (refusal, events) = guard::after_use(&outcome);
        for event in events.iter() {
            self.count(Counter::from(event));
        }
        let Some(answer) = refusal else {
            return self.go_on(after);
        };
        if let EdgeAnswer::StoreFailed(e) = &answer {
            log_store_failure(e);
        }
        let action = self.reply(&answer);
        self.not_forwarded(after);
        action
    }

    /// A claimed request answered before it was forwarded: the upstream never saw it, so its key
    /// is released (and its ordering slot given back).
    fn not_forwarded(&mut self, after: AfterUse) {
        if let AfterUse::Forward {
            key, owner, order, ..
        } = after
        {
            self.finish_claim(key, owner, ResponseFacts::NeverReached, DoubtCause::Other);
            if let Some(claim) = order {
                order::settle(&self.shared, claim, false, true);
            }
        }
    }

    /// The request goes on (its token, if any, is used).
    fn go_on(&mut self, after: AfterUse) -> Action {
        match after {
            AfterUse::Forward {
                key,
                owner,
                held: Some(held),
                order,
            } => self.detach(key, owner, held, order),
            AfterUse::Forward {
                key,
                owner,
                held: None,
                order,
            } => {
                self.stage = Stage::Forwarded(Forwarded {
                    key,
                    owner,
                    order,
                    answer: None,
                });
                Action::Continue
            }
            AfterUse::PassThrough => {
                self.count(Counter::Passthrough);
                self.stage = Stage::Idle;
                Action::Continue
            }
            AfterUse::Unprotected => {
                self.stage = Stage::Idle;
                Action::Continue
            }
        }
    }

    /// No identity to scope the key to: the core's [`guard::unscoped`] (the store-error failure
    /// mode) rather than a namespace shared with other clients.
    fn unscoped(&mut self, policy: &Policy) -> Action {
        let (next, events) = guard::unscoped(policy);
        for event in events.iter() {
            self.count(Counter::from(event));
        }
        match next {
            Some(answer) => self.reply(&answer),
            None => {
                self.stage = Stage::Idle;
                Action::Continue
            }
        }
    }

    fn start(&mut self, end_of_stream: bool) -> Action {
        let policy = self.policy();
        // One host call: the pseudo-headers come with the rest (a guarded request needs them all).
        let Some(headers) = host::headers(MapType::HttpRequestHeaders) else {
            // Read as a request without headers it would have no key and go unguarded.
            return self.reply(&EdgeAnswer::RequestUnreadable);
        };
        let (Some(method), Some(path)) = (
            header_text(&headers, ":method"),
            header_text(&headers, ":path"),
        ) else {
            return Action::Continue;
        };
        let token_issue = policy
            .token
            .as_ref()
            .is_some_and(|token| token_endpoint::is_issue_request(token, method, path));
        if token_issue {
            return self.issue_token(&headers, path);
        }
        // Matched on the normalised path; `guarded` is the spelling the storage key and the
        // fingerprint use, so every spelling of one path is one request (issue 14).
        let Some(matched) = policy.match_request(method, path) else {
            return Action::Continue;
        };
        let route = matched.route;
        if let Some((http, counter)) = order::precondition(route, method, &headers) {
            self.count(counter);
            return self.send(&http);
        }
        // The core's spelling, the one the browser module fingerprints with too (issue 22).
        let guarded = matched.target(path);
        self.kind = route.kind;
        // What the request must show, and in which order, is the core's call.
        // `admit` reads the clock only for a signature's time window: a route without one costs
        // no clock read here.
        let now = match route.signature {
            Some(_) => match host::now() {
                Some(now) => now,
                None => return self.reply(&EdgeAnswer::ClockUnavailable),
            },
            None => UnixMillis(0),
        };
        let admission = match admit(route, &|name: &str| header_values(&headers, name), now) {
            Ok(admission) => admission,
            Err(refusal) => return self.refuse(&refusal),
        };
        // A callback route is its own scope (the provider is the client).
        let client = match route.own_scope() {
            Some(scope) => Some(ClientIdentity {
                source: scope.source.to_owned(),
                value: scope.value.to_vec(),
                verified: true,
            }),
            None => match identify(&policy, &HeaderFacts { headers: &headers }) {
                Ok(client) => client,
                // Never the next scope source because a read failed (issue 22).
                Err(Unreadable) => return self.reply(&EdgeAnswer::RequestUnreadable),
            },
        };
        if let Some(client) = &client {
            match client.payers(&policy, &HeaderFacts { headers: &headers }) {
                Ok(payers) => self.payers = payers,
                // Not "no address": the record would go uncharged to the client's address.
                Err(Unreadable) => return self.reply(&EdgeAnswer::RequestUnreadable),
            }
        }
        let token = match self.verify_token(client.as_ref(), route, method, &headers) {
            Ok(token) => token,
            Err(action) => return action,
        };
        let key = if admission.needs_body() {
            let Some(client) = client else {
                return self.unscoped(&policy);
            };
            KeyState::Pending {
                admission: Box::new(admission),
                client,
                method: method.to_owned(),
                path: matched.path.clone(),
            }
        } else {
            let Some(key) = admission.key_now() else {
                // Optional key, none given: no idempotency, but a required token still applies.
                return self.unguarded(token.as_ref());
            };
            let Some(client) = &client else {
                return self.unscoped(&policy);
            };
            let scope = client.scope();
            let tag = self.shared.scope_tag.of(scope);
            KeyState::Known(StorageKey::derive_tagged(
                scope,
                tag,
                method,
                &matched.path,
                key,
            ))
        };
        // A client must not steer a guarded execution (issue 21): Envoy's control headers
        // (`x-envoy-retry-on`, `x-envoy-upstream-rq-timeout-ms`, ...) leave the request before the
        // router sees it. A detached exchange never forwards them (`detached::forward_headers`).
        if route.forward == Forward::Router {
            for (name, _) in headers
                .iter()
                .filter(|(name, _)| detached::steers_envoy(name))
            {
                if !host::remove_request_header(name) {
                    return self.reply(&EdgeAnswer::Relay(RelayProblem::NotSent));
                }
            }
        }
        let fingerprint =
            FingerprintBuilder::new(&policy.fingerprint, method, &guarded, headers.iter());
        let order = order::Probe::start(route, &headers);
        let held = match &route.forward {
            Forward::Detached(detached) => Some(Held {
                route: detached.clone(),
                headers,
                body: Vec::new(),
                reserved: None,
            }),
            Forward::Router => None,
        };
        // The fingerprint's state, and each copy of the body kept until the end of it (issue 23).
        let keeps_key =
            matches!(&key, KeyState::Pending { admission, .. } if admission.keeps_body());
        let keeps_order = order.as_ref().is_some_and(|probe| probe.keeps_body());
        let copies = 1 + u64::from(keeps_key) + u64::from(keeps_order) + u64::from(held.is_some());
        // The peer is looked up only for a body to come (its bytes are charged to the peer).
        let peer: Rc<[u8]> = if end_of_stream {
            Rc::from(&[][..])
        } else {
            match budget_peer(&policy) {
                Some(peer) => Rc::from(peer),
                None => return self.reply(&EdgeAnswer::RequestUnreadable),
            }
        };
        let hashing = Box::new(Hashing {
            key,
            fingerprint,
            seen: 0,
            token,
            held,
            order,
            reservation: Reservation::new(Rc::clone(&self.shared.hashing), peer),
            copies,
        });
        if end_of_stream {
            return self.claim(hashing);
        }
        self.stage = Stage::Hashing(hashing);
        // Headers go on to the buffer filter, which holds the request until its body is complete.
        Action::Continue
    }

    fn hash_chunk(&mut self, size: usize, end_of_stream: bool) -> Action {
        let policy = self.policy();
        let Stage::Hashing(hashing) = &mut self.stage else {
            return Action::Continue;
        };
        hashing.seen = hashing.seen.saturating_add(size as u64);
        if hashing.seen > policy.max_request_body {
            self.count(Counter::BodyTooLarge);
            return self.reply(&EdgeAnswer::BodyTooLarge {
                limit: policy.max_request_body,
            });
        }
        let limits = Limits {
            total: policy.hashing_budget,
            per_peer: policy.hashing_budget_per_peer,
        };
        let charge = (size as u64).saturating_mul(hashing.copies);
        if !hashing.reservation.grow(charge, limits) {
            self.count(Counter::HashingBudgetExceeded);
            return self.reply(&EdgeAnswer::HashingBudgetExceeded);
        }
        let Some(chunk) = host::body(BufferType::HttpRequestBody, size) else {
            // Fingerprinted short, the stored fingerprint would be of a payload nobody sent.
            return self.reply(&EdgeAnswer::RequestUnreadable);
        };
        if let KeyState::Pending { admission, .. } = &mut hashing.key {
            admission.update(&chunk);
        }
        if let Err(e) = hashing.fingerprint.update(&chunk) {
            self.count(Counter::InvalidBody);
            return self.reply(&EdgeAnswer::InvalidBody(&e));
        }
        if let Some(held) = &mut hashing.held {
            held.body.extend_from_slice(&chunk);
        }
        if let Some(probe) = &mut hashing.order {
            probe.update(&chunk);
        }
        if !end_of_stream {
            return Action::Continue;
        }
        match core::mem::replace(&mut self.stage, Stage::Idle) {
            Stage::Hashing(hashing) => self.claim(hashing),
            _ => Action::Continue,
        }
    }

    /// The whole request is known: claim its key through the core and act on the outcome.
    fn claim(&mut self, hashing: Box<Hashing>) -> Action {
        let policy = self.policy();
        let Hashing {
            key,
            fingerprint,
            token,
            mut held,
            order,
            mut reservation,
            ..
        } = *hashing;
        // The detached exchange's copy of the body outlives the hashing: its bytes stay
        // reserved until it is sent; the rest (the hasher, a key source's or the ordering
        // guard's copy) is returned when this function is done with them.
        if let Some(held) = &mut held {
            held.reserved = Some(Box::new(reservation.split(held.body.len() as u64)));
        }
        let key = match key {
            KeyState::Known(key) => key,
            KeyState::Pending {
                admission,
                client,
                method,
                path,
            } => match admission.finish() {
                Err(refusal) => return self.refuse(&refusal),
                Ok(None) => return self.unguarded(token.as_ref()),
                Ok(Some(key)) => {
                    let scope = client.scope();
                    let tag = self.shared.scope_tag.of(scope);
                    StorageKey::derive_tagged(scope, tag, &method, &path, &key)
                }
            },
        };
        let fingerprint = match fingerprint.finish() {
            Ok(fingerprint) => fingerprint,
            Err(e) => {
                self.count(Counter::InvalidBody);
                return self.reply(&EdgeAnswer::InvalidBody(&e));
            }
        };
        // The event and its resource are read before any store write: a tracked event without a
        // resource id is refused without a claim.
        match order.map(|probe| order::before(*probe)).transpose() {
            Ok(ordered) => self.ordered = ordered.flatten(),
            Err(http) => {
                self.count(Counter::OrderResourceMissing);
                return self.send(&http);
            }
        }
        let owner = self.shared.owners.next();
        if remote_store::is_remote(&self.shared) {
            let stream = self.context_id;
            let shared = Rc::clone(&self.shared);
            let request = client::claim(key, fingerprint, owner, self.payers, &policy);
            match remote_store::call(&self.shared, &request, |_| StoreCall::Claim {
                stream,
                shared,
                key,
                owner,
            }) {
                Ok(call) => {
                    self.stage = Stage::Claiming(Box::new(Claiming {
                        call,
                        key,
                        token,
                        held,
                    }));
                    return Action::Pause;
                }
                Err(e) => return self.claimed(key, Err(e), token, held),
            }
        }
        let Some(now) = host::now() else {
            return self.reply(&EdgeAnswer::ClockUnavailable);
        };
        let mut store = self.shared.store();
        let mut engine = Engine {
            store: &mut store,
            policy: &policy,
        };
        let outcome = engine.claim(key, fingerprint, owner, self.payers, now);
        self.claimed(key, outcome, token, held)
    }

    /// Carries out what the core makes of a claim's outcome (from the local store, or the remote
    /// store's answer): forward as the key's owner, answer, or forward unguarded.
    fn claimed(
        &mut self,
        key: StorageKey,
        outcome: Result<ClaimOutcome, ProtocolError>,
        token: Option<VerifiedToken>,
        held: Option<Held>,
    ) -> Action {
        let policy = self.policy();
        let (next, events) = guard::after_claim(&outcome, &policy);
        for event in events.iter() {
            self.count(Counter::from(event));
        }
        match next {
            Next::Forward { owner, takeover } => {
                self.debug(
                    &key,
                    if takeover {
                        "taken over, forwarded"
                    } else {
                        "claimed, forwarded"
                    },
                );
                // The delivery is this request's: now the ordering guard decides on its event.
                let began = self
                    .ordered
                    .take()
                    .map(|o| order::begin(&self.shared, o, self.context_id, (key, owner)));
                let wait = OrderWait {
                    call: 0,
                    key,
                    owner,
                    token,
                    held,
                };
                self.forward_ordered(wait, began)
            }
            Next::Answer(answer) => {
                self.log_answer(&key, &answer);
                self.reply(&answer)
            }
            Next::Unguarded => {
                match &outcome {
                    Err(e) => log_store_failure(e),
                    Ok(_) => self.debug(&key, "store full: forwarded unguarded"),
                }
                self.stage = Stage::Idle;
                self.unprotected(token.as_ref())
            }
        }
    }

    /// The log line of an answer to a claim.
    fn log_answer(&self, key: &StorageKey, answer: &EdgeAnswer<'_>) {
        match answer {
            EdgeAnswer::StoreFailed(e) if !e.allows_failure_mode() => host::log(
                LogLevel::Warn,
                &format!(
                    "key {}: {e}; not replayed (502 record_corrupt)",
                    key.log_label()
                ),
            ),
            EdgeAnswer::StoreFailed(e) => log_store_failure(e),
            EdgeAnswer::Conflict { .. } => self.debug(key, "in flight: 409"),
            EdgeAnswer::Replay { .. } => self.debug(key, "completed: replayed"),
            EdgeAnswer::Mismatch => self.debug(key, "other payload: 422"),
            EdgeAnswer::QuotaExceeded { .. } => self.debug(key, "scope over its quota: 429"),
            EdgeAnswer::StoreFull { .. } => self.debug(key, "store full"),
            _ => {}
        }
    }

    /// Forwarding without idempotency (`pass_through`) still needs the route's token used, once.
    fn unprotected(&mut self, token: Option<&VerifiedToken>) -> Action {
        match token {
            Some(claims) => self.use_token(claims, AfterUse::Unprotected),
            None => Action::Continue,
        }
    }

    /// Sends the claimed request on a detached exchange ([`crate::detached`]) and keeps the stream
    /// paused until its answer is relayed. If it cannot be sent, the upstream never saw it: the
    /// claim is released and the client told so.
    fn detach(
        &mut self,
        key: StorageKey,
        owner: OwnerToken,
        held: Held,
        order: Option<OrderClaim>,
    ) -> Action {
        let policy = self.policy();
        let route = &held.route;
        match detached::send(route, &held.headers, &held.body) {
            Ok(token) => {
                let exchange = Exchange {
                    shared: Rc::clone(&self.shared),
                    key,
                    owner,
                    stream: self.context_id,
                    claimed_at: host::now(),
                    kind: self.kind,
                    via: route.via,
                    order: order.clone(),
                };
                if !self.shared.register(token, Pending::Detached(exchange)) {
                    // The answer would find no entry and the client would wait for nothing.
                    // The exchange was sent, so its outcome is in doubt: settle it as such (the
                    // claim holds until its lease ends, so a retry cannot run it twice) and tell
                    // the client now.
                    host::log(
                        LogLevel::Error,
                        "the callout table was busy: outcome in doubt",
                    );
                    self.finish_claim(key, owner, ResponseFacts::InDoubt, DoubtCause::Other);
                    let retry_after = policy.lease;
                    return self.reply(&EdgeAnswer::Relay(RelayProblem::NoAnswer { retry_after }));
                }
                self.count(Counter::Detached);
                self.debug(&key, "sent on a detached exchange");
                self.stage = Stage::Detached { token };
                Action::Pause
            }
            Err(status) => {
                host::log(
                    LogLevel::Warn,
                    &format!(
                        "could not send to cluster `{}` (status {}): released",
                        route.cluster, status.0
                    ),
                );
                self.finish_claim(key, owner, ResponseFacts::NeverReached, DoubtCause::Other);
                if let Some(claim) = order {
                    order::settle(&self.shared, claim, false, true);
                }
                self.reply(&EdgeAnswer::Relay(RelayProblem::NotSent))
            }
        }
    }

    /// Whether this stream waits for the callout `token` (a detached exchange, or a remote
    /// store's claim or token use).
    pub fn awaits(&self, token: u32) -> bool {
        match &self.stage {
            Stage::Detached { token: t } | Stage::Using { call: t, .. } => *t == token,
            Stage::Claiming(claiming) => claiming.call == token,
            Stage::Ordering(waiting) => waiting.call == token,
            _ => false,
        }
    }

    /// The remote store answered this request's claim (with this stream made the effective
    /// context): act on it, and resume the request if it goes on.
    pub fn claim_answered(&mut self, reply: &remote_store::Reply) {
        let Stage::Claiming(claiming) = core::mem::replace(&mut self.stage, Stage::Idle) else {
            return;
        };
        let Claiming {
            key, token, held, ..
        } = *claiming;
        let outcome = remote_store::claim_outcome(&self.shared, reply, &key);
        let action = self.claimed(key, outcome, token, held);
        self.resume(action);
    }

    /// The remote store answered this request's token use.
    pub fn use_answered(&mut self, reply: &remote_store::Reply) {
        let Stage::Using { after, .. } = core::mem::replace(&mut self.stage, Stage::Idle) else {
            return;
        };
        let outcome = client::consume_outcome(reply.answer());
        let action = self.token_used(outcome, after);
        self.resume(action);
    }

    /// Lets a request paused for the remote store go on (`Pause`: it was answered or waits again).
    fn resume(&mut self, action: Action) {
        if action == Action::Continue {
            if let Err(status) = crate::abi::continue_request() {
                host::log(
                    LogLevel::Warn,
                    &format!("could not resume the request: status {}", status.0),
                );
            }
        }
    }

    /// Gives the client its detached exchange's outcome (the key is settled already). Called on
    /// the root context's callout answer, with this stream made the effective context.
    pub fn relay(&mut self, relay: &Relay) {
        self.stage = Stage::Idle;
        if let Some(outcome) = relay.outcome {
            crate::access_log::record_outcome(outcome);
        }
        if relay.from_upstream {
            host::send_with_details(&relay.answer, RELAY_DETAILS);
        } else {
            host::send(&relay.answer);
        }
    }

    /// Completes, releases or keeps the claim, as the core decides from `facts`.
    fn finish_claim(
        &mut self,
        key: StorageKey,
        owner: OwnerToken,
        facts: ResponseFacts,
        cause: DoubtCause,
    ) {
        settle(
            &self.shared,
            key,
            owner,
            self.kind.screen(facts),
            cause,
            true,
        );
    }

    /// Refuses a request before its claim, with the core's answer.
    fn refuse(&mut self, refusal: &Refusal) -> Action {
        self.count(match refusal {
            Refusal::Signature(_) => Counter::SignatureRejected,
            Refusal::MissingKey { .. } => Counter::MissingKey,
            _ => Counter::InvalidKey,
        });
        self.send(&refusal.answer())
    }

    /// No key and none required: forwarded without idempotency, but a required token still applies.
    fn unguarded(&mut self, token: Option<&VerifiedToken>) -> Action {
        if let Some(claims) = token {
            return self.use_token(claims, AfterUse::PassThrough);
        }
        self.stage = Stage::Idle;
        self.count(Counter::Passthrough);
        Action::Continue
    }

    /// Ends the forwarded request with what is known now (response complete, or the stream is over).
    fn end(&mut self, complete: bool) {
        let Stage::Forwarded(forwarded) = core::mem::replace(&mut self.stage, Stage::Idle) else {
            return;
        };
        if let Some(claim) = forwarded.order {
            let applied = matches!(
                (complete, &forwarded.answer),
                (true, Some(Capture { status: Some(status), .. })) if order::applies(*status)
            );
            order::settle(&self.shared, claim, applied, true);
        }
        let (facts, cause) = match (complete, forwarded.answer) {
            (true, Some(capture)) => match capture.status {
                Some(status) => (
                    ResponseFacts::Upstream {
                        status,
                        headers: capture.headers,
                        body: capture.body,
                    },
                    DoubtCause::Other,
                ),
                // An answer whose status cannot be read cannot be replayed, and the upstream may
                // have acted: in doubt, so the claim holds until its lease ends.
                None => {
                    host::log(LogLevel::Error, "the upstream answer could not be read whole (no valid :status, or a part the host did not hand over)");
                    (ResponseFacts::InDoubt, DoubtCause::Other)
                }
            },
            // The stream ended without a complete upstream answer: what the final details say.
            (_, _) => {
                let details = host::property_text(&["response", "code_details"]);
                (
                    classify_end(details.as_deref()).facts_without_answer(),
                    doubt_cause(details.as_deref()),
                )
            }
        };
        self.finish_claim(forwarded.key, forwarded.owner, facts, cause);
    }

    fn response_headers(&mut self, end_of_stream: bool) -> Action {
        let policy = self.policy();
        let Stage::Forwarded(forwarded) = &mut self.stage else {
            return Action::Continue;
        };
        let details = host::property_text(&["response", "code_details"]);
        match classify_end(details.as_deref()) {
            Origin::Upstream => {
                // One host call for the status and the headers (`:status` is in the map).
                let mut status = None;
                // Headers the host cannot hand over leave the status unknown: in doubt.
                let headers = host::headers(MapType::HttpResponseHeaders).unwrap_or_default();
                let headers = headers
                    .iter()
                    .filter(|(name, value)| {
                        if *name == ":status" {
                            status = idemgate_core::answer::parse_status(value);
                        }
                        policy.replays_header(name)
                    })
                    .filter_map(|(name, value)| {
                        let value = core::str::from_utf8(value).ok()?;
                        Some((name.to_owned(), value.to_owned()))
                    })
                    .collect();
                if forwarded.order.is_some() && status.is_some_and(order::applies) {
                    order::mark_response();
                }
                forwarded.answer = Some(Capture {
                    status,
                    headers,
                    body: Some(Vec::new()),
                });
                if end_of_stream {
                    self.end(true);
                }
            }
            // A reply Envoy or a later filter made: the upstream's outcome is known now.
            origin => {
                let Stage::Forwarded(forwarded) = core::mem::replace(&mut self.stage, Stage::Idle)
                else {
                    return Action::Continue;
                };
                if let Some(claim) = forwarded.order {
                    order::settle(&self.shared, claim, false, true);
                }
                self.finish_claim(
                    forwarded.key,
                    forwarded.owner,
                    origin.facts_without_answer(),
                    doubt_cause(details.as_deref()),
                );
            }
        }
        Action::Continue
    }

    fn response_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        let limit = self.policy().max_response_body;
        let Stage::Forwarded(Forwarded {
            answer: Some(capture),
            ..
        }) = &mut self.stage
        else {
            return Action::Continue;
        };
        if let Some(body) = &mut capture.body {
            if (body.len() as u64).saturating_add(size as u64) > limit {
                capture.body = None;
            } else {
                match host::body(BufferType::HttpResponseBody, size) {
                    Some(chunk) => body.extend_from_slice(&chunk),
                    // A body the edge cannot keep whole is an answer it cannot replay, and the
                    // upstream has acted: in doubt, like an unreadable status (issue 22).
                    None => capture.status = None,
                }
            }
        }
        if end_of_stream {
            self.end(true);
        }
        Action::Continue
    }
}

/// Where a router-path request's end came from. The details describe the router's last attempt;
/// an earlier attempt of a route's retry policy may have reached the upstream (issue 21), so the
/// attempt count is read when the details say "never reached".
fn classify_end(details: Option<&str>) -> Origin {
    classify_attempts(details, host::upstream_attempts)
}

/// The stream callbacks, as [`crate::dispatch`] calls them.
impl Filter {
    pub fn on_done(&mut self) {
        // A detached exchange is not ended here: it belongs to the key and settles it when it
        // answers (see `crate::detached`).
        self.end(false);
    }

    pub fn on_request_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        self.start(end_of_stream)
    }

    pub fn on_request_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        self.hash_chunk(size, end_of_stream)
    }

    pub fn on_request_trailers(&mut self, _trailers: usize) -> Action {
        // Trailers end the request: the body is complete.
        match core::mem::replace(&mut self.stage, Stage::Idle) {
            Stage::Hashing(hashing) => self.claim(hashing),
            other => {
                self.stage = other;
                Action::Continue
            }
        }
    }

    pub fn on_response_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        #[cfg(feature = "test-panic")] // Test-only build (tests/envoy/faults.rs): kill the VM.
        #[allow(clippy::panic)]
        if host::response_header("x-idemgate-test-panic").is_some() {
            panic!("test-panic")
        }
        self.response_headers(end_of_stream)
    }

    pub fn on_response_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        self.response_body(size, end_of_stream)
    }

    pub fn on_response_trailers(&mut self, _trailers: usize) -> Action {
        self.end(true);
        Action::Continue
    }

    pub fn on_log(&mut self) {
        self.end(false);
    }
}
