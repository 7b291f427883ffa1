//! The headers' step: each way a request goes, and what it asks of its host (the clock, the
//! randomness, the peer's address) only when a rule needs it.

use super::*;
use crate::guard::{Event, Guarded};
use alloc::string::String;
use alloc::vec;
use core::cell::Cell;

/// A host that counts what it is asked.
struct Counting {
    clock: Option<UnixMillis>,
    address: Result<Option<Vec<u8>>, Unreadable>,
    clock_reads: Cell<u32>,
    address_reads: Cell<u32>,
    owners: Cell<u32>,
    nonces: Cell<u32>,
    budget: Rc<Budget>,
    relay: Rc<Budget>,
    scopes: ScopeHashes,
}

impl Counting {
    fn new() -> Self {
        Counting {
            clock: Some(UnixMillis(1_700_000_000_000)),
            address: Ok(Some(b"192.0.2.7:5000".to_vec())),
            clock_reads: Cell::new(0),
            address_reads: Cell::new(0),
            owners: Cell::new(0),
            nonces: Cell::new(0),
            budget: Rc::new(Budget::default()),
            relay: Rc::new(Budget::default()),
            scopes: ScopeHashes::default(),
        }
    }
}

impl Host for Counting {
    fn property(&self, path: &[&str]) -> Result<Option<Vec<u8>>, Unreadable> {
        if path == ["source", "address"] {
            self.address_reads.set(self.address_reads.get() + 1);
            return self.address.clone();
        }
        Ok(None)
    }
    fn now(&self) -> Option<UnixMillis> {
        self.clock_reads.set(self.clock_reads.get() + 1);
        self.clock
    }
    fn nonce(&self) -> [u8; 16] {
        self.nonces.set(self.nonces.get() + 1);
        [7; 16]
    }
    fn owner(&self) -> OwnerToken {
        self.owners.set(self.owners.get() + 1);
        OwnerToken([2; 16])
    }
    fn scopes(&self) -> &ScopeHashes {
        &self.scopes
    }
    fn budget(&self) -> Rc<Budget> {
        Rc::clone(&self.budget)
    }
    fn relay_budget(&self) -> Rc<Budget> {
        Rc::clone(&self.relay)
    }
}

fn policy(json: &str) -> Policy {
    Policy::from_json(json, &|_| None).unwrap_or_else(|e| panic!("{e}"))
}

const ORDERS: &str = r#"{"routes":[{"prefix":"/orders","forward":"router"}]}"#;

/// A request's headers as a host reads them, pseudo-headers first.
fn request<'a>(
    method: &'a str,
    path: &'a str,
    rest: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a [u8])> {
    let mut headers = vec![(":method", method.as_bytes()), (":path", path.as_bytes())];
    headers.extend(rest.iter().map(|(n, v)| (*n, v.as_bytes())));
    headers
}

fn decide<'p>(
    policy: &'p Policy,
    headers: &[(&str, &[u8])],
    body: bool,
    host: &Counting,
) -> (Headed<'p>, Vec<Event>) {
    let (headed, events) = head(policy, headers.iter().copied(), body, host);
    (headed, events.iter().collect())
}

fn status(headed: &Headed<'_>) -> u16 {
    match headed {
        Headed::Answer(http) => http.status,
        other => panic!("not answered: {other:?}"),
    }
}

fn code(headed: &Headed<'_>) -> String {
    match headed {
        Headed::Answer(http) => String::from_utf8_lossy(&http.body).into_owned(),
        other => panic!("not answered: {other:?}"),
    }
}

#[test]
fn a_keyed_request_takes_its_body_with_one_owner_and_one_address_read() {
    let policy = policy(ORDERS);
    let host = Counting::new();
    let headers = request(
        "POST",
        "/orders",
        &[("idempotency-key", "\"k1\""), ("authorization", "Bearer a")],
    );
    let (headed, events) = decide(&policy, &headers, true, &host);
    let Headed::Keyed(keyed) = headed else {
        panic!("not keyed: {headed:?}")
    };
    assert!(events.is_empty());
    assert_eq!(keyed.route().prefix, "/orders");
    assert_eq!(host.owners.get(), 1, "one owner token for the claim");
    // The payers and the budget's peer both want the address: the host is asked once.
    assert_eq!(host.address_reads.get(), 1);
    assert_eq!(
        host.clock_reads.get(),
        0,
        "no signature, no token: no clock"
    );
    let mut kept = 0;
    let machine: Guarded<(), ()> = keyed.take(&policy, |_| kept += 1);
    assert!(machine.is_taking());
    assert_eq!(kept, 0, "a router route keeps nothing for an exchange");
}

#[test]
fn a_detached_route_asks_the_host_for_its_part_of_the_request() {
    let policy = policy(
        r#"{"upstream":{"reentry":"routes"},"routes":[{"prefix":"/orders","forward":"detached"}]}"#,
    );
    let host = Counting::new();
    let headers = request("POST", "/orders", &[("idempotency-key", "\"k1\"")]);
    let (Headed::Keyed(keyed), _) = decide(&policy, &headers, true, &host) else {
        panic!("not keyed")
    };
    let machine: Guarded<(), String> = keyed.take(&policy, |detached| detached.cluster.clone());
    assert!(machine.is_taking());
}

#[test]
fn a_request_no_route_matches_or_without_a_method_is_left_alone() {
    let policy = policy(ORDERS);
    let host = Counting::new();
    let elsewhere = request("POST", "/users", &[("idempotency-key", "\"k1\"")]);
    assert!(matches!(
        decide(&policy, &elsewhere, true, &host),
        (Headed::Pass, events) if events.is_empty()
    ));
    let no_method = [(":path", &b"/orders"[..]), ("idempotency-key", b"\"k1\"")];
    assert!(matches!(
        decide(&policy, &no_method, true, &host).0,
        Headed::Pass
    ));
    let not_text = [(":method", &b"POST"[..]), (":path", b"/orders\xff")];
    assert!(matches!(
        decide(&policy, &not_text, true, &host).0,
        Headed::Pass
    ));
    assert_eq!(
        (
            host.owners.get(),
            host.address_reads.get(),
            host.clock_reads.get()
        ),
        (0, 0, 0),
        "the host is asked for nothing"
    );
}

#[test]
fn no_key_on_an_optional_route_goes_unguarded_without_a_claim() {
    let policy = policy(r#"{"routes":[{"prefix":"/orders","key":"optional"}]}"#);
    let host = Counting::new();
    let headers = request("POST", "/orders", &[("authorization", "Bearer a")]);
    let (headed, events) = decide(&policy, &headers, true, &host);
    assert!(
        matches!(headed, Headed::Unguarded { token: None, .. }),
        "{headed:?}"
    );
    assert!(events.is_empty());
    assert_eq!(host.owners.get(), 0, "no claim, no owner token");
}

#[test]
fn a_missing_required_key_is_refused_and_counted() {
    let policy = policy(r#"{"routes":[{"prefix":"/orders","key":"required"}]}"#);
    let host = Counting::new();
    let (headed, events) = decide(&policy, &request("POST", "/orders", &[]), true, &host);
    assert_eq!(status(&headed), 400);
    assert!(!events.is_empty(), "a refusal is counted");
}

#[test]
fn no_client_to_scope_the_key_to_follows_the_store_error_mode() {
    let reject =
        policy(r#"{"scope":[{"header":"authorization"}],"routes":[{"prefix":"/orders"}]}"#);
    let host = Counting::new();
    let headers = request("POST", "/orders", &[("idempotency-key", "\"k1\"")]);
    let (headed, events) = decide(&reject, &headers, true, &host);
    assert_eq!(status(&headed), 503);
    assert!(code(&headed).contains("scope_unavailable"));
    assert_eq!(events, [Event::ScopeUnavailable]);

    let pass = policy(
        r#"{"scope":[{"header":"authorization"}],"on_store_error":"pass_through",
            "routes":[{"prefix":"/orders"}]}"#,
    );
    let (headed, events) = decide(&pass, &headers, true, &host);
    assert!(matches!(headed, Headed::Pass), "{headed:?}");
    assert_eq!(events, [Event::ScopeUnavailable, Event::Passthrough]);
}

#[test]
fn an_address_the_host_cannot_read_is_never_no_address() {
    let policy = policy(ORDERS);
    let mut host = Counting::new();
    host.address = Err(Unreadable);
    let headers = request(
        "POST",
        "/orders",
        &[("idempotency-key", "\"k1\""), ("authorization", "Bearer a")],
    );
    let (headed, _) = decide(&policy, &headers, true, &host);
    assert_eq!(status(&headed), 503);
    assert!(code(&headed).contains("request_unreadable"));
}

#[test]
fn a_precondition_is_checked_before_the_key() {
    let policy =
        policy(r#"{"routes":[{"prefix":"/items","methods":["PUT"],"precondition":"if-match"}]}"#);
    let host = Counting::new();
    let (headed, events) = decide(&policy, &request("PUT", "/items/1", &[]), true, &host);
    assert_eq!(status(&headed), 428);
    assert_eq!(events, [Event::PreconditionRequired]);
    let malformed = request("PUT", "/items/1", &[("if-match", "v1")]);
    let (headed, events) = decide(&policy, &malformed, true, &host);
    assert_eq!(status(&headed), 400);
    assert_eq!(events, [Event::PreconditionMalformed]);
    // `*` names no version: refused where the route wants one, accepted where it says so.
    let any = request("PUT", "/items/1", &[("if-match", "*")]);
    let (headed, events) = decide(&policy, &any, true, &host);
    assert_eq!(status(&headed), 428);
    assert!(code(&headed).contains("precondition_version_required"));
    assert_eq!(events, [Event::PreconditionRequired]);
    let lenient = self::policy(
        r#"{"routes":[{"prefix":"/items","methods":["PUT"],"precondition":"if-match-or-any"}]}"#,
    );
    let (headed, _) = decide(&lenient, &any, true, &host);
    assert!(matches!(headed, Headed::Unguarded { .. }), "{headed:?}");
}

const TOKENS: &str = r#"{"token":{"secret":"0123456789abcdef0123"},
    "routes":[{"prefix":"/pay","token":"required"},{"prefix":"/"}]}"#;

#[test]
fn the_token_endpoint_issues_with_the_hosts_clock_and_nonce() {
    let policy = policy(TOKENS);
    let host = Counting::new();
    let asks = request(
        "GET",
        "/.idemgate/token?method=POST&path=%2Fpay",
        &[("authorization", "Bearer a")],
    );
    let (headed, events) = decide(&policy, &asks, false, &host);
    assert_eq!(status(&headed), 200);
    assert_eq!(events, [Event::TokenIssued]);
    assert_eq!((host.nonces.get(), host.clock_reads.get()), (1, 1));

    let mut stopped = Counting::new();
    stopped.clock = None;
    let (headed, events) = decide(&policy, &asks, false, &stopped);
    assert!(code(&headed).contains("clock_unavailable"));
    assert!(
        events.is_empty(),
        "the host's clock failed, not the request"
    );
    assert_eq!(stopped.nonces.get(), 0);
}

#[test]
fn a_required_token_is_checked_before_the_claim() {
    let policy = policy(TOKENS);
    let host = Counting::new();
    let without = request(
        "POST",
        "/pay",
        &[("idempotency-key", "\"k1\""), ("authorization", "Bearer a")],
    );
    let (headed, events) = decide(&policy, &without, true, &host);
    assert_eq!(status(&headed), 403);
    assert!(code(&headed).contains("token"), "{}", code(&headed));
    assert_eq!(events, [Event::TokenRejected]);
    assert_eq!(host.owners.get(), 0, "refused before any claim");
}

#[test]
fn a_signature_window_reads_the_clock_and_a_failed_clock_refuses() {
    let policy = Policy::from_json(
        r#"{"routes":[{"prefix":"/hooks","preset":"standard-webhooks",
            "signature":{"secret_env":"HOOK_SECRET"}}]}"#,
        &|name| (name == "HOOK_SECRET").then(|| "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut host = Counting::new();
    host.clock = None;
    let headers = request("POST", "/hooks", &[("webhook-id", "msg_1")]);
    let (headed, events) = decide(&policy, &headers, true, &host);
    assert!(code(&headed).contains("clock_unavailable"));
    assert!(events.is_empty());
    assert_eq!(host.clock_reads.get(), 1);
}
