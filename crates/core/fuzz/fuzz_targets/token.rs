//! One-time tokens. First byte even: verify the rest as token text with the secret, scope and
//! clock of `vectors/token.json`'s verify cases. Odd: issue a token from arbitrary issue time, TTL
//! and nonce, then verify it (as issued, at another time, in another scope, with another secret,
//! and with one character changed).
//!
//! Checks: never panics; a token that verifies is the one `issue` would spell for its claims (so
//! no second spelling exists), is unexpired and not issued too far ahead; the outcome of verifying
//! an issued token is exactly the one the rules give; another scope, another secret or any
//! one-character change never verifies.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use idemgate_core::client::token::{issue, verify, TokenError, TokenSecret, CLOCK_SKEW};
use idemgate_core::time::{Span, UnixMillis};
use libfuzzer_sys::fuzz_target;

const SECRET: [u8; 32] = [
    0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f,
    0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x3b, 0x3c, 0x3d, 0x3e, 0x3f,
];
const SCOPE: [u8; 32] = [
    0x49, 0x0b, 0xb5, 0xaf, 0xf6, 0xb1, 0xb5, 0x18, 0xdc, 0x9d, 0x88, 0x40, 0xcb, 0x43, 0x0b, 0x0e,
    0x4c, 0x80, 0x33, 0xca, 0x0a, 0xaa, 0x4e, 0xc3, 0x4c, 0x6e, 0xe4, 0x3b, 0xf1, 0xc1, 0x48, 0x36,
];
const NOW: UnixMillis = UnixMillis(1_700_000_000_000);
const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

#[derive(Arbitrary, Debug)]
struct RoundTrip {
    issued_at: u64,
    ttl: u64,
    nonce: [u8; 16],
    /// Verify at `issued_at` plus this (wrapping).
    later: u64,
    other_scope: [u8; 32],
    /// Which character to change, and to what.
    position: u16,
    replacement: u8,
}

/// The rules of `verify` for a token with a good signature.
fn expected(
    issued_at: UnixMillis,
    expires_at: UnixMillis,
    now: UnixMillis,
) -> Result<(), TokenError> {
    if now >= expires_at {
        Err(TokenError::Expired)
    } else if issued_at > now.after(CLOCK_SKEW) {
        Err(TokenError::NotYetValid)
    } else {
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let secret = TokenSecret::new(&SECRET).unwrap();
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        let Ok(text) = std::str::from_utf8(rest) else {
            return;
        };
        match verify(&secret, text, &SCOPE, NOW) {
            Ok(claims) => {
                let ttl = Span(claims.expires_at.0 - claims.issued_at.0.min(claims.expires_at.0));
                if claims.issued_at <= claims.expires_at {
                    let again = issue(&secret, &SCOPE, claims.issued_at, ttl, claims.nonce);
                    assert_eq!(again.text, text, "a second spelling of a token verified");
                }
                assert!(NOW < claims.expires_at && claims.issued_at <= NOW.after(CLOCK_SKEW));
                let other = TokenSecret::new(b"another secret of 32 bytes......").unwrap();
                assert_eq!(
                    verify(&other, text, &SCOPE, NOW),
                    Err(TokenError::BadSignature)
                );
            }
            Err(e) => assert!(
                matches!(
                    e,
                    TokenError::Malformed
                        | TokenError::BadSignature
                        | TokenError::Expired
                        | TokenError::NotYetValid
                ),
                "verify returned {e:?}"
            ),
        }
        return;
    }

    let Ok(rt) = RoundTrip::arbitrary(&mut Unstructured::new(rest)) else {
        return;
    };
    let issued_at = UnixMillis(rt.issued_at);
    let token = issue(&secret, &SCOPE, issued_at, Span(rt.ttl), rt.nonce);
    assert_eq!(token.text.len(), 3 + 43 + 1 + 43);
    assert!(token.text.starts_with("v1.") && token.text.is_ascii());
    assert_eq!(token.claims.issued_at, issued_at);
    assert_eq!(token.claims.expires_at, issued_at.after(Span(rt.ttl)));
    assert_eq!(token.claims.nonce, rt.nonce);

    for now in [
        issued_at,
        UnixMillis(rt.issued_at.wrapping_add(rt.later)),
        NOW,
    ] {
        let got = verify(&secret, &token.text, &SCOPE, now);
        let want = expected(token.claims.issued_at, token.claims.expires_at, now);
        assert_eq!(got.map(|_| ()), want, "at {now:?}");
        if got_is_ok(&secret, &token.text, now) {
            assert_eq!(verify(&secret, &token.text, &SCOPE, now), Ok(token.claims));
        }
        if rt.other_scope != SCOPE {
            assert_eq!(
                verify(&secret, &token.text, &rt.other_scope, now),
                Err(TokenError::BadSignature)
            );
        }
    }

    // Any one-character change is refused (malformed or bad signature, never accepted).
    let mut bytes = token.text.clone().into_bytes();
    let pos = usize::from(rt.position) % bytes.len();
    let replacement = if rt.replacement & 0x80 == 0 {
        B64[usize::from(rt.replacement) % 64]
    } else {
        rt.replacement & 0x7f
    };
    if bytes[pos] != replacement {
        bytes[pos] = replacement;
        let tampered = String::from_utf8(bytes).unwrap();
        let got = verify(&secret, &tampered, &SCOPE, issued_at);
        assert!(
            matches!(got, Err(TokenError::Malformed | TokenError::BadSignature)),
            "tampered token: {got:?}"
        );
    }
});

fn got_is_ok(secret: &TokenSecret, text: &str, now: UnixMillis) -> bool {
    verify(secret, text, &SCOPE, now).is_ok()
}
