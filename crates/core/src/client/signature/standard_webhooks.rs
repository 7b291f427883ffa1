//! Standard Webhooks (<https://www.standardwebhooks.com>), which Svix also sends under its own header
//! names: one implementation, parameterised by [`HeaderNames`].
//!
//! A delivery carries `<p>-id`, `<p>-timestamp` (unix seconds) and `<p>-signature`: space-separated
//! `<version>,<base64>` items over `"<id>.<timestamp>.<body>"`. `v1` is HMAC-SHA256 keyed with the
//! base64 decoding of the secret after an optional `whsec_` prefix (as the `standardwebhooks` and
//! `svix` libraries read it); `v1a` is an Ed25519 signature, checked against `whpk_<base64>` public
//! keys. Other versions are ignored, so a provider can add one without breaking this edge. The
//! timestamp is signed as the libraries sign it: its decimal value (`007` signs as `7`).

use super::{hmac_key, one, seconds, Claim, Key, SignatureError};
use crate::base64;
use alloc::vec::Vec;
use ed25519_dalek::{Signature, VerifyingKey};

/// The three header names of one flavour (lowercase).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeaderNames {
    /// In [`SignatureScheme::headers`](super::SignatureScheme::headers) order: signature, id,
    /// timestamp.
    names: [&'static str; 3],
}

impl HeaderNames {
    /// Standard Webhooks' own names.
    pub(crate) const STANDARD: HeaderNames = HeaderNames {
        names: ["webhook-signature", "webhook-id", "webhook-timestamp"],
    };
    /// Svix's names for the same scheme.
    pub(crate) const SVIX: HeaderNames = HeaderNames {
        names: ["svix-signature", "svix-id", "svix-timestamp"],
    };

    /// Signature, id and timestamp header names.
    pub const fn all(&'static self) -> &'static [&'static str] {
        &self.names
    }
}

/// A configured secret: `whpk_<base64 of 32 bytes>` is an Ed25519 public key, anything else
/// `[whsec_]<base64>` an HMAC key of at least [`MIN_SECRET_LEN`](super::MIN_SECRET_LEN) bytes.
pub(super) fn key(index: usize, secret: &[u8]) -> Result<Key, SignatureError> {
    if let Some(encoded) = secret.strip_prefix(b"whpk_") {
        let invalid = SignatureError::PublicKeyInvalid { index };
        let bytes = base64::decode_array(encoded).ok_or(invalid.clone())?;
        let public = VerifyingKey::from_bytes(&bytes).map_err(|_| invalid.clone())?;
        // A small-order key lets a forger guess a valid signature for any body.
        if public.is_weak() {
            return Err(invalid);
        }
        return Ok(Key::Ed25519(public));
    }
    let encoded = secret.strip_prefix(b"whsec_").unwrap_or(secret);
    let bytes = base64::decode(encoded).ok_or(SignatureError::SecretNotBase64 { index })?;
    hmac_key(index, &bytes)
}

type Headers<'a, 'h> = &'a dyn Fn(&str) -> Vec<&'h [u8]>;

/// What the three headers claim. Items are separated by one or more spaces; an item without a
/// comma, or a `v1` / `v1a` whose value is not the base64 of 32 / 64 bytes, is malformed.
pub(super) fn claim(names: &HeaderNames, header: Headers<'_, '_>) -> Result<Claim, SignatureError> {
    let [signature_name, id_name, timestamp_name] = names.names;
    let signatures = one(header, signature_name)?;
    let id = one(header, id_name)?;
    let timestamp = one(header, timestamp_name)?;
    if id.is_empty() {
        return Err(SignatureError::Malformed);
    }
    let signed_at = seconds(timestamp)?;
    let mut claim = Claim {
        signed_at: Some(signed_at),
        ..Claim::default()
    };
    for item in signatures
        .split(|&b| b == b' ')
        .filter(|item| !item.is_empty())
    {
        let comma = item
            .iter()
            .position(|&b| b == b',')
            .ok_or(SignatureError::Malformed)?;
        let version = item.get(..comma).unwrap_or_default();
        let value = item.get(comma + 1..).unwrap_or_default();
        match version {
            b"v1" => claim
                .macs
                .push(base64::decode_array(value).ok_or(SignatureError::Malformed)?),
            b"v1a" => claim.ed25519.push(Signature::from_bytes(
                &base64::decode_array(value).ok_or(SignatureError::Malformed)?,
            )),
            _ => {}
        }
    }
    let mut prefix = Vec::with_capacity(id.len() + 22);
    prefix.extend_from_slice(id);
    prefix.extend_from_slice(alloc::format!(".{signed_at}.").as_bytes());
    claim.prefix = prefix;
    Ok(claim)
}
