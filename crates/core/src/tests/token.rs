//! Token behaviour through the public API: binding, tampering, time rules, malformed shapes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::client::token::{issue, verify, TokenError, TokenSecret, CLOCK_SKEW};
use crate::time::{Span, UnixMillis};
use std::prelude::rust_2021::String;

const SCOPE: [u8; 32] = [7u8; 32];
const NONCE: [u8; 16] = [0xab; 16];
const NOW: UnixMillis = UnixMillis(1_700_000_000_000);

fn secret() -> TokenSecret {
    TokenSecret::new(b"0123456789abcdef").unwrap()
}

#[test]
fn scope_and_secret_are_bound_by_the_mac() {
    let text = issue(&secret(), &SCOPE, NOW, Span(1000), NONCE).text;
    let other_scope = [8u8; 32];
    assert_eq!(
        verify(&secret(), &text, &other_scope, NOW),
        Err(TokenError::BadSignature)
    );
    let other = TokenSecret::new(b"0123456789abcdeF").unwrap();
    assert_eq!(
        verify(&other, &text, &SCOPE, NOW),
        Err(TokenError::BadSignature)
    );
}

#[test]
fn every_tampered_character_is_caught() {
    let text = issue(&secret(), &SCOPE, NOW, Span(1000), NONCE).text;
    for i in 0..text.len() {
        let mut bytes = text.clone().into_bytes();
        bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(bytes).unwrap();
        let err = verify(&secret(), &tampered, &SCOPE, NOW).unwrap_err();
        assert!(
            matches!(err, TokenError::Malformed | TokenError::BadSignature),
            "position {i}: {err:?}"
        );
    }
}

#[test]
fn time_rules() {
    let s = secret();
    let text = issue(&s, &SCOPE, NOW, Span(1000), NONCE).text;
    assert!(verify(&s, &text, &SCOPE, UnixMillis(NOW.0 + 999)).is_ok());
    assert_eq!(
        verify(&s, &text, &SCOPE, UnixMillis(NOW.0 + 1000)),
        Err(TokenError::Expired)
    );
    let early = UnixMillis(NOW.0 - CLOCK_SKEW.0);
    assert!(verify(&s, &text, &SCOPE, early).is_ok());
    let too_early = UnixMillis(early.0 - 1);
    assert_eq!(
        verify(&s, &text, &SCOPE, too_early),
        Err(TokenError::NotYetValid)
    );
    let zero_ttl = issue(&s, &SCOPE, NOW, Span(0), NONCE).text;
    assert_eq!(verify(&s, &zero_ttl, &SCOPE, NOW), Err(TokenError::Expired));
}

#[test]
fn malformed_shapes() {
    let text = issue(&secret(), &SCOPE, NOW, Span(1000), NONCE).text;
    let cases = [
        String::new(),
        String::from("v1."),
        text.replacen("v1.", "v2.", 1),
        format!("{text}."),
        format!("{text}A"),
        String::from(&text[..text.len() - 1]),
        text.replacen('.', "=", 2),
        format!(" {text}"),
    ];
    for case in cases {
        assert_eq!(
            verify(&secret(), &case, &SCOPE, NOW),
            Err(TokenError::Malformed),
            "{case}"
        );
    }
}

#[test]
fn error_codes_are_stable() {
    assert_eq!(TokenError::AlreadyUsed.code(), "token_used");
    assert_eq!(TokenError::Missing.code(), "token_missing");
    assert_eq!(TokenError::NotYetValid.code(), "token_not_yet_valid");
}
