//! `Policy::from_json` on arbitrary UTF-8 (the operator's configuration, or whatever reached it).
//!
//! Checks: never panics; an accepted configuration satisfies every rule `compile` promises
//! (ttl > 0, 0 < lease <= ttl, bounded capacity and body limits, valid lowercase header names,
//! nothing on the never-replayed list, routes that start with `/`, a token section whenever a route
//! requires one); parsing is deterministic; the secret from the environment never appears in the
//! policy's Debug output nor in an error; an accepted policy works (route lookup, fingerprint,
//! token issue -> verify).
#![no_main]

use idemgate_core::client::token;
use idemgate_core::headers::NEVER_REPLAYED;
use idemgate_core::policy::{Policy, TokenRequirement};
use idemgate_core::request::fingerprint::FingerprintBuilder;
use idemgate_core::time::{Span, UnixMillis};
use libfuzzer_sys::fuzz_target;

const ENV_SECRET: &str = "fz-env-secret-Qm3c7Zk1Vt8pL0xW";

fn env(name: &str) -> Option<String> {
    match name {
        "IDEMGATE_TOKEN_SECRET" | "SECRET" => Some(ENV_SECRET.into()),
        "SHORT" => Some("short".into()),
        _ => None,
    }
}

fn valid_header_name(name: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(&b)
        })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let result = Policy::from_json(text, &env);
    let again = Policy::from_json(text, &env);
    assert_eq!(
        format!("{result:?}"),
        format!("{again:?}"),
        "parsing is not deterministic"
    );

    let policy = match result {
        Err(e) => {
            // A configuration error, or a route's state table refused with the same typed code
            // the browser's `StateTable.fromJSON` gives (`routes[i].order.table`).
            let code = e.code();
            assert!(
                code.starts_with("config_")
                    || (code.starts_with("transition_table_")
                        && e.field().is_some_and(|f| f.ends_with(".order.table"))),
                "{code}"
            );
            let shown = format!("{e} {e:?}");
            assert!(
                !shown.contains(ENV_SECRET),
                "an error shows the secret: {shown}"
            );
            if let Some(field) = e.field() {
                assert!(!field.is_empty());
            }
            return;
        }
        Ok(policy) => policy,
    };
    assert!(
        !format!("{policy:?}").contains(ENV_SECRET),
        "Debug shows the secret"
    );

    assert!(policy.ttl.as_millis() > 0, "ttl 0");
    assert!(
        policy.lease.as_millis() > 0 && policy.lease <= policy.ttl,
        "lease {:?} ttl {:?}",
        policy.lease,
        policy.ttl
    );
    assert!(policy.capacity.cells >= 1 && (1..=64).contains(&policy.capacity.per_cell));
    assert!(policy.max_response_body <= u64::from(u32::MAX));
    assert!(
        valid_header_name(&policy.header),
        "header {:?}",
        policy.header
    );
    assert!(policy.fingerprint.json_limits.max_depth >= 1);
    for h in &policy.fingerprint.headers {
        assert!(valid_header_name(h), "fingerprint header {h:?}");
    }
    for h in &policy.replay_headers {
        assert!(valid_header_name(h), "replay header {h:?}");
        assert!(
            !NEVER_REPLAYED.contains(&h.as_str()) && !h.starts_with("x-envoy-"),
            "replays {h:?}"
        );
        assert!(policy.replays_header(h) && policy.replays_header(&h.to_ascii_uppercase()));
    }
    for never in NEVER_REPLAYED {
        assert!(!policy.replays_header(never), "{never} is replayed");
    }
    for route in &policy.routes {
        assert!(route.prefix.starts_with('/'));
        assert!(!route.methods.is_empty());
        assert!(route
            .methods
            .iter()
            .all(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_uppercase())));
        if route.token == TokenRequirement::Required {
            assert!(
                policy.token.is_some(),
                "a route requires a token but there is no secret"
            );
        }
        // A prefix holding `?` or `#` can never match (the query is cut off before matching);
        // reported, not asserted, so the target keeps exploring.
        if !route.prefix.contains(['?', '#']) {
            let method = &route.methods[0];
            let found = policy.route_for(method, &format!("{}?q=1", route.prefix));
            assert!(
                found.is_some(),
                "route {route:?} does not match its own prefix"
            );
        }
    }
    assert!(!policy.scope.is_empty());
    for source in &policy.scope {
        assert!(!source.label().is_empty());
    }

    // The policy is usable as compiled.
    let _ = policy.route_for("POST", "/orders?x=1#f");
    let mut fp = FingerprintBuilder::new(
        &policy.fingerprint,
        "POST",
        "/orders",
        [("content-type", &b"application/json"[..])],
    );
    let _ = fp.update(br#"{"sku":"A1","qty":1}"#);
    let _ = fp.finish();
    if let Some(t) = &policy.token {
        assert!(t.issue_path.starts_with('/'));
        assert!(valid_header_name(&t.header));
        assert!(!format!("{t:?}").contains(ENV_SECRET));
        let now = UnixMillis(1_700_000_000_000);
        let issued = token::issue(&t.secret, &[3; 32], now, t.ttl, [5; 16]);
        let verified = token::verify(&t.secret, &issued.text, &[3; 32], now);
        if t.ttl > Span(0) {
            assert_eq!(verified, Ok(issued.claims));
        } else {
            assert_eq!(verified, Err(token::TokenError::Expired));
        }
    }
});
