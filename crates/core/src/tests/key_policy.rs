//! Per-route key rules through the whole guard, over the local store: a key's format (kept,
//! refused with `key_format`, or ignored so that a browser's own key passes as no key), and keys
//! that are the client's across routes (`key_scope: "client"`: the same key on another endpoint
//! is `key_reused`, never a second run nor the other endpoint's answer). Then the configuration's
//! refusals, each at its field, and the published policy.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::edge::Edge;
use crate::guard::{self, Action, Ask, Capture, Headed, Host, Reply};
use crate::{MemoryStore, Policy, Protocol, UnixMillis};
use std::prelude::rust_2021::{String, ToOwned};

/// The value a browser mints for a form POST: a UUID, as a structured-field string.
const BROWSER_KEY: &str = "\"6ba7b810-9dad-11d1-80b4-00c04fd430c8\"";

fn edge() -> Edge {
    Edge::at(UnixMillis(1_700_000_000_000))
}

fn policy(json: &str) -> Policy {
    Policy::from_json(json, &|_| None).unwrap_or_else(|e| panic!("{e}"))
}

/// What became of one request.
#[derive(Debug, Default, PartialEq, Eq)]
struct Seen {
    status: Option<u16>,
    problem: Option<String>,
    replayed: bool,
    /// Reached the upstream under a claim.
    forwarded: bool,
    /// Reached the upstream without idempotency (no key, none required).
    unguarded: bool,
}

/// One request from Alice: `method` `path` with `key` (if any) and a JSON `body`. A claimed
/// request's upstream answers 201 with `answer`, which is stored.
fn send(
    policy: &Policy,
    edge: &Edge,
    store: &mut MemoryStore,
    (method, path): (&str, &str),
    key: Option<&str>,
    body: &str,
    answer: &str,
) -> Seen {
    let mut headers = std::vec![
        (":method", method.as_bytes()),
        (":path", path.as_bytes()),
        ("content-type", &b"application/json"[..]),
        ("authorization", b"Bearer alice"),
    ];
    if let Some(key) = key {
        headers.push(("idempotency-key", key.as_bytes()));
    }
    let (headed, _) = guard::head(policy, headers.iter().copied(), true, edge);
    let mut seen = Seen::default();
    let keyed = match headed {
        Headed::Keyed(keyed) => keyed,
        Headed::Answer(http) => {
            seen.status = Some(http.status);
            seen.problem = problem_type(&http.body);
            return seen;
        }
        Headed::Unguarded { .. } => {
            seen.unguarded = true;
            return seen;
        }
        Headed::Pass => panic!("no route for {method} {path}"),
    };
    let mut machine = keyed.take::<(), ()>(policy, |_| ());
    if machine.body_wants(body.len() as u64) {
        machine.body_chunk(Some(body.as_bytes()));
    }
    machine.body_end();
    let now = edge.now().unwrap();
    let mut protocol = Protocol { store, policy };
    while let Some(action) = machine.poll() {
        match action {
            Action::Ask(Ask::Claim(c)) => {
                let outcome = protocol.claim(c.key, c.fingerprint, c.owner, c.payers, now);
                machine.answered(Reply::Claim(outcome), policy);
            }
            Action::Forward => {
                seen.forwarded = true;
                let head = [
                    (":status", &b"201"[..]),
                    ("content-type", b"application/json"),
                ];
                machine.upstream_head(Capture::head(head, policy));
                if machine.upstream_wants(answer.len() as u64) {
                    machine.upstream_chunk(Some(answer.as_bytes()));
                }
                seen.status = Some(201);
                machine.ended(true, || unreachable!("the answer came whole"));
            }
            Action::Finish {
                key, owner, facts, ..
            } => {
                protocol.finish(key, owner, Some(facts), now).unwrap();
            }
            Action::Answer(http) => {
                seen.status = Some(http.status);
                seen.replayed = http.header("idempotent-replayed") == Some("true");
                seen.problem = problem_type(&http.body);
            }
            Action::Warn(_) => {}
            // The body had no key the route keeps: forwarded without idempotency.
            Action::Pass => seen.unguarded = true,
            other => panic!("not on this route: {other:?}"),
        }
    }
    seen
}

fn problem_type(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    Some(value.get("type")?.as_str()?.rsplit(':').next()?.to_owned())
}

fn refused(problem: &str) -> Seen {
    Seen {
        status: Some(400),
        problem: Some(problem.to_owned()),
        ..Seen::default()
    }
}

fn forwarded() -> Seen {
    Seen {
        status: Some(201),
        forwarded: true,
        ..Seen::default()
    }
}

fn replayed() -> Seen {
    Seen {
        status: Some(201),
        replayed: true,
        ..Seen::default()
    }
}

fn unguarded() -> Seen {
    Seen {
        unguarded: true,
        ..Seen::default()
    }
}

const POST_ORDERS: (&str, &str) = ("POST", "/orders");

#[test]
fn a_key_of_the_routes_format_is_guarded_as_any_key() {
    for format in [r#""uuid""#, r#"{"prefix": "6ba7"}"#] {
        let policy = policy(&format!(
            r#"{{"routes": [{{"prefix": "/orders", "forward": "router", "key_format": {format}}}]}}"#
        ));
        let (edge, mut store) = (edge(), MemoryStore::new());
        let key = Some(BROWSER_KEY);
        let first = send(
            &policy,
            &edge,
            &mut store,
            POST_ORDERS,
            key,
            "{}",
            "{\"id\":1}",
        );
        assert_eq!(first, forwarded(), "{format}");
        let again = send(
            &policy,
            &edge,
            &mut store,
            POST_ORDERS,
            key,
            "{}",
            "{\"id\":2}",
        );
        assert_eq!(again, replayed(), "{format}");
    }
}

#[test]
fn a_key_of_another_format_is_refused_by_default_with_its_own_code() {
    let policy = policy(
        r#"{"routes": [{"prefix": "/orders", "forward": "router", "key_format": {"prefix": "ord_"}}]}"#,
    );
    let (edge, mut store) = (edge(), MemoryStore::new());
    let seen = send(
        &policy,
        &edge,
        &mut store,
        POST_ORDERS,
        Some(BROWSER_KEY),
        "{}",
        "",
    );
    assert_eq!(seen, refused("key_format"));
    // A key of the format, and a request without a key, go as before.
    let ours = send(
        &policy,
        &edge,
        &mut store,
        POST_ORDERS,
        Some("ord_1"),
        "{}",
        "{}",
    );
    assert_eq!(ours, forwarded());
    let none = send(&policy, &edge, &mut store, POST_ORDERS, None, "{}", "");
    assert_eq!(none, unguarded());
}

#[test]
fn the_refusal_says_which_format_the_endpoint_takes() {
    let policy = policy(r#"{"key_format": {"prefix": "ord_"}}"#);
    let headers = [
        (":method", &b"POST"[..]),
        (":path", b"/orders"),
        ("idempotency-key", b"abc"),
    ];
    let (headed, _) = guard::head(&policy, headers, true, &edge());
    let Headed::Answer(http) = headed else {
        panic!("not refused: {headed:?}");
    };
    let body: serde_json::Value = serde_json::from_slice(&http.body).unwrap();
    assert_eq!(http.status, 400);
    assert_eq!(body["code"], "key_format", "{body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.contains("starts with `ord_`"), "{detail}");
}

#[test]
fn a_browser_minted_key_on_an_ignore_route_passes_as_a_request_without_a_key() {
    let policy = policy(
        r#"{"routes": [{"prefix": "/orders", "forward": "router",
             "key_format": {"prefix": "ord_"}, "key_mismatch": "ignore"}]}"#,
    );
    let (edge, mut store) = (edge(), MemoryStore::new());
    // The browser's key: neither refused nor claimed, every time (no 422 on a second form POST
    // with the same key and another body, no replay).
    for body in ["{\"qty\":1}", "{\"qty\":2}"] {
        let seen = send(
            &policy,
            &edge,
            &mut store,
            POST_ORDERS,
            Some(BROWSER_KEY),
            body,
            "",
        );
        assert_eq!(seen, unguarded(), "{body}");
    }
    // The same request without a key is the same.
    let none = send(&policy, &edge, &mut store, POST_ORDERS, None, "{}", "");
    assert_eq!(none, unguarded());
    // The site's own keys are still guarded.
    let ours = send(
        &policy,
        &edge,
        &mut store,
        POST_ORDERS,
        Some("ord_7"),
        "{}",
        "{}",
    );
    assert_eq!(ours, forwarded());
    let again = send(
        &policy,
        &edge,
        &mut store,
        POST_ORDERS,
        Some("ord_7"),
        "{}",
        "{}",
    );
    assert_eq!(again, replayed());
}

#[test]
fn a_body_key_is_held_to_the_format_too() {
    let policy = policy(
        r#"{"routes": [{"prefix": "/orders", "forward": "router", "key_from": [{"json": "/key"}],
             "key_format": "uuid", "key_mismatch": "ignore"},
            {"prefix": "/carts", "forward": "router", "key_from": [{"json": "/key"}],
             "key_format": "uuid"}]}"#,
    );
    let (edge, mut store) = (edge(), MemoryStore::new());
    let ignored = send(
        &policy,
        &edge,
        &mut store,
        POST_ORDERS,
        None,
        "{\"key\":\"x\"}",
        "",
    );
    // Decided at the end of the body: taken as having no key, so not claimed.
    assert_eq!(ignored, unguarded());
    let carts = ("POST", "/carts");
    let refused_now = send(
        &policy,
        &edge,
        &mut store,
        carts,
        None,
        "{\"key\":\"x\"}",
        "",
    );
    assert_eq!(refused_now, refused("key_format"));
    let uuid = "{\"key\":\"6ba7b810-9dad-11d1-80b4-00c04fd430c8\"}";
    assert_eq!(
        send(&policy, &edge, &mut store, carts, None, uuid, "{}"),
        forwarded()
    );
}

#[test]
fn the_top_level_format_is_every_api_routes_default() {
    let policy = policy(
        r#"{"key_format": "uuid", "key_mismatch": "ignore",
            "routes": [{"prefix": "/orders", "forward": "router"},
                       {"prefix": "/refunds", "forward": "router", "key_mismatch": "refuse"},
                       {"prefix": "/hooks", "kind": "callback", "forward": "router",
                        "key_from": [{"header": "x-delivery"}]}]}"#,
    );
    let (edge, mut store) = (edge(), MemoryStore::new());
    let orders = send(
        &policy,
        &edge,
        &mut store,
        POST_ORDERS,
        Some("abc"),
        "{}",
        "",
    );
    assert_eq!(orders, unguarded());
    let refunds = send(
        &policy,
        &edge,
        &mut store,
        ("POST", "/refunds"),
        Some("abc"),
        "{}",
        "",
    );
    assert_eq!(refunds, refused("key_format"));
    // A callback route takes only its own fields: its delivery ids are the provider's.
    assert_eq!(
        policy.routes[2].keys,
        crate::request::key_format::KeyRules::DEFAULT
    );
}

#[test]
fn a_client_scoped_key_on_another_endpoint_is_reused_never_run_again() {
    let policy = policy(
        r#"{"key_scope": "client",
            "routes": [{"prefix": "/orders", "forward": "router", "methods": ["POST", "PUT"]},
                       {"prefix": "/refunds", "forward": "router"},
                       {"prefix": "/carts", "forward": "router", "key_scope": "route"}]}"#,
    );
    let (edge, mut store) = (edge(), MemoryStore::new());
    let key = Some("k-1");
    let first = send(
        &policy,
        &edge,
        &mut store,
        POST_ORDERS,
        key,
        "{}",
        "{\"order\":1}",
    );
    assert_eq!(first, forwarded());
    // The same key and body on another endpoint: Stripe's 422, not a second run, not the
    // order's answer.
    let refunds = ("POST", "/refunds");
    let other = send(
        &policy,
        &edge,
        &mut store,
        refunds,
        key,
        "{}",
        "{\"refund\":1}",
    );
    assert_eq!(
        other,
        Seen {
            status: Some(422),
            problem: Some("key_reused".to_owned()),
            ..Seen::default()
        }
    );
    // Another method on the same path is another endpoint too.
    let put = send(
        &policy,
        &edge,
        &mut store,
        ("PUT", "/orders"),
        key,
        "{}",
        "",
    );
    assert_eq!(put.problem.as_deref(), Some("key_reused"));
    // A retry on the first endpoint is its replay.
    let retry = send(&policy, &edge, &mut store, POST_ORDERS, key, "{}", "");
    assert_eq!(retry, replayed());
    // A route-scoped route keeps its own namespace: the same key there runs.
    let carts = send(
        &policy,
        &edge,
        &mut store,
        ("POST", "/carts"),
        key,
        "{}",
        "{}",
    );
    assert_eq!(carts, forwarded());
}

#[test]
fn a_client_scoped_key_is_bound_to_its_endpoint_even_without_a_fingerprinted_body() {
    let policy = policy(
        r#"{"fingerprint": {"mode": "none"},
            "routes": [{"prefix": "/orders", "forward": "router", "key_scope": "client"},
                       {"prefix": "/refunds", "forward": "router", "key_scope": "client"}]}"#,
    );
    let (edge, mut store) = (edge(), MemoryStore::new());
    let key = Some("k-2");
    assert_eq!(
        send(&policy, &edge, &mut store, POST_ORDERS, key, "{}", "{}"),
        forwarded()
    );
    // `none` compares no payload: another body on the same endpoint is a retry.
    let retry = send(
        &policy,
        &edge,
        &mut store,
        POST_ORDERS,
        key,
        "{\"x\":1}",
        "",
    );
    assert_eq!(retry, replayed());
    let other = send(
        &policy,
        &edge,
        &mut store,
        ("POST", "/refunds"),
        key,
        "{}",
        "",
    );
    assert_eq!(other.problem.as_deref(), Some("key_reused"));
}

#[test]
fn the_published_policy_lists_each_routes_key_rules() {
    let policy = policy(
        r#"{"routes": [{"prefix": "/orders", "key_format": {"prefix": "ord_"}, "key_mismatch": "ignore"},
                       {"prefix": "/refunds", "key_format": "uuid", "key_scope": "client"},
                       {"prefix": "/carts"},
                       {"prefix": "/invoices", "key_format": {"pattern": "inv_\\d{6}"}}]}"#,
    );
    let headers = [
        (":method", &b"GET"[..]),
        (":path", b"/.well-known/idempotency"),
    ];
    let (headed, _) = guard::head(&policy, headers, false, &edge());
    let Headed::Answer(http) = headed else {
        panic!("not published: {headed:?}");
    };
    let doc: serde_json::Value = serde_json::from_slice(&http.body).unwrap();
    let routes = doc["routes"].as_array().unwrap();
    assert_eq!(routes[0]["key_format"]["prefix"], "ord_");
    assert_eq!(routes[0]["key_mismatch"], "ignore");
    assert!(routes[0].get("key_scope").is_none());
    assert_eq!(routes[1]["key_format"], "uuid");
    assert_eq!(routes[1]["key_mismatch"], "refuse");
    assert_eq!(routes[1]["key_scope"], "client");
    // A route without rules reads as before.
    for field in ["key_format", "key_mismatch", "key_scope"] {
        assert!(routes[2].get(field).is_none(), "{field}");
    }
    assert_eq!(routes[3]["key_format"]["pattern"], "inv_\\d{6}");
    assert_eq!(routes[3]["key_mismatch"], "refuse");
}

mod config;
