//! The single-header formats (GitHub, Stripe, Shopify) and Slack's: what each delivery's headers
//! claim. Standard Webhooks and Svix are in `standard_webhooks`.

use super::{one, seconds, Claim, SignatureError};
use crate::base64;
use crate::hash::hex_digit;
use alloc::vec::Vec;

pub(crate) const GITHUB: &str = "x-hub-signature-256";
pub(crate) const STRIPE: &str = "stripe-signature";
pub(crate) const SHOPIFY: &str = "x-shopify-hmac-sha256";
pub(crate) const SLACK: &str = "x-slack-signature";
pub(crate) const SLACK_TIMESTAMP: &str = "x-slack-request-timestamp";

type Headers<'a, 'h> = &'a dyn Fn(&str) -> Vec<&'h [u8]>;

/// `sha256=<64 hex>` over the body alone.
pub(crate) fn github(header: Headers<'_, '_>) -> Result<Claim, SignatureError> {
    let hex = one(header, GITHUB)?
        .trim_ascii()
        .strip_prefix(b"sha256=")
        .ok_or(SignatureError::Malformed)?;
    Ok(Claim {
        macs: alloc::vec![decode_hex32(hex).ok_or(SignatureError::Malformed)?],
        ..Claim::default()
    })
}

/// `t=<seconds>,v1=<64 hex>[,v1=…]`, other entries (`v0=`) ignored; signs `"<t>.<body>"`.
pub(crate) fn stripe(header: Headers<'_, '_>) -> Result<Claim, SignatureError> {
    let mut claim = Claim::default();
    let mut timestamp: Option<&[u8]> = None;
    for item in one(header, STRIPE)?.split(|&b| b == b',') {
        let item = item.trim_ascii();
        let at = item
            .iter()
            .position(|&b| b == b'=')
            .ok_or(SignatureError::Malformed)?;
        let (name, value) = (
            item.get(..at).unwrap_or_default(),
            item.get(at + 1..).unwrap_or_default(),
        );
        match name {
            b"t" => timestamp = Some(value),
            // Several v1 entries appear while the provider rolls a secret.
            b"v1" => claim
                .macs
                .push(decode_hex32(value).ok_or(SignatureError::Malformed)?),
            _ => {}
        }
    }
    let t = timestamp.ok_or(SignatureError::Malformed)?;
    claim.signed_at = Some(seconds(t)?);
    claim.prefix = [t, b"."].concat();
    Ok(claim)
}

/// `<base64 of 32 bytes>` over the body alone.
pub(crate) fn shopify(header: Headers<'_, '_>) -> Result<Claim, SignatureError> {
    let tag = base64::decode_array(one(header, SHOPIFY)?.trim_ascii())
        .ok_or(SignatureError::Malformed)?;
    Ok(Claim {
        macs: alloc::vec![tag],
        ..Claim::default()
    })
}

/// `v0=<64 hex>` over `"v0:<timestamp header, verbatim>:<body>"`.
pub(crate) fn slack(header: Headers<'_, '_>) -> Result<Claim, SignatureError> {
    let signature = one(header, SLACK)?;
    let t = one(header, SLACK_TIMESTAMP)?;
    let hex = signature
        .trim_ascii()
        .strip_prefix(b"v0=")
        .ok_or(SignatureError::Malformed)?;
    let tag = decode_hex32(hex).ok_or(SignatureError::Malformed)?;
    Ok(Claim {
        prefix: [b"v0:", t, b":"].concat(),
        macs: alloc::vec![tag],
        ed25519: Vec::new(),
        signed_at: Some(seconds(t)?),
    })
}

/// Exactly 64 hex digits (either case) → 32 bytes.
fn decode_hex32(text: &[u8]) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (slot, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
        let hi = hex_digit(*pair.first()?)?;
        let lo = hex_digit(*pair.get(1)?)?;
        *slot = (hi << 4) | lo;
    }
    Some(out)
}
