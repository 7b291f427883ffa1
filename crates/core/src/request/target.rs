//! One spelling of a request's method and path for everything the rules hash or bind:
//! the edge's fingerprint and the browser's, the path a route sees, and the token request a client
//! sends. The Envoy filter and the browser module both call these functions, so `POST /Orders`,
//! `post /orders` (as `fetch` sends it) and `POST //orders;x` are one request wherever they are
//! seen, and a browser that fingerprints a payload gets the edge's answer.
//!
//! Two facts meet here. The edge compares methods exactly (RFC 9110 §9.1: methods are
//! case-sensitive) and normalises paths (`crate::request::path::normalize`, lower-cased on a
//! case-insensitive route). A browser does not send the method its app wrote: `fetch` upper-cases
//! the six standard methods and sends every other method as written (Fetch, "normalize a method").

use crate::request::path::normalize;
use alloc::borrow::Cow;
use alloc::string::String;

/// Whether a route compares paths case-sensitively when its configuration does not say
/// (`case_sensitive`): no, paths are compared in lower case. The browser module's default too.
pub const CASE_SENSITIVE_BY_DEFAULT: bool = false;

/// The methods `fetch` upper-cases, matched case-insensitively (Fetch, "normalize a method").
const FETCH_NORMALISED: [&str; 6] = ["DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT"];

/// The method as `fetch` puts it on the wire, given the method an app wrote: `post` → `POST`,
/// `patch` → `patch` (`PATCH` is not one of the six; written `patch`, it reaches the edge as
/// `patch` and no `PATCH` route matches it).
#[must_use]
pub(crate) fn sent_method(method: &str) -> &str {
    FETCH_NORMALISED
        .iter()
        .find(|m| m.eq_ignore_ascii_case(method))
        .copied()
        .unwrap_or(method)
}

/// An already normalised path as a route with this case rule spells it: lower-cased unless the
/// route is case-sensitive (route prefixes are stored the same way).
#[must_use]
#[inline]
pub(crate) fn spell(mut normalized: String, case_sensitive: bool) -> String {
    // In place: the normalised path is the caller's own copy already.
    if !case_sensitive {
        normalized.make_ascii_lowercase();
    }
    normalized
}

/// `path` (the route's spelling, no query) with the query of `path_and_query` as the client sent
/// it, from its first `?` or `#`: what a fingerprint hashes, since a query can change what a
/// request does. Borrows `path` when there is no query (no allocation on the common request).
#[must_use]
#[inline]
pub(crate) fn with_query<'a>(path: &'a str, path_and_query: &str) -> Cow<'a, str> {
    match path_and_query.find(['?', '#']) {
        Some(at) => {
            let mut out = String::from(path);
            // `at` is the offset of an ASCII byte: `get` always finds the query.
            out.push_str(path_and_query.get(at..).unwrap_or_default());
            Cow::Owned(out)
        }
        None => Cow::Borrowed(path),
    }
}

/// The method and path a guarded request is fingerprinted with.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Target<'a> {
    /// As the edge receives it (`sent_method`).
    pub method: &'a str,
    /// Normalised, spelled under the route's case rule, with the query as sent.
    pub path: String,
}

/// What the edge fingerprints for a request an app sends with `fetch(path_and_query, {method})`
/// on a route with this case rule — the same composition the edge makes from its route match
/// (`crate::policy::Matched::target`).
#[must_use]
pub fn of_fetch<'a>(method: &'a str, path_and_query: &str, case_sensitive: bool) -> Target<'a> {
    let path = spell(
        normalize(path_without_query(path_and_query)),
        case_sensitive,
    );
    Target {
        method: sent_method(method),
        path: with_query(&path, path_and_query).into_owned(),
    }
}

/// `/a/b?x=1` → `/a/b`.
pub(crate) fn path_without_query(path: &str) -> &str {
    // `get`, not indexing: `end` is an ASCII byte's offset, so this never falls back, and no
    // panicking slice is compiled in.
    // A byte search: both are ASCII, so where one is found is a character boundary.
    match path.bytes().position(|b| b == b'?' || b == b'#') {
        Some(end) => path.get(..end).unwrap_or(path),
        None => path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetch_upper_cases_six_methods_only() {
        for (written, sent) in [
            ("post", "POST"),
            ("Post", "POST"),
            ("POST", "POST"),
            ("delete", "DELETE"),
            ("options", "OPTIONS"),
            ("patch", "patch"),
            ("PATCH", "PATCH"),
            ("Purge", "Purge"),
        ] {
            assert_eq!(sent_method(written), sent, "{written}");
        }
    }

    #[test]
    fn one_target_per_spelling() {
        let orders = of_fetch("POST", "/orders", false);
        for (method, path) in [
            ("post", "/Orders"),
            ("POST", "//orders;x=1"),
            ("Post", "/%6Frders"),
            ("POST", "/a/../ORDERS"),
        ] {
            assert_eq!(of_fetch(method, path, false), orders, "{method} {path}");
        }
        assert_eq!(of_fetch("POST", "/Orders", true).path, "/Orders");
        assert_eq!(of_fetch("POST", "/orders/", false).path, "/orders/");
        assert_eq!(
            of_fetch("POST", "/Orders?Q=A#F", false).path,
            "/orders?Q=A#F"
        );
        assert_eq!(with_query("/a", "/A"), Cow::Borrowed("/a"));
    }
}
