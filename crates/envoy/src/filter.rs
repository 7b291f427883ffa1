//! The HTTP context: turns one request's Envoy facts into core values, and carries out what the core
//! decides. No rule lives here: claims, completions and every answer's status, headers and body come
//! from `idemgate-core`.
//!
//! Request: route match → key → scope → storage key → fingerprint (headers, then each body chunk,
//! within `max_request_body`) → claim → forward, or answer. A request with a body is claimed at the
//! end of its body; `envoy.filters.http.buffer` placed *after* this filter holds the request until
//! then, so the upstream is never contacted before the claim is won (see `examples/envoy`).
//!
//! Response: only an answer that came from the upstream (`response.code_details == via_upstream`) is
//! captured and, at the end of the whole response, completed through the core; anything else is
//! classified by [`crate::origin`] as "never reached" (release) or "in doubt" (keep in flight).

use crate::client::{identify, ClientIdentity, Facts};
use crate::host;
use crate::metrics::Counter;
use crate::origin::{classify, Origin};
use crate::root::Shared;
use crate::token_endpoint::{self, TokenCheck, VerifiedToken};
use idemgate_core::answer::{answer, EdgeAnswer, HttpAnswer};
use idemgate_core::decision::ResponseFacts;
use idemgate_core::fingerprint::FingerprintBuilder;
use idemgate_core::key::IdempotencyKey;
use idemgate_core::policy::{FailureMode, KeyRequirement, Policy, Route, TokenRequirement};
use idemgate_core::protocol::{ClaimOutcome, Engine, FinishOutcome, ProtocolError};
use idemgate_core::record::OwnerToken;
use idemgate_core::scope::StorageKey;
use proxy_wasm::traits::{Context, HttpContext};
use proxy_wasm::types::{Action, BufferType, LogLevel, MapType};
use std::rc::Rc;

/// A guarded request whose body is being fingerprinted.
struct Hashing {
    key: StorageKey,
    fingerprint: FingerprintBuilder,
    seen: u64,
    /// The one-time token the request carries, verified, on routes that require one.
    token: Option<VerifiedToken>,
}

/// A forwarded request that holds a claim.
struct Forwarded {
    key: StorageKey,
    owner: OwnerToken,
    /// The upstream's answer as it arrives (`None` until response headers came via the upstream).
    answer: Option<Capture>,
}

struct Capture {
    status: u16,
    headers: Vec<(String, String)>,
    /// `None` once the body went over `max_response_body` (passed on, not kept).
    body: Option<Vec<u8>>,
}

enum Stage {
    /// Nothing (more) to do for this request.
    Idle,
    Hashing(Box<Hashing>),
    Forwarded(Forwarded),
}

pub struct Filter {
    shared: Rc<Shared>,
    stage: Stage,
}

struct HeaderFacts<'a> {
    headers: &'a [(String, Vec<u8>)],
}

impl Facts for HeaderFacts<'_> {
    fn header_values<'b>(&'b self, name: &str) -> Vec<&'b [u8]> {
        header_values(self.headers, name)
    }
    fn property(&self, path: &[&str]) -> Option<Vec<u8>> {
        host::property(path)
    }
}

/// The first value of a header, if it is UTF-8.
fn header_text<'a>(headers: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| std::str::from_utf8(v).ok())
}

fn header_values<'a>(headers: &'a [(String, Vec<u8>)], name: &str) -> Vec<&'a [u8]> {
    headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_slice())
        .collect()
}

impl Filter {
    pub fn new(shared: Rc<Shared>) -> Filter {
        Filter {
            shared,
            stage: Stage::Idle,
        }
    }

    /// The compiled policy, shared (a reference-count bump, never a copy or a re-parse).
    fn policy(&self) -> Rc<Policy> {
        Rc::clone(&self.shared.policy)
    }

    fn count(&self, counter: Counter) {
        self.shared.metrics.bump(counter);
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

    fn issue_token(&mut self, headers: &[(String, Vec<u8>)], path: &str) -> Action {
        let policy = self.policy();
        let Some(token) = &policy.token else {
            return Action::Continue;
        };
        let Some(client) = identify(&policy, &HeaderFacts { headers }) else {
            return self.unscoped(&policy);
        };
        let http = token_endpoint::issue_answer(
            &policy,
            token,
            path,
            client.scope(),
            host::now(),
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
        headers: &[(String, Vec<u8>)],
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
            .and_then(|v| std::str::from_utf8(v).ok());
        match token_endpoint::verify_for(token, text, client.scope(), route, method, host::now()) {
            Ok(claims) => Ok(Some(claims)),
            Err(e) => {
                self.count(Counter::TokenRejected);
                Err(self.reply(&EdgeAnswer::Token(&e)))
            }
        }
    }

    /// Consumes a verified token; `None` means go on, `Some(action)` was answered. A use that
    /// cannot be recorded is refused whatever the failure mode: forwarded unrecorded, the token
    /// could be used again.
    fn consume_token(&mut self, claims: &VerifiedToken) -> Option<Action> {
        let policy = self.policy();
        let mut store = self.shared.store();
        match token_endpoint::consume(&mut store, &policy, claims, host::now()) {
            TokenCheck::Consumed => {
                self.count(Counter::TokenConsumed);
                None
            }
            TokenCheck::Rejected(e) => {
                self.count(Counter::TokenRejected);
                Some(self.reply(&EdgeAnswer::Token(&e)))
            }
            TokenCheck::StoreFull { retry_after } => {
                self.count(Counter::StoreFull);
                Some(self.reply(&EdgeAnswer::StoreFull { retry_after }))
            }
            TokenCheck::QuotaExceeded { retry_after } => {
                self.count(Counter::QuotaExceeded);
                Some(self.reply(&EdgeAnswer::QuotaExceeded { retry_after }))
            }
            TokenCheck::StoreFailed(e) => {
                self.store_failed(&e);
                Some(self.reply(&EdgeAnswer::StoreFailed(&e)))
            }
        }
    }

    fn store_failed(&self, e: &ProtocolError) {
        self.count(Counter::StoreError);
        host::log(LogLevel::Warn, &format!("store failed: {e}"));
    }

    /// No identity to scope the key to: the store-error failure mode applies (503, or forward
    /// unprotected) rather than a namespace shared with other clients.
    fn unscoped(&mut self, policy: &Policy) -> Action {
        self.count(Counter::ScopeUnavailable);
        self.failure(policy.on_store_error, &EdgeAnswer::ScopeUnavailable)
            .unwrap_or(Action::Continue)
    }

    /// Applies a failure mode: reject with the core's answer, or forward unprotected.
    fn failure(&mut self, mode: FailureMode, edge: &EdgeAnswer<'_>) -> Option<Action> {
        match mode {
            FailureMode::Reject => Some(self.reply(edge)),
            FailureMode::PassThrough => {
                self.count(Counter::Passthrough);
                self.stage = Stage::Idle;
                None
            }
        }
    }

    fn start(&mut self, end_of_stream: bool) -> Action {
        let policy = self.policy();
        // One host call: the pseudo-headers come with the rest (a guarded request needs them all).
        let headers = host::headers(MapType::HttpRequestHeaders);
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
        let guarded = match path.find(['?', '#']) {
            Some(query) => format!("{}{}", matched.path, &path[query..]),
            None => matched.path.clone(),
        };
        let key = match IdempotencyKey::parse_all(header_values(&headers, &policy.header)) {
            Ok(key) => key,
            Err(e) => {
                self.count(Counter::InvalidKey);
                return self.reply(&EdgeAnswer::InvalidKey(&e));
            }
        };
        let client = identify(&policy, &HeaderFacts { headers: &headers });
        let token = match self.verify_token(client.as_ref(), route, method, &headers) {
            Ok(token) => token,
            Err(action) => return action,
        };
        let Some(key) = key else {
            if route.key == KeyRequirement::Required {
                self.count(Counter::MissingKey);
                return self.reply(&EdgeAnswer::MissingKey {
                    header: &policy.header,
                });
            }
            // Optional key, none given: no idempotency, but a required token still applies.
            if let Some(claims) = &token {
                if let Some(action) = self.consume_token(claims) {
                    return action;
                }
            }
            self.count(Counter::Passthrough);
            return Action::Continue;
        };
        let Some(client) = client else {
            return self.unscoped(&policy);
        };
        let storage_key = StorageKey::derive(client.scope(), method, &matched.path, &key);
        let fingerprint = FingerprintBuilder::new(
            &policy.fingerprint,
            method,
            &guarded,
            headers
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_slice())),
        );
        let hashing = Box::new(Hashing {
            key: storage_key,
            fingerprint,
            seen: 0,
            token,
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
        let chunk = host::body(BufferType::HttpRequestBody, size);
        if let Err(e) = hashing.fingerprint.update(&chunk) {
            self.count(Counter::InvalidBody);
            return self.reply(&EdgeAnswer::InvalidBody(&e));
        }
        if !end_of_stream {
            return Action::Continue;
        }
        match std::mem::replace(&mut self.stage, Stage::Idle) {
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
            ..
        } = *hashing;
        let fingerprint = match fingerprint.finish() {
            Ok(fingerprint) => fingerprint,
            Err(e) => {
                self.count(Counter::InvalidBody);
                return self.reply(&EdgeAnswer::InvalidBody(&e));
            }
        };
        let mut store = self.shared.store();
        let mut engine = Engine {
            store: &mut store,
            policy: &policy,
        };
        let owner = self.shared.owners.next();
        let outcome = engine.claim(key, fingerprint, owner, host::now());
        match outcome {
            Ok(ClaimOutcome::Forward { owner, takeover }) => {
                self.count(Counter::Claimed);
                if takeover {
                    self.count(Counter::TakenOver);
                }
                self.debug(
                    &key,
                    if takeover {
                        "taken over, forwarded"
                    } else {
                        "claimed, forwarded"
                    },
                );
                if let Some(claims) = &token {
                    if let Some(action) = self.consume_token(claims) {
                        // Not forwarded after all: the upstream never saw it, so release the key.
                        self.finish_claim(key, owner, ResponseFacts::NeverReached);
                        return action;
                    }
                }
                self.stage = Stage::Forwarded(Forwarded {
                    key,
                    owner,
                    answer: None,
                });
                Action::Continue
            }
            Ok(ClaimOutcome::Conflict { retry_after }) => {
                self.count(Counter::Conflict);
                self.debug(&key, "in flight: 409");
                self.reply(&EdgeAnswer::Conflict { retry_after })
            }
            Ok(ClaimOutcome::Replay(stored)) => {
                self.count(Counter::Replayed);
                self.debug(&key, "completed: replayed");
                self.reply(&EdgeAnswer::Replay(&stored))
            }
            Ok(ClaimOutcome::Mismatch) => {
                self.count(Counter::Mismatch);
                self.debug(&key, "other payload: 422");
                self.reply(&EdgeAnswer::Mismatch)
            }
            Ok(ClaimOutcome::QuotaExceeded { retry_after }) => {
                self.count(Counter::QuotaExceeded);
                self.debug(&key, "scope over its quota: 429");
                self.reply(&EdgeAnswer::QuotaExceeded { retry_after })
            }
            Ok(ClaimOutcome::StoreFull { retry_after }) => {
                self.count(Counter::StoreFull);
                self.debug(&key, "store full");
                self.failure(policy.on_store_full, &EdgeAnswer::StoreFull { retry_after })
                    .or_else(|| self.unprotected(token.as_ref()))
                    .unwrap_or(Action::Continue)
            }
            Err(e) => {
                self.store_failed(&e);
                self.failure(policy.on_store_error, &EdgeAnswer::StoreFailed(&e))
                    .or_else(|| self.unprotected(token.as_ref()))
                    .unwrap_or(Action::Continue)
            }
        }
    }

    /// Forwarding without idempotency (`pass_through`) still needs the route's token used, once.
    fn unprotected(&mut self, token: Option<&VerifiedToken>) -> Option<Action> {
        token.and_then(|claims| self.consume_token(claims))
    }

    /// Completes, releases or keeps the claim, as the core decides from `facts`.
    fn finish_claim(&mut self, key: StorageKey, owner: OwnerToken, facts: ResponseFacts) {
        let policy = self.policy();
        let mut store = self.shared.store();
        let mut engine = Engine {
            store: &mut store,
            policy: &policy,
        };
        match engine.finish(key, owner, Some(facts), host::now()) {
            Ok(FinishOutcome::Stored) => {
                self.count(Counter::Stored);
                self.debug(&key, "answer stored");
            }
            Ok(FinishOutcome::Released) => {
                self.count(Counter::Released);
                self.debug(&key, "released");
            }
            Ok(FinishOutcome::KeptInFlight) => {
                self.count(Counter::InDoubt);
                self.debug(
                    &key,
                    "outcome in doubt: kept in flight until the lease ends",
                );
            }
            Ok(FinishOutcome::NotOwner) => self.debug(&key, "no longer the owner: nothing written"),
            Err(e) => self.store_failed(&e),
        }
    }

    /// Ends the forwarded request with what is known now (response complete, or the stream is over).
    fn end(&mut self, complete: bool) {
        let Stage::Forwarded(forwarded) = std::mem::replace(&mut self.stage, Stage::Idle) else {
            return;
        };
        let facts = match (complete, forwarded.answer) {
            (true, Some(capture)) => ResponseFacts::Upstream {
                status: capture.status,
                headers: capture.headers,
                body: capture.body,
            },
            // The stream ended without a complete upstream answer: what the final details say.
            (_, _) => classify(host::property_text(&["response", "code_details"]).as_deref())
                .facts_without_answer(),
        };
        self.finish_claim(forwarded.key, forwarded.owner, facts);
    }

    fn response_headers(&mut self, end_of_stream: bool) -> Action {
        let policy = self.policy();
        let Stage::Forwarded(forwarded) = &mut self.stage else {
            return Action::Continue;
        };
        match classify(host::property_text(&["response", "code_details"]).as_deref()) {
            Origin::Upstream => {
                // One host call for the status and the headers (`:status` is in the map).
                let mut status = 0;
                let headers = host::headers(MapType::HttpResponseHeaders)
                    .into_iter()
                    .filter(|(name, value)| {
                        if name == ":status" {
                            status = std::str::from_utf8(value)
                                .ok()
                                .and_then(|s| s.parse::<u16>().ok())
                                .unwrap_or(0);
                        }
                        policy.replays_header(name)
                    })
                    .filter_map(|(name, value)| String::from_utf8(value).ok().map(|v| (name, v)))
                    .collect();
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
                let Stage::Forwarded(forwarded) = std::mem::replace(&mut self.stage, Stage::Idle)
                else {
                    return Action::Continue;
                };
                self.finish_claim(
                    forwarded.key,
                    forwarded.owner,
                    origin.facts_without_answer(),
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
                body.extend_from_slice(&host::body(BufferType::HttpResponseBody, size));
            }
        }
        if end_of_stream {
            self.end(true);
        }
        Action::Continue
    }
}

impl Context for Filter {
    fn on_done(&mut self) -> bool {
        self.end(false);
        true
    }
}

impl HttpContext for Filter {
    fn on_http_request_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        self.start(end_of_stream)
    }

    fn on_http_request_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        self.hash_chunk(size, end_of_stream)
    }

    fn on_http_request_trailers(&mut self, _trailers: usize) -> Action {
        // Trailers end the request: the body is complete.
        match std::mem::replace(&mut self.stage, Stage::Idle) {
            Stage::Hashing(hashing) => self.claim(hashing),
            other => {
                self.stage = other;
                Action::Continue
            }
        }
    }

    fn on_http_response_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        #[cfg(feature = "test-panic")] // Test-only build (tests/envoy/faults.rs): kill the VM.
        #[allow(clippy::panic)]
        if host::response_header("x-idemgate-test-panic").is_some() {
            panic!("test-panic")
        }
        self.response_headers(end_of_stream)
    }

    fn on_http_response_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        self.response_body(size, end_of_stream)
    }

    fn on_http_response_trailers(&mut self, _trailers: usize) -> Action {
        self.end(true);
        Action::Continue
    }

    fn on_log(&mut self) {
        self.end(false);
    }
}
