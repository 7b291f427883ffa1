//! One-time anti-resubmit tokens (`docs/semantics.md` §7).
//!
//! The edge issues a token for a scope; a route that requires one accepts it once. This module does
//! the stateless half — issue and verify a signed token — and names the store cell that records its
//! single use (`TokenClaims::consumption_key`); the store protocol does the atomic consume and
//! reports a second use as [`TokenError::AlreadyUsed`].
//!
//! Wire format (all integers u64 big-endian, base64url without padding):
//!
//! ```text
//! "v1." b64url(issued_at(8) || expires_at(8) || nonce(16)) "." b64url(mac(32))
//! mac = HMAC-SHA-256(secret, len||"idemgate-token-v1" || len||scope || len||issued_at
//!                            || len||expires_at || len||nonce)          (len = u64be byte count)
//! ```
//!
//! `scope` is the 32-byte hash a host binds the token to: the Envoy filter passes
//! `crate::client::scope::token_audience` (the client's scope, the route rule and the method), so
//! a token works only for the client, route and method it was issued for.
//!
//! The scope is not in the token: it is bound through the MAC only. So a token issued for scope A
//! presented in scope B fails with `token_bad_signature`, exactly like a forged one — the verifier
//! cannot (and need not) tell "wrong scope" from "tampered".

use crate::base64;
use crate::hash::PartsHasher;
use crate::time::{Span, UnixMillis};
use alloc::string::String;
use core::fmt;
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Where the edge issues tokens unless configured otherwise (`token.issue_path`).
pub const ISSUE_PATH: &str = "/.idemgate/token";

/// The request target a client asks `endpoint` with for a token for the request it will send
/// with `fetch(path_and_query, {method})`: a token is bound to the route and method it is for,
/// so the edge must be told which, as `?method=…&path=…` (`&` if `endpoint` has a
/// query already). The method is the one `fetch` sends (`crate::request::target::sent_method`); the
/// path is the request's without its query (a token binds no query). Both values are
/// percent-encoded except RFC 3986's unreserved characters, so a path with `&`, `=`, `+` or `%`
/// arrives as it was.
#[must_use]
pub fn issue_target(endpoint: &str, method: &str, path_and_query: &str) -> String {
    let method = crate::request::target::sent_method(method);
    let path = crate::request::target::path_without_query(path_and_query);
    let mut out = String::with_capacity(endpoint.len() + method.len() + path.len() * 3 + 14);
    out.push_str(endpoint);
    out.push_str(if endpoint.contains('?') {
        "&method="
    } else {
        "?method="
    });
    percent_encode(&mut out, method);
    out.push_str("&path=");
    percent_encode(&mut out, path);
    out
}

/// The route a request to the issuing endpoint asks a token for: the inverse of [`issue_target`],
/// so the client's encoding and the edge's reading are one rule. The method is upper-cased (HTTP
/// methods are compared as the router sees them).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) struct IssueFor {
    /// `method=`, upper-cased.
    pub(crate) method: String,
    /// `path=`, percent-decoded.
    pub(crate) path: String,
}

/// Reads `?method=…&path=…` from the target of a request to the issuing endpoint (`+` is a space,
/// `%XX` a byte, a `%` not followed by two hex digits stays as it is). `None` unless both are
/// present, not empty and valid UTF-8 once decoded: the edge answers that with `token_route_unknown`.
#[must_use]
pub(crate) fn issued_for(target: &str) -> Option<IssueFor> {
    Some(IssueFor {
        method: query_value(target, "method")?.to_ascii_uppercase(),
        path: query_value(target, "path")?,
    })
}

/// The percent-decoded value of `name` in the query of `target`, if present and not empty.
fn query_value(target: &str, name: &str) -> Option<String> {
    let (_, query) = target.split_once('?')?;
    let query = query.split('#').next().unwrap_or_default();
    let raw = query
        .split('&')
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))?;
    let bytes = raw.as_bytes();
    let mut out = alloc::vec::Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = |at: usize| bytes.get(at).and_then(|c| char::from(*c).to_digit(16));
        match (b, hex(i + 1), hex(i + 2)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok().filter(|v| !v.is_empty())
}

fn percent_encode(out: &mut String, value: &str) {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    for &b in value.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(DIGITS[usize::from(b >> 4)]));
            out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
        }
    }
}

/// Shortest secret accepted: 128 bits, so brute-forcing the key is never the weak point.
pub(crate) const MIN_SECRET_LEN: usize = 16;

/// How far in the future an `issued_at` may be before the token is refused: tolerates clock skew
/// between the instance that issued a token and the one that checks it.
pub const CLOCK_SKEW: Span = Span(60_000);

const TAG: &str = "idemgate-token-v1";
const CONSUMED_TAG: &str = "idemgate-token-consumed-v1";
const PREFIX: &str = "v1.";
const PAYLOAD_LEN: usize = 32;
const MAC_LEN: usize = 32;
/// base64url characters for 32 bytes without padding.
const B64_32: usize = 43;

/// The HMAC key. Holds the keyed HMAC state only, never prints it.
#[derive(Clone)]
pub struct TokenSecret {
    keyed: HmacSha256,
}

impl TokenSecret {
    /// Accepts a secret of at least `MIN_SECRET_LEN` bytes.
    pub fn new(bytes: &[u8]) -> Result<TokenSecret, TokenError> {
        if bytes.len() < MIN_SECRET_LEN {
            return Err(TokenError::SecretTooShort { len: bytes.len() });
        }
        // HMAC takes keys of any length, so this cannot fail; map it to an error all the same.
        HmacSha256::new_from_slice(bytes)
            .map(|keyed| TokenSecret { keyed })
            .map_err(|_| TokenError::SecretTooShort { len: bytes.len() })
    }

    fn mac(&self, scope: &[u8; 32], payload: &[u8; PAYLOAD_LEN]) -> HmacSha256 {
        let mut mac = self.keyed.clone();
        let (issued_at, rest) = payload.split_at(8);
        let (expires_at, nonce) = rest.split_at(8);
        for part in [TAG.as_bytes(), scope, issued_at, expires_at, nonce] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac
    }
}

impl fmt::Debug for TokenSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenSecret(<redacted>)")
    }
}

/// What a valid token says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenClaims {
    pub issued_at: UnixMillis,
    pub expires_at: UnixMillis,
    pub nonce: [u8; 16],
}

impl TokenClaims {
    /// The store cell that records this token's single use. Derived from the nonce alone: the nonce
    /// is random per token and already MAC-bound to the scope.
    pub(crate) fn consumption_key(&self) -> [u8; 32] {
        let mut hasher = PartsHasher::new(CONSUMED_TAG);
        hasher.part(&self.nonce);
        hasher.finish()
    }

    fn payload(&self) -> [u8; PAYLOAD_LEN] {
        let mut out = [0u8; PAYLOAD_LEN];
        out[..8].copy_from_slice(&self.issued_at.0.to_be_bytes());
        out[8..16].copy_from_slice(&self.expires_at.0.to_be_bytes());
        out[16..].copy_from_slice(&self.nonce);
        out
    }
}

/// A freshly issued token: the text to hand out and what it claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedToken {
    pub text: String,
    pub claims: TokenClaims,
}

/// Issues a token for `scope` (already a hash of the caller's scope identity), valid from `now`
/// for `ttl`. `nonce` must be fresh randomness from the host: it is what makes two tokens issued
/// in the same millisecond distinct, and it names the single-use cell.
#[must_use = "the issued token must be handed out"]
pub fn issue(
    secret: &TokenSecret,
    scope: &[u8; 32],
    now: UnixMillis,
    ttl: Span,
    nonce: [u8; 16],
) -> IssuedToken {
    let claims = TokenClaims {
        issued_at: now,
        expires_at: now.after(ttl),
        nonce,
    };
    let payload = claims.payload();
    let tag = secret.mac(scope, &payload).finalize().into_bytes();
    let mut text = String::with_capacity(PREFIX.len() + 2 * B64_32 + 1);
    text.push_str(PREFIX);
    base64::encode_url(&payload, &mut text);
    text.push('.');
    base64::encode_url(&tag, &mut text);
    IssuedToken { text, claims }
}

/// Whether a token that expires at `expires_at` is still usable at `now`: strictly before its
/// expiry. The edge's [`verify`] and a client deciding whether to fetch a new token (the browser
/// module) use this one rule, so a client never sends a token the edge will call expired.
#[must_use]
pub fn is_fresh(expires_at: UnixMillis, now: UnixMillis) -> bool {
    now < expires_at
}

/// Verifies `text` for `scope` at `now`. Checks run in this order, so a forged token never learns
/// anything about time: format (`token_malformed`), signature in constant time
/// (`token_bad_signature`, also for a token of another scope or secret), expiry (`now >=
/// expires_at` is `token_expired`), then issue time (more than [`CLOCK_SKEW`] ahead of `now` is
/// `token_not_yet_valid`). It does not consume the token; see `TokenClaims::consumption_key`.
#[must_use = "a token is valid only if verification succeeded"]
pub fn verify(
    secret: &TokenSecret,
    text: &str,
    scope: &[u8; 32],
    now: UnixMillis,
) -> Result<TokenClaims, TokenError> {
    let (payload, tag) = parse(text).ok_or(TokenError::Malformed)?;
    secret
        .mac(scope, &payload)
        .verify_slice(&tag)
        .map_err(|_| TokenError::BadSignature)?;
    let mut nonce = [0u8; 16];
    nonce.copy_from_slice(&payload[16..]);
    let claims = TokenClaims {
        issued_at: UnixMillis(be_u64(&payload[..8])),
        expires_at: UnixMillis(be_u64(&payload[8..16])),
        nonce,
    };
    if !is_fresh(claims.expires_at, now) {
        return Err(TokenError::Expired);
    }
    if claims.issued_at > now.after(CLOCK_SKEW) {
        return Err(TokenError::NotYetValid);
    }
    Ok(claims)
}

fn parse(text: &str) -> Option<([u8; PAYLOAD_LEN], [u8; MAC_LEN])> {
    let rest = text.strip_prefix(PREFIX)?;
    let (payload, tag) = rest.split_once('.')?;
    Some((b64url_decode_32(payload)?, b64url_decode_32(tag)?))
}

fn be_u64(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    buf.copy_from_slice(bytes);
    u64::from_be_bytes(buf)
}

/// Decodes exactly 43 base64url characters into 32 bytes. Strict ([`base64`]): no
/// padding, no whitespace, and the 2 unused bits of the last character must be zero, so every
/// token has one spelling only.
fn b64url_decode_32(text: &str) -> Option<[u8; 32]> {
    if text.len() != B64_32 {
        return None;
    }
    base64::decode_url_array(text.as_bytes())
}

/// Why a token (or its secret) was refused. `code()` is the stable string used in vectors, problem
/// `type` URIs and the browser module's `Error.code`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenError {
    /// The configured secret is shorter than `MIN_SECRET_LEN`.
    SecretTooShort { len: usize },
    /// A route requires a token and the request carries none.
    Missing,
    /// Not `v1.<43 base64url>.<43 base64url>`.
    Malformed,
    /// The MAC does not match: forged, tampered, another secret, or another scope.
    BadSignature,
    /// `now` is at or past `expires_at`.
    Expired,
    /// Issued more than [`CLOCK_SKEW`] in the future.
    NotYetValid,
    /// Valid, but its single use is already recorded (returned by the store protocol).
    AlreadyUsed,
}

impl TokenError {
    pub fn code(&self) -> &'static str {
        match self {
            TokenError::SecretTooShort { .. } => "token_secret_too_short",
            TokenError::Missing => "token_missing",
            TokenError::Malformed => "token_malformed",
            TokenError::BadSignature => "token_bad_signature",
            TokenError::Expired => "token_expired",
            TokenError::NotYetValid => "token_not_yet_valid",
            TokenError::AlreadyUsed => "token_used",
        }
    }
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenError::SecretTooShort { len } => write!(
                f,
                "token secret is {len} bytes; at least {MIN_SECRET_LEN} are required"
            ),
            TokenError::Missing => f.write_str("this request requires a one-time token"),
            TokenError::Malformed => f.write_str("the token is not a well-formed idemgate token"),
            TokenError::BadSignature => f.write_str("the token's signature does not match"),
            TokenError::Expired => f.write_str("the token has expired"),
            TokenError::NotYetValid => f.write_str("the token was issued in the future"),
            TokenError::AlreadyUsed => f.write_str("the token has already been used"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_edge_reads_what_the_client_asked_for() {
        let read = |t: &str| issued_for(t).map(|f| (f.method, f.path));
        assert_eq!(
            read("/t?a=1&path=%2Fx+y&method=post"),
            Some(("POST".into(), "/x y".into()))
        );
        assert_eq!(
            read("/t?pathx=1&method=POST&path=/a"),
            Some(("POST".into(), "/a".into()))
        );
        assert_eq!(
            read("/t?method=POST&path=/a%zz%4"),
            Some(("POST".into(), "/a%zz%4".into()))
        );
        assert_eq!(read("/t?method=POST#path=/a"), None);
        assert_eq!(read("/t?method=POST&path="), None);
        assert_eq!(read("/t?method=POST&path=%FF"), None);
        assert_eq!(read("/t"), None);
    }

    proptest::proptest! {
        /// One rule both ways: whatever the client encodes, the edge reads back (any endpoint
        /// query before it, any bytes of a UTF-8 path, `+` `%` `&` `#` `?` included).
        #[test]
        fn issue_targets_round_trip(
            query in "(\\?[a-z]{1,4}=[a-z0-9]{0,4})?",
            method in "[A-Za-z]{1,7}",
            path in "/\\PC{0,24}",
        ) {
            let target = issue_target(&alloc::format!("/t{query}"), &method, &path);
            let read = issued_for(&target);
            // The query (from `?` or `#`) is not sent: a token binds the path alone.
            let bound = crate::request::target::path_without_query(&path).into();
            proptest::prop_assert_eq!(
                read,
                Some(IssueFor { method: method.to_ascii_uppercase(), path: bound })
            );
        }
    }

    #[test]
    fn issue_targets_name_method_and_path() {
        assert_eq!(
            issue_target(ISSUE_PATH, "POST", "/pay/1"),
            "/.idemgate/token?method=POST&path=%2Fpay%2F1"
        );
        assert_eq!(
            issue_target("/t?tenant=a", "PATCH", "/a b&y=%+é?x=1#f"),
            "/t?tenant=a&method=PATCH&path=%2Fa%20b%26y%3D%25%2B%C3%A9"
        );
        // As `fetch` sends it: `post` upper-cased, `patch` not.
        assert_eq!(issue_target("/t", "post", "/p"), "/t?method=POST&path=%2Fp");
        assert_eq!(
            issue_target("/t", "patch", "/p"),
            "/t?method=patch&path=%2Fp"
        );
    }
    use alloc::format;

    const SCOPE: [u8; 32] = [7u8; 32];
    const NONCE: [u8; 16] = [0xab; 16];
    const NOW: UnixMillis = UnixMillis(1_700_000_000_000);

    fn secret() -> TokenSecret {
        TokenSecret::new(b"0123456789abcdef").unwrap()
    }

    #[test]
    fn round_trip() {
        let issued = issue(&secret(), &SCOPE, NOW, Span(600_000), NONCE);
        assert_eq!(issued.claims.expires_at, UnixMillis(NOW.0 + 600_000));
        assert_eq!(issued.text.len(), 3 + 43 + 1 + 43);
        assert_eq!(
            verify(&secret(), &issued.text, &SCOPE, NOW),
            Ok(issued.claims)
        );
    }

    #[test]
    fn short_secret_is_refused_and_never_printed() {
        let err = TokenSecret::new(b"short").unwrap_err();
        assert_eq!(err.code(), "token_secret_too_short");
        let s = TokenSecret::new(b"super-secret-value-123").unwrap();
        assert!(!format!("{s:?}").contains("super"));
    }

    #[test]
    fn base64url_matches_rfc4648_and_is_canonical() {
        let mut out = String::new();
        base64::encode_url(b"\xfb\xff\xfe", &mut out);
        assert_eq!(out, "-__-");
        let zeros = "A".repeat(43);
        assert_eq!(b64url_decode_32(&zeros), Some([0u8; 32]));
        // The last character carries 2 unused bits; "B" sets one, so it is a second spelling.
        let non_canonical = format!("{}B", "A".repeat(42));
        assert_eq!(b64url_decode_32(&non_canonical), None);
        let mut enc = String::new();
        base64::encode_url(&[0xa5; 32], &mut enc);
        assert_eq!(b64url_decode_32(&enc), Some([0xa5; 32]));
    }

    #[test]
    fn consumption_key_is_per_nonce() {
        let a = TokenClaims {
            issued_at: NOW,
            expires_at: NOW,
            nonce: NONCE,
        };
        let b = TokenClaims {
            nonce: [0; 16],
            ..a
        };
        assert_ne!(a.consumption_key(), b.consumption_key());
        let later = TokenClaims {
            issued_at: UnixMillis(1),
            ..a
        };
        assert_eq!(a.consumption_key(), later.consumption_key());
    }
}
