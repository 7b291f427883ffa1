//! Why a delivery's signature (or a rule's secret) was refused: one variant per rule, a stable
//! `code()` per variant (problem `type`, vectors, metrics), and messages that never show a secret.

use super::MIN_SECRET_LEN;
use core::fmt;

/// Why a delivery's signature was refused (each is one problem `type` at the edge), or why a rule
/// could not be built from its secrets (configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignatureError {
    /// The route requires a signature and the delivery lacks one of the headers the scheme signs
    /// or carries it in (`header` names the one missing, lowercase).
    Missing { header: &'static str },
    /// A header is not in the scheme's format (or given twice), or carries no signature of a
    /// version the scheme knows.
    Malformed,
    /// No signature matches the body under any configured secret.
    Mismatch,
    /// The signed timestamp is outside the tolerance: an old delivery replayed (or a clock far off).
    Stale,
    /// Configuration: no secret at all.
    NoSecret,
    /// Configuration: secret number `index` (0-based) has `len` bytes, fewer than
    /// [`MIN_SECRET_LEN`] (for Standard Webhooks / Svix: after base64 decoding).
    SecretTooShort { index: usize, len: usize },
    /// Configuration: secret number `index` is for Standard Webhooks / Svix but is not
    /// `[whsec_]<standard base64>` (nor a `whpk_` public key).
    SecretNotBase64 { index: usize },
    /// Configuration: secret number `index` starts `whpk_` but is not the base64 of a usable
    /// Ed25519 public key (32 bytes, a curve point, not of small order).
    PublicKeyInvalid { index: usize },
}

impl SignatureError {
    pub fn code(&self) -> &'static str {
        match self {
            SignatureError::Missing { .. } => "signature_missing",
            SignatureError::Malformed => "signature_malformed",
            SignatureError::Mismatch => "signature_mismatch",
            SignatureError::Stale => "signature_stale",
            SignatureError::NoSecret => "signature_no_secret",
            SignatureError::SecretTooShort { .. } => "signature_secret_too_short",
            SignatureError::SecretNotBase64 { .. } => "signature_secret_not_base64",
            SignatureError::PublicKeyInvalid { .. } => "signature_public_key_invalid",
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
                f.write_str("the delivery's signature headers are not in the provider's format")
            }
            SignatureError::Mismatch => {
                f.write_str("the delivery's signature does not match its body")
            }
            SignatureError::Stale => {
                f.write_str("the delivery's signed timestamp is outside the accepted tolerance")
            }
            SignatureError::NoSecret => f.write_str("at least one signing secret is required"),
            SignatureError::SecretTooShort { index, len } => write!(
                f,
                "signing secret #{} has {len} bytes; at least {MIN_SECRET_LEN} are required",
                index + 1
            ),
            SignatureError::SecretNotBase64 { index } => write!(
                f,
                "signing secret #{} is not `whsec_` followed by standard base64, nor a `whpk_` public key",
                index + 1
            ),
            SignatureError::PublicKeyInvalid { index } => write!(
                f,
                "signing secret #{} is not `whpk_` followed by the base64 of a 32-byte Ed25519 public key",
                index + 1
            ),
        }
    }
}
