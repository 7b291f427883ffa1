//! One-time tokens (semantics §7): the issuing endpoint and the single, atomic use on routes that
//! require one. Signing, verifying and "used once" are the core's; this module only strings them
//! together for the filter.

#[allow(unused_imports)]
use crate::prelude::*;
use idemgate_core::answer::{answer, EdgeAnswer, HttpAnswer};
use idemgate_core::guard::VerifiedToken;
use idemgate_core::policy::{Policy, TokenPolicy, TokenRequirement};
use idemgate_core::protocol::{ConsumeOutcome, Engine, ProtocolError};
use idemgate_core::scope::{token_audience, Scope};
use idemgate_core::share::Payers;
use idemgate_core::store::Store;
use idemgate_core::time::UnixMillis;
use idemgate_core::token::{issue, issued_for, IssueFor};

/// Whether `path` (query allowed) and `method` ask the issuing endpoint for a token.
pub fn is_issue_request(token: &TokenPolicy, method: &str, path: &str) -> bool {
    idemgate_core::policy::path_without_query(path) == token.issue_path
        && matches!(method, "GET" | "POST")
}

/// The answer of the issuing endpoint: a fresh token bound to the client's scope and to the route
/// and method the request names (`?method=POST&path=/payments`) — a 400 problem if they name no
/// route that requires a token.
pub fn issue_answer(
    policy: &Policy,
    token: &TokenPolicy,
    request_path: &str,
    scope: Scope<'_>,
    now: UnixMillis,
    nonce: [u8; 16],
) -> HttpAnswer {
    let asked = issued_for(request_path);
    let route = asked.as_ref().and_then(|asked| {
        policy
            .route_for(&asked.method, &asked.path)
            .filter(|route| route.token == TokenRequirement::Required)
    });
    let (Some(route), Some(IssueFor { method, .. })) = (route, asked) else {
        return answer(&EdgeAnswer::TokenRouteUnknown);
    };
    let audience = token_audience(scope, &route.prefix, &method);
    let issued = issue(&token.secret, &audience, now, token.ttl, nonce);
    answer(&EdgeAnswer::TokenIssued {
        token: &issued.text,
        expires_at_ms: issued.claims.expires_at.0,
        header: &token.header,
    })
}

/// Marks a verified token used, exactly once, charged to `payers` for as long as the use is
/// remembered (the token's expiry plus the verifiers' clock skew). What the outcome means for the
/// request is the core's ([`idemgate_core::guard::after_use`]).
pub fn consume<S: Store + ?Sized>(
    store: &mut S,
    policy: &Policy,
    token: &VerifiedToken,
    payers: Payers,
    now: UnixMillis,
) -> Result<ConsumeOutcome, ProtocolError> {
    let mut engine = Engine { store, policy };
    engine.consume(token.use_key, token.expires_at, payers, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use idemgate_core::guard::{check_token, TokenRefusal};
    use idemgate_core::store::MemoryStore;
    use idemgate_core::token::TokenError;

    fn policy() -> Policy {
        Policy::from_json(
            r#"{"token":{"secret":"0123456789abcdef0123"},"routes":[{"prefix":"/pay","token":"required"},{"prefix":"/"}]}"#,
            &|_| None,
        )
        .unwrap()
    }

    fn token_text(answer: &HttpAnswer) -> String {
        let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
        body["token"].as_str().unwrap().to_string()
    }

    #[test]
    fn issue_then_use_once() {
        let policy = policy();
        let token = policy.token.as_ref().unwrap();
        let route = policy.route_for("POST", "/pay").unwrap();
        assert!(is_issue_request(token, "GET", "/.idemgate/token?x=1"));
        assert!(!is_issue_request(token, "DELETE", "/.idemgate/token"));
        let alice = Scope {
            source: "header:authorization",
            value: b"alice",
        };
        let bob = Scope {
            source: "header:authorization",
            value: b"bob",
        };
        let now = UnixMillis(1_700_000_000_000);
        let for_pay = "/.idemgate/token?method=post&path=%2Fpay%2F1";
        let issued = issue_answer(&policy, token, for_pay, alice, now, [9; 16]);
        assert_eq!(issued.status, 200);
        let text = token_text(&issued);
        // The issued token, checked by the core as the filter checks it.
        let check = |scope, method| {
            check_token(
                &policy,
                route,
                method,
                Some(scope),
                |_| Some(&*text),
                || Some(now),
            )
        };
        let bad = Err(TokenRefusal::Invalid(TokenError::BadSignature));
        assert_eq!(check(bob, "POST"), bad);
        assert_eq!(check(alice, "PATCH"), bad);
        let verified = check(alice, "POST").unwrap().unwrap();
        let mut store = MemoryStore::new();
        assert_eq!(
            consume(&mut store, &policy, &verified, Payers::NONE, now),
            Ok(ConsumeOutcome::Consumed)
        );
        assert_eq!(
            consume(&mut store, &policy, &verified, Payers::NONE, now),
            Ok(ConsumeOutcome::AlreadyUsed)
        );
    }

    #[test]
    fn a_token_is_issued_only_for_a_route_that_requires_one() {
        let policy = policy();
        let token = policy.token.as_ref().unwrap();
        let alice = Scope {
            source: "peer",
            value: b"10.0.0.1",
        };
        let now = UnixMillis(1_700_000_000_000);
        for path in [
            "/.idemgate/token",
            "/.idemgate/token?method=POST",
            "/.idemgate/token?path=/pay",
            "/.idemgate/token?method=POST&path=/elsewhere",
            "/.idemgate/token?method=GET&path=/pay",
            "/.idemgate/token?method=POST&path=",
        ] {
            let answer = issue_answer(&policy, token, path, alice, now, [1; 16]);
            assert_eq!(answer.status, 400, "{path}");
        }
    }
}
