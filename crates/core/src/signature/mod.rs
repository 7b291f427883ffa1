//! Provider signatures on callback deliveries (semantics §11): a webhook route can refuse a delivery
//! that its provider did not sign before it reaches the upstream, so a forged delivery can neither
//! run the handler nor take the delivery id of the real one.
//!
//! Two schemes, both HMAC-SHA-256 over the body with a secret shared with the provider:
//! - GitHub: `X-Hub-Signature-256: sha256=<hex HMAC(secret, body)>`;
//! - Stripe: `Stripe-Signature: t=<unix seconds>,v1=<hex HMAC(secret, "<t>.<body>")>[,v1=…]`, with
//!   the timestamp within a tolerance of now (a replayed old delivery is refused).
//!
//! The MAC is computed as the body streams past ([`SignatureCheck::update`]); nothing of the body is
//! kept. Comparison is constant-time (the `hmac` crate's `verify_slice`).

use crate::hash::hex_digit;
use crate::time::{Span, UnixMillis};
use alloc::vec::Vec;
use core::fmt;
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Shortest secret accepted: both providers issue far longer ones; a short one is a typo.
pub const MIN_SECRET_LEN: usize = 8;
/// Stripe's own default tolerance.
pub const DEFAULT_TOLERANCE: Span = Span(300_000);

/// Which provider's signature format a route checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureScheme {
    /// `X-Hub-Signature-256: sha256=<hex>`.
    GitHub,
    /// `Stripe-Signature: t=…,v1=…`; the timestamp must be within `tolerance` of now.
    Stripe { tolerance: Span },
}

impl SignatureScheme {
    /// The request header that carries the signature (lowercase).
    pub fn header(&self) -> &'static str {
        match self {
            SignatureScheme::GitHub => "x-hub-signature-256",
            SignatureScheme::Stripe { .. } => "stripe-signature",
        }
    }
}

/// A route's signature rule: scheme and the keyed HMAC (the secret itself is never printed).
#[derive(Clone)]
pub struct SignatureRule {
    pub scheme: SignatureScheme,
    keyed: HmacSha256,
}

impl fmt::Debug for SignatureRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignatureRule")
            .field("scheme", &self.scheme)
            .field("secret", &"<redacted>")
            .finish()
    }
}

impl PartialEq for SignatureRule {
    /// Rules compare by scheme only: secrets are not comparable (and need not be).
    fn eq(&self, other: &Self) -> bool {
        self.scheme == other.scheme
    }
}

impl Eq for SignatureRule {}

impl SignatureRule {
    pub fn new(scheme: SignatureScheme, secret: &[u8]) -> Result<SignatureRule, SignatureError> {
        if secret.len() < MIN_SECRET_LEN {
            return Err(SignatureError::SecretTooShort { len: secret.len() });
        }
        HmacSha256::new_from_slice(secret)
            .map(|keyed| SignatureRule { scheme, keyed })
            .map_err(|_| SignatureError::SecretTooShort { len: secret.len() })
    }

    /// Starts checking a delivery from its signature header values (every occurrence): refuses a
    /// missing, malformed or (Stripe) stale signature at once, before any body arrives.
    pub fn start(
        &self,
        values: &[&[u8]],
        now: UnixMillis,
    ) -> Result<SignatureCheck, SignatureError> {
        let [value] = values else {
            return Err(if values.is_empty() {
                SignatureError::Missing {
                    header: self.scheme.header(),
                }
            } else {
                SignatureError::Malformed
            });
        };
        let text = core::str::from_utf8(value).map_err(|_| SignatureError::Malformed)?;
        let mut mac = self.keyed.clone();
        let mut expected = Vec::new();
        match self.scheme {
            SignatureScheme::GitHub => {
                let hex = text
                    .trim()
                    .strip_prefix("sha256=")
                    .ok_or(SignatureError::Malformed)?;
                expected.push(decode_hex32(hex).ok_or(SignatureError::Malformed)?);
            }
            SignatureScheme::Stripe { tolerance } => {
                let mut timestamp: Option<&str> = None;
                for item in text.split(',') {
                    let (name, value) = item
                        .trim()
                        .split_once('=')
                        .ok_or(SignatureError::Malformed)?;
                    match name {
                        "t" => timestamp = Some(value),
                        // Several v1 entries appear while the provider rolls a secret.
                        "v1" => {
                            expected.push(decode_hex32(value).ok_or(SignatureError::Malformed)?)
                        }
                        _ => {}
                    }
                }
                let t = timestamp.ok_or(SignatureError::Malformed)?;
                let seconds: u64 = match t.bytes().all(|b| b.is_ascii_digit()) {
                    true => t.parse().map_err(|_| SignatureError::Malformed)?,
                    false => return Err(SignatureError::Malformed),
                };
                let now_s = now.0 / 1000;
                if now_s.abs_diff(seconds).saturating_mul(1000) > tolerance.as_millis() {
                    return Err(SignatureError::Stale);
                }
                mac.update(t.as_bytes());
                mac.update(b".");
            }
        }
        if expected.is_empty() {
            return Err(SignatureError::Malformed);
        }
        Ok(SignatureCheck { mac, expected })
    }
}

/// A signature check in progress: feed the body, then [`SignatureCheck::verify`].
#[derive(Clone)]
pub struct SignatureCheck {
    mac: HmacSha256,
    expected: Vec<[u8; 32]>,
}

impl fmt::Debug for SignatureCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SignatureCheck")
    }
}

impl SignatureCheck {
    pub fn update(&mut self, chunk: &[u8]) {
        self.mac.update(chunk);
    }

    /// The whole body was fed: does one of the given signatures match?
    pub fn verify(self) -> Result<(), SignatureError> {
        let SignatureCheck { mac, expected } = self;
        if expected
            .iter()
            .any(|tag| mac.clone().verify_slice(tag).is_ok())
        {
            Ok(())
        } else {
            Err(SignatureError::Mismatch)
        }
    }
}

fn decode_hex32(text: &str) -> Option<[u8; 32]> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (slot, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        let hi = hex_digit(*pair.first()?)?;
        let lo = hex_digit(*pair.get(1)?)?;
        *slot = (hi << 4) | lo;
    }
    Some(out)
}

/// Why a delivery's signature was refused (each is one problem `type` at the edge).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignatureError {
    /// The route requires a signature and the delivery carries none.
    Missing { header: &'static str },
    /// The header is not in the scheme's format (or given twice).
    Malformed,
    /// No signature matches the body under the configured secret.
    Mismatch,
    /// The signed timestamp is outside the tolerance (Stripe): an old delivery replayed.
    Stale,
    /// Configuration: the secret is shorter than [`MIN_SECRET_LEN`].
    SecretTooShort { len: usize },
}

impl SignatureError {
    pub fn code(&self) -> &'static str {
        match self {
            SignatureError::Missing { .. } => "signature_missing",
            SignatureError::Malformed => "signature_malformed",
            SignatureError::Mismatch => "signature_mismatch",
            SignatureError::Stale => "signature_stale",
            SignatureError::SecretTooShort { .. } => "signature_secret_too_short",
        }
    }
}

impl fmt::Display for SignatureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignatureError::Missing { header } => {
                write!(
                    f,
                    "this endpoint accepts only signed deliveries; the {header} header is missing"
                )
            }
            SignatureError::Malformed => {
                f.write_str("the delivery's signature header is not in the provider's format")
            }
            SignatureError::Mismatch => {
                f.write_str("the delivery's signature does not match its body")
            }
            SignatureError::Stale => {
                f.write_str("the delivery's signed timestamp is outside the accepted tolerance")
            }
            SignatureError::SecretTooShort { len } => write!(
                f,
                "the signing secret has {len} bytes; at least {MIN_SECRET_LEN} are required"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::to_hex;

    const SECRET: &[u8] = b"whsec_test_secret";

    fn hmac_hex(parts: &[&[u8]]) -> alloc::string::String {
        let mut mac = HmacSha256::new_from_slice(SECRET).unwrap();
        for p in parts {
            mac.update(p);
        }
        to_hex(&mac.finalize().into_bytes())
    }

    fn check(
        rule: &SignatureRule,
        header: &str,
        body: &[u8],
        now: u64,
    ) -> Result<(), &'static str> {
        let mut check = rule
            .start(&[header.as_bytes()], UnixMillis(now))
            .map_err(|e| e.code())?;
        // Fed in pieces: the MAC streams.
        for piece in body.chunks(3) {
            check.update(piece);
        }
        check.verify().map_err(|e| e.code())
    }

    #[test]
    fn github_signature() {
        let rule = SignatureRule::new(SignatureScheme::GitHub, SECRET).unwrap();
        let body = br#"{"action":"opened"}"#;
        let good = alloc::format!("sha256={}", hmac_hex(&[body]));
        assert_eq!(check(&rule, &good, body, 0), Ok(()));
        assert_eq!(
            check(&rule, &good, b"{\"action\":\"closed\"}", 0),
            Err("signature_mismatch")
        );
        assert_eq!(
            check(&rule, "sha1=abc", body, 0),
            Err("signature_malformed")
        );
        assert_eq!(
            check(&rule, "sha256=zz", body, 0),
            Err("signature_malformed")
        );
        assert_eq!(
            rule.start(&[], UnixMillis(0))
                .map(|_| ())
                .map_err(|e| e.code()),
            Err("signature_missing")
        );
        let other = SignatureRule::new(SignatureScheme::GitHub, b"another secret").unwrap();
        assert_eq!(check(&other, &good, body, 0), Err("signature_mismatch"));
    }

    #[test]
    fn stripe_signature_and_tolerance() {
        let rule = SignatureRule::new(
            SignatureScheme::Stripe {
                tolerance: DEFAULT_TOLERANCE,
            },
            SECRET,
        )
        .unwrap();
        let body = br#"{"id":"evt_1"}"#;
        let t = "1700000000";
        let good = alloc::format!("t={t},v1={}", hmac_hex(&[t.as_bytes(), b".", body]));
        let now = 1_700_000_000_000;
        assert_eq!(check(&rule, &good, body, now), Ok(()));
        // A rolled secret: any v1 may match; v0 and unknown entries are ignored.
        let rolled = alloc::format!(
            "t={t},v1={},v1={},v0=00",
            "0".repeat(64),
            hmac_hex(&[t.as_bytes(), b".", body])
        );
        assert_eq!(check(&rule, &rolled, body, now), Ok(()));
        assert_eq!(
            check(&rule, &good, br#"{"id":"evt_2"}"#, now),
            Err("signature_mismatch")
        );
        assert_eq!(
            check(&rule, &good, body, now + 301_000),
            Err("signature_stale")
        );
        assert_eq!(
            check(&rule, &good, body, now - 301_000),
            Err("signature_stale")
        );
        assert_eq!(check(&rule, &good, body, now + 299_000), Ok(()));
        // The timestamp is signed: moving it breaks the signature.
        let moved = good.replace("t=1700000000", "t=1700000001");
        assert_eq!(check(&rule, &moved, body, now), Err("signature_mismatch"));
        assert_eq!(check(&rule, "v1=00", body, now), Err("signature_malformed"));
        assert_eq!(
            check(&rule, &alloc::format!("t={t}"), body, now),
            Err("signature_malformed")
        );
        assert_eq!(
            check(&rule, "t=-1,v1=00", body, now),
            Err("signature_malformed")
        );
    }

    #[test]
    fn short_secrets_are_refused() {
        assert_eq!(
            SignatureRule::new(SignatureScheme::GitHub, b"short").map(|_| ()),
            Err(SignatureError::SecretTooShort { len: 5 })
        );
    }
}
