//! One-time tokens (semantics §7): the issuing endpoint and the single, atomic use on routes that
//! require one. Signing, verifying and "used once" are the core's; this module only strings them
//! together for the filter.

use idemgate_core::answer::{answer, EdgeAnswer, HttpAnswer};
use idemgate_core::policy::{Policy, TokenPolicy};
use idemgate_core::protocol::{ConsumeOutcome, Engine, ProtocolError};
use idemgate_core::scope::{scope_hash, Scope, StorageKey};
use idemgate_core::store::Store;
use idemgate_core::time::UnixMillis;
use idemgate_core::token::{issue, verify, TokenError};

/// Whether `path` (query allowed) and `method` ask the issuing endpoint for a token.
pub fn is_issue_request(token: &TokenPolicy, method: &str, path: &str) -> bool {
    idemgate_core::policy::path_without_query(path) == token.issue_path
        && matches!(method, "GET" | "POST")
}

/// The answer of the issuing endpoint: a fresh token bound to the client's scope.
pub fn issue_answer(
    token: &TokenPolicy,
    scope: Scope<'_>,
    now: UnixMillis,
    nonce: [u8; 16],
) -> HttpAnswer {
    let issued = issue(&token.secret, &scope_hash(scope), now, token.ttl, nonce);
    answer(&EdgeAnswer::TokenIssued {
        token: &issued.text,
        expires_at_ms: issued.claims.expires_at.0,
        header: &token.header,
    })
}

/// How a token check ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenCheck {
    /// Valid and now used: forward.
    Consumed,
    /// Missing, forged, expired, for another client, or used before.
    Rejected(TokenError),
    /// No room to remember the use: the configured failure mode applies.
    StoreFull,
    StoreFailed(ProtocolError),
}

/// Verifies `text` against the client's scope and marks it used, exactly once.
pub fn consume<S: Store + ?Sized>(
    store: &mut S,
    policy: &Policy,
    token: &TokenPolicy,
    text: Option<&str>,
    scope: Scope<'_>,
    now: UnixMillis,
) -> TokenCheck {
    let Some(text) = text else {
        return TokenCheck::Rejected(TokenError::Missing);
    };
    let claims = match verify(&token.secret, text.trim(), &scope_hash(scope), now) {
        Ok(claims) => claims,
        Err(e) => return TokenCheck::Rejected(e),
    };
    let mut engine = Engine { store, policy };
    match engine.consume(StorageKey(claims.consumption_key()), claims.expires_at, now) {
        Ok(ConsumeOutcome::Consumed) => TokenCheck::Consumed,
        Ok(ConsumeOutcome::AlreadyUsed) => TokenCheck::Rejected(TokenError::AlreadyUsed),
        Ok(ConsumeOutcome::StoreFull) => TokenCheck::StoreFull,
        Err(e) => TokenCheck::StoreFailed(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use idemgate_core::store::MemoryStore;

    fn policy() -> Policy {
        Policy::from_json(
            r#"{"token":{"secret":"0123456789abcdef0123"},"routes":[{"prefix":"/pay","token":"required"}]}"#,
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
        let issued = issue_answer(token, alice, now, [9; 16]);
        assert_eq!(issued.status, 200);
        let text = token_text(&issued);
        let mut store = MemoryStore::new();
        assert_eq!(
            consume(&mut store, &policy, token, Some(&text), bob, now),
            TokenCheck::Rejected(TokenError::BadSignature)
        );
        assert_eq!(
            consume(&mut store, &policy, token, Some(&text), alice, now),
            TokenCheck::Consumed
        );
        assert_eq!(
            consume(&mut store, &policy, token, Some(&text), alice, now),
            TokenCheck::Rejected(TokenError::AlreadyUsed)
        );
        assert_eq!(
            consume(&mut store, &policy, token, None, alice, now),
            TokenCheck::Rejected(TokenError::Missing)
        );
    }
}
