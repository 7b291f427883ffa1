//! Provider signatures on callback deliveries (`docs/semantics.md` §11): a webhook route can refuse
//! a delivery that its provider did not sign before it reaches the upstream, so a forged delivery
//! can neither run the handler nor take the delivery id of the real one.
//!
//! Six schemes, each a MAC or signature over some header values and the body:
//! - GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>`;
//! - Stripe: `Stripe-Signature: t=<unix seconds>,v1=<hex HMAC(secret, "<t>.<body>")>[,v1=…]`;
//! - Standard Webhooks and Svix (one format under two header prefixes, `webhook-` and `svix-`):
//!   `*-signature: v1,<base64 HMAC(key, "<id>.<timestamp>.<body>")> [v1a,<base64 Ed25519>] …`
//!   with the id and timestamp from `*-id` / `*-timestamp` (`standard_webhooks`);
//! - Shopify: `X-Shopify-Hmac-Sha256: <base64 HMAC(secret, body)>`;
//! - Slack: `X-Slack-Signature: v0=<hex HMAC(secret, "v0:<X-Slack-Request-Timestamp>:<body>")>`.
//!
//! The timestamped schemes (Stripe, Standard Webhooks, Svix, Slack) refuse a timestamp further than
//! the tolerance ahead of now at once. One further than the tolerance behind now is checked like any
//! other and, if its signature matches, reported `Freshness::Late`: a provider's redelivery of a
//! message with its original signature, which may only be answered by the acknowledgement the edge
//! already holds for it ([`crate::guard`]), never run. A rule holds one or
//! more secrets so a secret can be rotated without refusing deliveries: a delivery verifies when
//! any secret matches any signature it carries.
//!
//! The MACs and Ed25519 hashes are computed as the body streams past (`SignatureCheck::update`);
//! nothing of the body is kept. MAC comparison is constant-time (the `hmac` crate's
//! `verify_slice`); Ed25519 verifies public data and needs no secrecy.

mod error;
mod formats;
pub(crate) mod standard_webhooks;

pub(crate) use error::SignatureError;
pub(crate) use standard_webhooks::HeaderNames;

use crate::time::{Span, UnixMillis};
use alloc::vec::Vec;
use core::fmt;
use ed25519_dalek::{Signature, StreamVerifier, VerifyingKey};
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Shortest secret accepted: providers issue far longer ones; a short one is a typo.
pub(crate) const MIN_SECRET_LEN: usize = 8;
/// The tolerance Stripe, Standard Webhooks, Svix and Slack each document as their default.
pub const DEFAULT_TOLERANCE: Span = Span(300_000);
/// Most signatures a delivery may carry: each Ed25519 one is a hash of the whole body per public
/// key, so an unbounded list would let one forged delivery cost the edge many passes over its body.
/// Providers send one, or two while a secret rotates.
pub(crate) const MAX_SIGNATURES: usize = 8;

/// Which provider's signature format a route checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureScheme {
    /// `X-Hub-Signature-256: sha256=<hex>`.
    GitHub,
    /// `Stripe-Signature: t=…,v1=…`; the timestamp must be within `tolerance` of now.
    Stripe { tolerance: Span },
    /// Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature`; the timestamp
    /// must be within `tolerance` of now. Secrets are `whsec_<base64>` or `whpk_<base64>`.
    StandardWebhooks { tolerance: Span },
    /// Svix: Standard Webhooks under `svix-id`, `svix-timestamp`, `svix-signature`.
    Svix { tolerance: Span },
    /// `X-Shopify-Hmac-Sha256: <base64>` over the body alone.
    Shopify,
    /// `X-Slack-Signature: v0=<hex>` with `X-Slack-Request-Timestamp` within `tolerance` of now.
    Slack { tolerance: Span },
}

impl SignatureScheme {
    /// The request header that carries the signature itself (lowercase).
    pub fn header(&self) -> &'static str {
        match self.headers() {
            [first, ..] => first,
            [] => "",
        }
    }

    /// Every request header the scheme reads (lowercase), the signature header first: what a
    /// delivery must carry, and what a host must pass to `SignatureRule::start`.
    pub fn headers(&self) -> &'static [&'static str] {
        match self {
            SignatureScheme::GitHub => &[formats::GITHUB],
            SignatureScheme::Stripe { .. } => &[formats::STRIPE],
            SignatureScheme::StandardWebhooks { .. } => HeaderNames::STANDARD.all(),
            SignatureScheme::Svix { .. } => HeaderNames::SVIX.all(),
            SignatureScheme::Shopify => &[formats::SHOPIFY],
            SignatureScheme::Slack { .. } => &[formats::SLACK, formats::SLACK_TIMESTAMP],
        }
    }

    /// How far a signed timestamp may be from now; `None` for schemes that sign no timestamp.
    pub(crate) fn tolerance(&self) -> Option<Span> {
        match *self {
            SignatureScheme::GitHub | SignatureScheme::Shopify => None,
            SignatureScheme::Stripe { tolerance }
            | SignatureScheme::StandardWebhooks { tolerance }
            | SignatureScheme::Svix { tolerance }
            | SignatureScheme::Slack { tolerance } => Some(tolerance),
        }
    }
}

/// One configured secret, ready to use.
#[derive(Clone)]
enum Key {
    /// The HMAC-SHA256 keyed once at configuration; cloned per delivery.
    Hmac(HmacSha256),
    /// A Standard Webhooks `whpk_` public key (`v1a` signatures).
    Ed25519(VerifyingKey),
}

/// A route's signature rule: scheme and its keys (no secret is ever printed).
#[derive(Clone)]
pub struct SignatureRule {
    pub(crate) scheme: SignatureScheme,
    keys: Vec<Key>,
}

impl fmt::Debug for SignatureRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignatureRule")
            .field("scheme", &self.scheme)
            .field("secrets", &format_args!("<{} redacted>", self.keys.len()))
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
    /// A rule from one or more secrets (several while one is rotated out). GitHub, Stripe, Shopify
    /// and Slack use each secret's bytes as given; Standard Webhooks and Svix read
    /// `[whsec_]<base64>` as an HMAC key and `whpk_<base64>` as an Ed25519 public key.
    pub fn new(
        scheme: SignatureScheme,
        secrets: &[&[u8]],
    ) -> Result<SignatureRule, SignatureError> {
        if secrets.is_empty() {
            return Err(SignatureError::NoSecret);
        }
        let keys = secrets
            .iter()
            .enumerate()
            .map(|(index, secret)| match scheme {
                SignatureScheme::StandardWebhooks { .. } | SignatureScheme::Svix { .. } => {
                    standard_webhooks::key(index, secret)
                }
                _ => hmac_key(index, secret),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SignatureRule { scheme, keys })
    }

    /// Starts checking a delivery from its headers (`header` gives every value of a lowercase
    /// name): refuses a missing or malformed signature, or one dated further than the tolerance
    /// ahead of now, at once, before any body arrives. Checked in this order: each header present
    /// once (in [`SignatureScheme::headers`] order), their format, at least one and at most
    /// [`MAX_SIGNATURES`] signatures, the timestamp. One dated further than the tolerance behind
    /// now is checked as usual and verifies as [`Freshness::Late`].
    pub(crate) fn start<'h>(
        &self,
        header: &dyn Fn(&str) -> Vec<&'h [u8]>,
        now: UnixMillis,
    ) -> Result<SignatureCheck, SignatureError> {
        let claim = match self.scheme {
            SignatureScheme::GitHub => formats::github(header)?,
            SignatureScheme::Stripe { .. } => formats::stripe(header)?,
            SignatureScheme::Shopify => formats::shopify(header)?,
            SignatureScheme::Slack { .. } => formats::slack(header)?,
            SignatureScheme::StandardWebhooks { .. } => {
                standard_webhooks::claim(&HeaderNames::STANDARD, header)?
            }
            SignatureScheme::Svix { .. } => standard_webhooks::claim(&HeaderNames::SVIX, header)?,
        };
        let count = claim.macs.len() + claim.ed25519.len();
        if count == 0 || count > MAX_SIGNATURES {
            return Err(SignatureError::Malformed);
        }
        let mut freshness = Freshness::Fresh;
        if let (Some(seconds), Some(tolerance)) = (claim.signed_at, self.scheme.tolerance()) {
            let now_s = now.0 / 1000;
            if now_s.abs_diff(seconds).saturating_mul(1000) > tolerance.as_millis() {
                // Dated ahead: no provider redelivers a message it has not sent yet.
                if seconds > now_s {
                    return Err(SignatureError::Stale);
                }
                freshness = Freshness::Late;
            }
        }
        let mut check = SignatureCheck {
            macs: Vec::new(),
            expected: claim.macs,
            ed25519: Vec::new(),
            freshness,
        };
        for key in &self.keys {
            match key {
                Key::Hmac(keyed) => check.macs.push(keyed.clone()),
                // A signature that cannot be valid (a non-canonical scalar) matches no key: it is
                // left out, as a MAC that matches nothing would be.
                Key::Ed25519(public) => check.ed25519.extend(
                    claim
                        .ed25519
                        .iter()
                        .filter_map(|signature| public.verify_stream(signature).ok()),
                ),
            }
        }
        check.update(&claim.prefix);
        Ok(check)
    }
}

fn hmac_key(index: usize, secret: &[u8]) -> Result<Key, SignatureError> {
    let too_short = SignatureError::SecretTooShort {
        index,
        len: secret.len(),
    };
    if secret.len() < MIN_SECRET_LEN {
        return Err(too_short);
    }
    HmacSha256::new_from_slice(secret)
        .map(Key::Hmac)
        .map_err(|_| too_short)
}

/// What a delivery's headers claim: the bytes signed before the body, the signatures, and the
/// signed timestamp (unix seconds) if the scheme has one.
#[derive(Default)]
struct Claim {
    prefix: Vec<u8>,
    macs: Vec<[u8; 32]>,
    ed25519: Vec<Signature>,
    signed_at: Option<u64>,
}

/// The one value of a header the scheme needs: absent → `Missing`, repeated → `Malformed` (two
/// values would leave it open which one was signed).
fn one<'h>(
    header: &dyn Fn(&str) -> Vec<&'h [u8]>,
    name: &'static str,
) -> Result<&'h [u8], SignatureError> {
    match header(name).as_slice() {
        [] => Err(SignatureError::Missing { header: name }),
        [value] => Ok(value),
        _ => Err(SignatureError::Malformed),
    }
}

/// Unix seconds as the providers write them: ASCII digits only (no sign, no space), fitting a u64.
fn seconds(text: &[u8]) -> Result<u64, SignatureError> {
    if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
        return Err(SignatureError::Malformed);
    }
    core::str::from_utf8(text)
        .ok()
        .and_then(|digits| digits.parse().ok())
        .ok_or(SignatureError::Malformed)
}

/// Whether a delivery whose signature matches was signed within the tolerance of now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// Within the tolerance (or a scheme that signs no timestamp): a delivery like any other.
    Fresh,
    /// Signed further than the tolerance behind now: the provider (or a relay) redelivers a
    /// message it sent before, with its original signature. Only the acknowledgement already
    /// stored for that message may answer it; anything else refuses it as
    /// `SignatureError::Stale`.
    Late,
}

/// A signature check in progress: feed the body, then [`SignatureCheck::verify`].
pub(crate) struct SignatureCheck {
    /// One running MAC per HMAC key, each already fed the signed prefix.
    macs: Vec<HmacSha256>,
    /// The MACs the delivery carries; any key may match any of them.
    expected: Vec<[u8; 32]>,
    /// One running verifier per (public key, `v1a` signature) pair.
    ed25519: Vec<StreamVerifier>,
    /// Said only once a signature matched: a forged late delivery is a mismatch.
    freshness: Freshness,
}

impl fmt::Debug for SignatureCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SignatureCheck")
    }
}

impl SignatureCheck {
    pub fn update(&mut self, chunk: &[u8]) {
        for mac in &mut self.macs {
            mac.update(chunk);
        }
        for verifier in &mut self.ed25519 {
            verifier.update(chunk);
        }
    }

    /// The whole body was fed: does one of the signatures match under one of the keys? If so,
    /// whether it was signed within the tolerance.
    pub(crate) fn verify(self) -> Result<Freshness, SignatureError> {
        let SignatureCheck {
            macs,
            expected,
            ed25519,
            freshness,
        } = self;
        let mac_matches = macs.iter().any(|mac| {
            expected
                .iter()
                .any(|tag| mac.clone().verify_slice(tag).is_ok())
        });
        if mac_matches
            || ed25519
                .into_iter()
                .any(|verifier| verifier.finalize_and_verify().is_ok())
        {
            Ok(freshness)
        } else {
            Err(SignatureError::Mismatch)
        }
    }
}

#[cfg(test)]
mod tests;
