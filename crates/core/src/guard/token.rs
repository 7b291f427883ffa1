//! One-time tokens at the edge (`docs/semantics.md` §7): the issuing endpoint's answer
//! ([`asks_for_token`], [`issue_token`]), and a route's token checked before any store decision:
//! the request goes on to its claim with the token verified (its single use comes later,
//! [`super::after_use`]), or stops here. The host hands over its facts — the client's scope, the
//! header the policy names, its clock, read only when a token is required — and carries out the
//! answer.

use super::{Event, Events};
use crate::answer::{answer, answer_for, EdgeAnswer, HttpAnswer};
use crate::client::scope::{token_audience, QuotaTag, Scope, StorageKey};
use crate::client::token::{issue, issued_for, verify, IssueFor, TokenError};
use crate::policy::{Policy, Route, TokenRequirement};
use crate::request::target::path_without_query;
use crate::time::UnixMillis;

/// Whether a `method` request for `path` (query allowed) asks the policy's issuing endpoint for a
/// token (`GET` or `POST` on `token.issue_path`); never without a token policy.
pub(crate) fn asks_for_token(policy: &Policy, method: &str, path: &str) -> bool {
    policy.token.as_ref().is_some_and(|token| {
        path_without_query(path) == token.issue_path && matches!(method, "GET" | "POST")
    })
}

/// The issuing endpoint's answer to a client with `scope`: a fresh token bound to that scope and
/// to the route and method the request names (`?method=POST&path=/payments`), or a 400 problem if
/// they name no route that requires a token. `nonce` is the host's 16 random bytes; the event is
/// `TokenIssued` when a token was.
pub(crate) fn issue_token(
    policy: &Policy,
    request_path: &str,
    scope: Scope<'_>,
    now: UnixMillis,
    nonce: [u8; 16],
) -> (HttpAnswer, Events) {
    let asked = issued_for(request_path);
    let route = asked.as_ref().and_then(|asked| {
        policy
            .route_for(&asked.method, &asked.path)
            .filter(|route| route.token == TokenRequirement::Required)
    });
    let (Some(token), Some(route), Some(IssueFor { method, .. })) = (&policy.token, route, asked)
    else {
        return (
            answer_for(&EdgeAnswer::TokenRouteUnknown, policy),
            Events::default(),
        );
    };
    let audience = token_audience(scope, &route.prefix, &method);
    let issued = issue(&token.secret, &audience, now, token.ttl, nonce);
    let http = answer(&EdgeAnswer::TokenIssued {
        token: &issued.text,
        expires_at_ms: issued.claims.expires_at.0,
        header: &token.header,
    });
    (http, Events::of(&[Event::TokenIssued]))
}

/// A token whose signature, binding and time are good, and the store key of its single use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifiedToken {
    pub expires_at: UnixMillis,
    /// Named by the nonce, tagged with the client's scope: the use counts against its share.
    pub use_key: StorageKey,
}

/// Why a request's token stops it before its claim.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum TokenRefusal {
    /// No scope source identified the client. A token is bound to one, so it cannot be checked:
    /// never forwarded, whatever `on_store_error` says.
    Unscoped,
    /// The host could not read its clock (the token's time cannot be checked).
    NoClock,
    /// Missing, or not valid for this client, route and method.
    Invalid(TokenError),
}

impl TokenRefusal {
    /// The answer the host sends.
    pub fn answer(&self) -> EdgeAnswer<'_> {
        match self {
            TokenRefusal::Unscoped => EdgeAnswer::ScopeUnavailable,
            TokenRefusal::NoClock => EdgeAnswer::ClockUnavailable,
            TokenRefusal::Invalid(e) => EdgeAnswer::Token(e),
        }
    }

    /// What the host counts: a clock that failed is the host's, not the request's, and counts
    /// nothing.
    pub(crate) fn events(&self) -> Events {
        match self {
            TokenRefusal::Unscoped => Events::of(&[Event::ScopeUnavailable]),
            TokenRefusal::NoClock => Events::default(),
            TokenRefusal::Invalid(_) => Events::of(&[Event::TokenRejected]),
        }
    }
}

/// The token `route` requires of a `method` request from `client`: `Ok(None)` when it requires
/// none, the verified token, or why the request stops. `presented` gives the first value of a
/// request header (as text); `clock` the host's time — each asked for only when needed.
#[must_use = "a request goes on only if its token says so"]
pub(crate) fn check_token<'h>(
    policy: &Policy,
    route: &Route,
    method: &str,
    client: Option<Scope<'_>>,
    presented: impl FnOnce(&str) -> Option<&'h str>,
    clock: impl FnOnce() -> Option<UnixMillis>,
) -> Result<Option<VerifiedToken>, TokenRefusal> {
    let (TokenRequirement::Required, Some(token)) = (route.token, &policy.token) else {
        return Ok(None);
    };
    let scope = client.ok_or(TokenRefusal::Unscoped)?;
    let text = presented(&token.header);
    let now = clock().ok_or(TokenRefusal::NoClock)?;
    let text = text.ok_or(TokenRefusal::Invalid(TokenError::Missing))?;
    let audience = token_audience(scope, &route.prefix, method);
    let claims =
        verify(&token.secret, text.trim(), &audience, now).map_err(TokenRefusal::Invalid)?;
    Ok(Some(VerifiedToken {
        expires_at: claims.expires_at,
        use_key: StorageKey::tagged(claims.consumption_key(), QuotaTag::of(scope)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::payer::Payers;
    use crate::store::protocol::ConsumeOutcome;
    use crate::store::MemoryStore;
    use crate::Protocol;
    use alloc::string::{String, ToString};
    use alloc::vec::Vec;

    fn policy() -> Policy {
        let json = r#"{"token":{"secret":"0123456789abcdef0123"},
            "routes":[{"prefix":"/pay","token":"required"},{"prefix":"/"}]}"#;
        Policy::from_json(json, &|_| None).unwrap_or_else(|e| panic!("{e}"))
    }

    const ALICE: Scope<'static> = Scope {
        source: "header:authorization",
        value: b"Bearer alice",
    };
    const NOW: UnixMillis = UnixMillis(1_700_000_000_000);

    fn route<'p>(policy: &'p Policy, path: &str) -> &'p Route {
        policy
            .route_for("POST", path)
            .unwrap_or_else(|| panic!("a route for {path}"))
    }

    #[test]
    fn a_route_without_a_token_asks_for_no_fact() {
        let policy = policy();
        let checked = check_token(
            &policy,
            route(&policy, "/orders"),
            "POST",
            None,
            |_| panic!("no header read"),
            || panic!("no clock read"),
        );
        assert_eq!(checked, Ok(None));
    }

    #[test]
    fn a_required_token_is_verified_for_its_client_route_and_method() {
        let policy = policy();
        let pay = route(&policy, "/pay");
        let Some(token) = &policy.token else {
            panic!("a token policy")
        };
        let audience = token_audience(ALICE, &pay.prefix, "POST");
        let issued = issue(&token.secret, &audience, NOW, token.ttl, [7; 16]);
        let text = issued.text.as_str();
        let ok = check_token(
            &policy,
            pay,
            "POST",
            Some(ALICE),
            |_| Some(text),
            || Some(NOW),
        );
        let Ok(Some(verified)) = ok else {
            panic!("{ok:?}")
        };
        assert_eq!(verified.expires_at, issued.claims.expires_at);
        // Another client, another method: refused and counted; no client: unscoped.
        let bob = Scope {
            source: "header:authorization",
            value: b"Bearer bob",
        };
        for (client, method) in [(Some(bob), "POST"), (Some(ALICE), "PATCH")] {
            let refused = check_token(&policy, pay, method, client, |_| Some(text), || Some(NOW));
            let Err(refusal @ TokenRefusal::Invalid(_)) = refused else {
                panic!("{refused:?}")
            };
            assert_eq!(
                refusal.events().iter().collect::<Vec<_>>(),
                [Event::TokenRejected]
            );
        }
        let unscoped = check_token(&policy, pay, "POST", None, |_| Some(text), || Some(NOW));
        assert_eq!(unscoped, Err(TokenRefusal::Unscoped));
        assert_eq!(
            check_token(&policy, pay, "POST", Some(ALICE), |_| None, || Some(NOW)),
            Err(TokenRefusal::Invalid(TokenError::Missing))
        );
        let no_clock = check_token(&policy, pay, "POST", Some(ALICE), |_| Some(text), || None);
        assert_eq!(no_clock, Err(TokenRefusal::NoClock));
        assert_eq!(TokenRefusal::NoClock.events().iter().count(), 0);
    }

    fn token_text(answer: &HttpAnswer) -> String {
        let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
        body["token"].as_str().unwrap().to_string()
    }

    #[test]
    fn a_token_is_issued_bound_to_its_client_route_and_method_and_used_once() {
        let policy = policy();
        assert!(asks_for_token(&policy, "GET", "/.idemgate/token?x=1"));
        assert!(asks_for_token(&policy, "POST", "/.idemgate/token"));
        assert!(!asks_for_token(&policy, "DELETE", "/.idemgate/token"));
        assert!(!asks_for_token(&policy, "GET", "/.idemgate/tokens"));
        let without = Policy::from_json(r#"{"routes":[{"prefix":"/"}]}"#, &|_| None).unwrap();
        assert!(!asks_for_token(&without, "GET", "/.idemgate/token"));

        let bob = Scope {
            source: "header:authorization",
            value: b"Bearer bob",
        };
        let for_pay = "/.idemgate/token?method=post&path=%2Fpay%2F1";
        let (issued, events) = issue_token(&policy, for_pay, ALICE, NOW, [9; 16]);
        assert_eq!(issued.status, 200);
        assert_eq!(events.iter().collect::<Vec<_>>(), [Event::TokenIssued]);
        let text = token_text(&issued);
        let check = |scope, method| {
            check_token(
                &policy,
                route(&policy, "/pay"),
                method,
                Some(scope),
                |_| Some(&*text),
                || Some(NOW),
            )
        };
        let bad = Err(TokenRefusal::Invalid(TokenError::BadSignature));
        assert_eq!(check(bob, "POST"), bad);
        assert_eq!(check(ALICE, "PATCH"), bad);
        let verified = check(ALICE, "POST").unwrap().unwrap();
        let mut store = MemoryStore::new();
        let mut protocol = Protocol {
            store: &mut store,
            policy: &policy,
        };
        let mut used =
            || protocol.consume(verified.use_key, verified.expires_at, Payers::NONE, NOW);
        assert_eq!(used(), Ok(ConsumeOutcome::Consumed));
        assert_eq!(used(), Ok(ConsumeOutcome::AlreadyUsed));
    }

    #[test]
    fn a_token_is_issued_only_for_a_route_that_requires_one() {
        let policy = policy();
        for path in [
            "/.idemgate/token",
            "/.idemgate/token?method=POST",
            "/.idemgate/token?path=/pay",
            "/.idemgate/token?method=POST&path=/elsewhere",
            "/.idemgate/token?method=GET&path=/pay",
            "/.idemgate/token?method=POST&path=",
        ] {
            let (answer, events) = issue_token(&policy, path, ALICE, NOW, [1; 16]);
            assert_eq!(answer.status, 400, "{path}");
            assert_eq!(events.iter().count(), 0, "{path}");
        }
    }
}
