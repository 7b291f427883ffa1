//! Which canonical form a body gets in the `auto` fingerprint mode, from its `Content-Type`.
//!
//! Only the media type's essence counts (`type/subtype`, before any `;` parameter such as
//! `charset`, surrounding spaces and tabs ignored, ASCII case-insensitive, RFC 9110 §8.3.1):
//! - `application/json` and every `+json` structured suffix (`application/problem+json`,
//!   `application/vnd.api+json`, RFC 6839) → canonical JSON;
//! - `application/x-www-form-urlencoded` → canonical form pairs;
//! - anything else (multipart, binary, text, a malformed value), no `Content-Type`, or more than
//!   one `Content-Type` field → the raw bytes. Raw is the strict choice: any byte that differs
//!   makes a different fingerprint, so a type the edge cannot read never makes two payloads equal.
//! - A body with a `Content-Encoding` other than `identity` (e.g. gzip-compressed JSON) is raw
//!   bytes too, whatever its type: the edge does not decompress, and refusing a compressed upload
//!   as "not JSON" would turn a valid request into a 400.

/// The canonical form `auto` mode picks for a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BodyKind {
    Json,
    Form,
    Raw,
}

impl BodyKind {
    /// Classifies a request by its headers ((lowercase or any-case name, value) pairs, every
    /// occurrence).
    pub fn of_headers<'h, I>(headers: I) -> BodyKind
    where
        I: IntoIterator<Item = (&'h str, &'h [u8])>,
    {
        let mut content_type = None;
        let mut types = 0usize;
        let mut encoded = false;
        for (name, value) in headers {
            if name.eq_ignore_ascii_case("content-type") {
                content_type = Some(value);
                types += 1;
            } else if name.eq_ignore_ascii_case("content-encoding") {
                encoded |= !value.trim_ascii().eq_ignore_ascii_case(b"identity");
            }
        }
        match content_type {
            Some(value) if types == 1 && !encoded => BodyKind::of_content_type(value),
            _ => BodyKind::Raw,
        }
    }

    /// Classifies one `Content-Type` field value.
    pub(crate) fn of_content_type(value: &[u8]) -> BodyKind {
        let essence = essence(value);
        let Some(slash) = essence.iter().position(|&b| b == b'/') else {
            return BodyKind::Raw;
        };
        let (kind, subtype) = (&essence[..slash], &essence[slash + 1..]);
        if !is_token(kind) || !is_token(subtype) {
            return BodyKind::Raw;
        }
        if kind.eq_ignore_ascii_case(b"application") {
            if subtype.eq_ignore_ascii_case(b"json") {
                return BodyKind::Json;
            }
            if subtype.eq_ignore_ascii_case(b"x-www-form-urlencoded") {
                return BodyKind::Form;
            }
        }
        // A structured suffix needs a name before it: `+json` alone is no JSON type.
        let suffix = subtype.len().checked_sub(5).filter(|&at| at > 0);
        if suffix.is_some_and(|at| subtype[at..].eq_ignore_ascii_case(b"+json")) {
            return BodyKind::Json;
        }
        BodyKind::Raw
    }
}

/// A `Content-Type` value's essence: `type/subtype` before any parameter, without surrounding
/// spaces and tabs (compare it ASCII case-insensitively).
pub(crate) fn essence(value: &[u8]) -> &[u8] {
    value
        .split(|&b| b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii()
}

/// An RFC 9110 token (`tchar`s, at least one).
fn is_token(text: &[u8]) -> bool {
    !text.is_empty()
        && text
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::BodyKind::{self, *};

    #[test]
    fn essence_decides_parameters_and_case_do_not() {
        for (value, want) in [
            ("application/json", Json),
            ("Application/JSON; charset=utf-8", Json),
            (" application/json ;charset=\"utf-8\"", Json),
            ("application/problem+json", Json),
            ("application/vnd.api+JSON;v=1", Json),
            ("text/x+json", Json),
            ("application/x-www-form-urlencoded", Form),
            ("application/x-www-form-urlencoded; charset=UTF-8", Form),
            ("APPLICATION/X-WWW-FORM-URLENCODED", Form),
            ("multipart/form-data; boundary=x", Raw),
            ("application/octet-stream", Raw),
            ("text/plain", Raw),
            ("application/jsonx", Raw),
            ("application/json5", Raw),
            ("+json", Raw),
            ("application/+json", Raw),
            ("application/x-www-form-urlencoded-x", Raw),
            ("application /json", Raw),
            ("application/json garbage", Raw),
            ("", Raw),
            ("json", Raw),
        ] {
            assert_eq!(
                BodyKind::of_content_type(value.as_bytes()),
                want,
                "{value:?}"
            );
        }
    }

    #[test]
    fn exactly_one_content_type_field_counts() {
        let json = &b"application/json"[..];
        assert_eq!(BodyKind::of_headers([("Content-Type", json)]), Json);
        assert_eq!(BodyKind::of_headers([("x-other", json)]), Raw);
        assert_eq!(BodyKind::of_headers([]), Raw);
        assert_eq!(
            BodyKind::of_headers([("content-type", json), ("content-type", json)]),
            Raw
        );
        let gzip = &b"gzip"[..];
        assert_eq!(
            BodyKind::of_headers([("content-encoding", gzip), ("content-type", json)]),
            Raw
        );
        let identity = &b" Identity "[..];
        assert_eq!(
            BodyKind::of_headers([("content-type", json), ("Content-Encoding", identity)]),
            Json
        );
    }
}
