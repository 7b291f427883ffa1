//! A route's key rules beyond the syntax every key obeys ([`crate::request::key`]): the format its
//! keys take (`key_format`), what a key of another format gets (`key_mismatch`), and whether a key
//! names one request on one endpoint or one operation of the client across endpoints
//! (`key_scope`). `docs/semantics.md` §1 and §2.
//!
//! A format is a UUID, a prefix, or a pattern in a small language of its own ([`pattern`]): sets
//! of characters, each repeated a bounded number of times, the whole key matching. Not a
//! regular-expression engine: that would put its code size in every `.wasm`, and its worst case
//! (backtracking) on every request, for a pattern an operator writes; the keys sites mint are
//! UUIDs, typed prefixes (`ord_…`) or fixed shapes of digits and letters, which the small language
//! says exactly, matched in one pass per atom without allocating. Telling a site's own keys from a
//! browser's is what the rule is for.

mod pattern;

use alloc::string::String;

pub(crate) use pattern::KeyPattern;

/// What a route's keys look like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyFormat {
    /// `8-4-4-4-12` hexadecimal digits (RFC 9562's text form), either case; any version.
    Uuid,
    /// Starts with these characters (exact, case-sensitive), followed by at least one more.
    Prefix(String),
    /// The whole key matches this pattern ([`pattern`]).
    Pattern(KeyPattern),
}

impl KeyFormat {
    /// Whether `key` (a valid key, unquoted) has this format.
    pub(crate) fn matches(&self, key: &str) -> bool {
        match self {
            KeyFormat::Uuid => is_uuid(key.as_bytes()),
            KeyFormat::Prefix(prefix) => {
                key.len() > prefix.len() && key.starts_with(prefix.as_str())
            }
            KeyFormat::Pattern(pattern) => pattern.matches(key.as_bytes()),
        }
    }

    /// The format in words, for the refusal a client developer reads.
    #[cold]
    #[inline(never)]
    pub(crate) fn describe(&self) -> String {
        match self {
            KeyFormat::Uuid => String::from("a UUID (8-4-4-4-12 hexadecimal digits)"),
            KeyFormat::Prefix(prefix) => ["a key that starts with `", prefix, "`"].concat(),
            KeyFormat::Pattern(pattern) => ["a key matching `", pattern.source(), "`"].concat(),
        }
    }
}

/// What a key of another format gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyMismatch {
    /// 400 `key_format`: the client sent a key it meant, in the wrong shape.
    Refuse,
    /// The request is taken as sent without a key: a key the client did not mint (a browser adds
    /// its own `Idempotency-Key` to form POSTs) must neither lock a user out with a 422 nor be
    /// refused. Only where a key is optional (checked at configuration).
    Ignore,
}

/// Whose namespace a key lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyScope {
    /// The client's, per method and path: the same key on another endpoint is another record.
    Route,
    /// The client's, across the routes that say so: the same key on another endpoint finds the
    /// record of the first and is refused as reused (its fingerprint binds the endpoint), never
    /// run again — Stripe's rule.
    Client,
}

/// A route's key rules, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyRules {
    /// `None`: any valid key.
    pub(crate) format: Option<KeyFormat>,
    pub(crate) mismatch: KeyMismatch,
    pub(crate) scope: KeyScope,
}

/// What a key found on a route is, under its rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Screened {
    /// Of the route's format (or the route has none).
    Kept,
    /// Of another format, on a route that ignores those: the request has no key.
    Ignored,
    /// Of another format, refused; says which format the route takes.
    Refused(String),
}

impl KeyRules {
    /// Today's behaviour: any valid key, on its endpoint.
    pub(crate) const DEFAULT: KeyRules = KeyRules {
        format: None,
        mismatch: KeyMismatch::Refuse,
        scope: KeyScope::Route,
    };

    /// What `key` is under these rules.
    pub(crate) fn screen(&self, key: &str) -> Screened {
        match &self.format {
            Some(format) if !format.matches(key) => match self.mismatch {
                KeyMismatch::Ignore => Screened::Ignored,
                KeyMismatch::Refuse => Screened::Refused(format.describe()),
            },
            _ => Screened::Kept,
        }
    }

    /// The method and path the storage key is derived with: the request's own on a
    /// route-scoped route; on a client-scoped one none (empty), so that every client-scoped
    /// endpoint shares one namespace. A route's path always starts with `/` and a method is
    /// never empty, so the client's namespace meets no route's.
    pub(crate) fn namespace<'a>(&self, method: &'a str, path: &'a str) -> (&'a str, &'a str) {
        match self.scope {
            KeyScope::Route => (method, path),
            KeyScope::Client => ("", ""),
        }
    }
}

/// RFC 9562 §4's text form: 32 hexadecimal digits in groups of 8, 4, 4, 4 and 12, joined by `-`.
fn is_uuid(key: &[u8]) -> bool {
    key.len() == 36
        && key.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uuid_is_its_text_form_in_either_case() {
        let uuid = KeyFormat::Uuid;
        assert!(uuid.matches("6ba7b810-9dad-11d1-80b4-00c04fd430c8"));
        assert!(uuid.matches("6BA7B810-9DAD-11D1-80B4-00C04FD430C8"));
        assert!(!uuid.matches("6ba7b8109dad11d180b400c04fd430c8"));
        assert!(!uuid.matches("{6ba7b810-9dad-11d1-80b4-00c04fd430c8}"));
        assert!(!uuid.matches("6ba7b810-9dad-11d1-80b4-00c04fd430cg"));
        assert!(!uuid.matches("6ba7b810-9dad-11d1-80b4-00c04fd430c"));
    }

    #[test]
    fn a_prefix_needs_something_after_it() {
        let prefix = KeyFormat::Prefix("ord_".into());
        assert!(prefix.matches("ord_1"));
        assert!(!prefix.matches("ord_"));
        assert!(!prefix.matches("ORD_1"));
        assert!(!prefix.matches("6ba7b810-9dad-11d1-80b4-00c04fd430c8"));
    }

    #[test]
    fn a_mismatch_is_refused_or_ignored_as_configured() {
        let mut rules = KeyRules {
            format: Some(KeyFormat::Prefix("ord_".into())),
            ..KeyRules::DEFAULT
        };
        assert_eq!(rules.screen("ord_1"), Screened::Kept);
        assert_eq!(
            rules.screen("abc"),
            Screened::Refused("a key that starts with `ord_`".into())
        );
        rules.mismatch = KeyMismatch::Ignore;
        assert_eq!(rules.screen("abc"), Screened::Ignored);
        assert_eq!(KeyRules::DEFAULT.screen("anything"), Screened::Kept);
        let pattern = KeyRules {
            format: Some(KeyFormat::Pattern(KeyPattern::parse("ord_\\d+").unwrap())),
            ..KeyRules::DEFAULT
        };
        assert_eq!(pattern.screen("ord_12"), Screened::Kept);
        assert_eq!(
            pattern.screen("ord_x"),
            Screened::Refused("a key matching `ord_\\d+`".into())
        );
    }

    #[test]
    fn the_client_namespace_drops_method_and_path() {
        assert_eq!(
            KeyRules::DEFAULT.namespace("POST", "/orders"),
            ("POST", "/orders")
        );
        let client = KeyRules {
            scope: KeyScope::Client,
            ..KeyRules::DEFAULT
        };
        assert_eq!(client.namespace("POST", "/orders"), ("", ""));
    }
}
