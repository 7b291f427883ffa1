//! Which headers cross the edge, once for every path: the request headers a guarded request
//! carries upstream (the detached exchange's callout, and the router path's `x-envoy-*` rule), the
//! answer headers relayed to a client, and those a record never stores or replays.
//!
//! The lists share the hop-by-hop headers (RFC 9110 §7.6.1), which belong to one connection; they
//! differ where the direction does: a request's length is the edge's to set for the body it
//! sends, and proxy authentication is the edge's own; an answer's `date`, `server` and length are
//! set by the proxy on the reply it makes, and the re-entry listener's mark is its word to the
//! filter. A record never keeps cookies either: they belong to one client.

use alloc::borrow::ToOwned;
use alloc::string::String;
use alloc::vec::Vec;

/// The response header the re-entry listener's first filter (header_mutation) sets on every answer
/// of the inner pass: `%RESPONSE_CODE_DETAILS%;%UPSTREAM_REQUEST_ATTEMPT_COUNT%`. It tells the
/// upstream's own answer from a reply Envoy made on the inner pass, and how many upstream attempts
/// the inner router made. Never relayed to the client, never stored.
pub const REENTRY_MARK: &str = "x-idemgate-reentry";

/// Headers that belong to one connection (RFC 9110 §7.6.1): never forwarded, relayed or stored.
pub(crate) const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
];

/// The proxy's own authentication (RFC 9110 §11.7): between the client and the edge only.
const PROXY_AUTHENTICATION: &[&str] = &["proxy-authenticate", "proxy-authorization"];

/// The body's length: whoever sends a body sets it for the body it sends.
const LENGTH: &str = "content-length";

/// Request headers never forwarded besides [`HOP_BY_HOP`]: the proxy's own authentication, and
/// the length, which the edge sets for the body it sends.
pub(crate) const NOT_FORWARDED: &[&str] =
    &concat::<{ total(NOT_FORWARDED_PARTS) }>(NOT_FORWARDED_PARTS);
const NOT_FORWARDED_PARTS: &[&[&str]] = &[PROXY_AUTHENTICATION, &[LENGTH]];

/// Answer headers never relayed besides [`HOP_BY_HOP`] and the proxy's `x-envoy-*`: those the
/// proxy sets on the reply it makes itself, and the re-entry mark.
pub(crate) const NOT_RELAYED: &[&str] = &[LENGTH, "date", "server", REENTRY_MARK];

/// State that belongs to one client: a record replays to whoever sends the key.
const CLIENT_STATE: &[&str] = &["set-cookie", "set-cookie2"];

/// The mark of a replayed answer (`answer::REPLAYED_HEADER`): the edge's word, never the
/// upstream's.
pub(crate) const REPLAYED: &str = "idempotent-replayed";

/// Headers that may never be stored or replayed, whatever the allow-list says: they belong to one
/// connection or one client, or are the proxy's own. Made of the lists above, each name written
/// once: a const array, so `never_replayed` walks one list as before.
pub const NEVER_REPLAYED: &[&str] =
    &concat::<{ total(NEVER_REPLAYED_PARTS) }>(NEVER_REPLAYED_PARTS);
const NEVER_REPLAYED_PARTS: &[&[&str]] = &[
    CLIENT_STATE,
    HOP_BY_HOP,
    PROXY_AUTHENTICATION,
    // The length, `date`, `server` and `REENTRY_MARK` (the re-entry listener's word to the
    // filter, never the client's).
    NOT_RELAYED,
    &[REPLAYED],
];

/// How many names `parts` hold together.
const fn total(parts: &[&[&str]]) -> usize {
    let (mut sum, mut part) = (0, 0);
    while part < parts.len() {
        sum += parts[part].len();
        part += 1;
    }
    sum
}

/// The names of `parts` one after the other, in one array of their [`total`] (`N`). Evaluated
/// only for the consts above, at compile time: nothing of it is in a build.
const fn concat<const N: usize>(parts: &[&[&'static str]]) -> [&'static str; N] {
    let mut out = [""; N];
    let (mut at, mut part) = (0, 0);
    while part < parts.len() {
        let mut i = 0;
        while i < parts[part].len() {
            out[at] = parts[part][i];
            at += 1;
            i += 1;
        }
        part += 1;
    }
    out
}

/// The proxy's own headers.
const PROXY_PREFIX: &str = "x-envoy-";

/// Client-sent `x-envoy-*` request headers that are forwarded: facts the edge's own connection
/// manager established (or Istio's telemetry exchange), none of which steers routing, retries or
/// timeouts. Every other `x-envoy-*` header (`x-envoy-retry-on`, `x-envoy-max-retries`,
/// `x-envoy-upstream-rq-timeout-ms`, ...) is dropped from a guarded request: whether Envoy
/// honours them depends on its internal-address settings, and a client must never be able to make
/// the router try a claimed request twice.
pub(crate) const PROXY_HEADERS_FORWARDED: &[&str] = &[
    "x-envoy-external-address",
    "x-envoy-internal",
    "x-envoy-peer-metadata",
    "x-envoy-peer-metadata-id",
];

/// Whether a request header (lower-case) is a proxy control header a guarded request must not
/// carry.
pub fn steers_proxy(name: &str) -> bool {
    name.starts_with(PROXY_PREFIX) && !PROXY_HEADERS_FORWARDED.contains(&name)
}

/// Headers no configuration can make replayable: [`NEVER_REPLAYED`] and the proxy's `x-envoy-*`.
pub(crate) fn never_replayed(name: &str) -> bool {
    NEVER_REPLAYED.iter().any(|n| n.eq_ignore_ascii_case(name))
        || name
            .get(..PROXY_PREFIX.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(PROXY_PREFIX))
}

/// The headers a guarded request the edge sends itself carries upstream, of `headers` (all of
/// them, lower-case, pseudo-headers included): the request's target, and every end-to-end header
/// — never `HOP_BY_HOP` ones, `NOT_FORWARDED` ones, those the `connection` header names, or
/// the proxy's control headers ([`steers_proxy`]). The caller adds the body's length.
pub fn forwarded<'h, I>(headers: I) -> Vec<(&'h str, &'h [u8])>
where
    I: IntoIterator<Item = (&'h str, &'h [u8])> + Clone,
{
    let named_by_connection: Vec<String> = headers
        .clone()
        .into_iter()
        .filter(|(name, _)| *name == "connection")
        .flat_map(|(_, value)| {
            String::from_utf8_lossy(value)
                .split(',')
                .map(|t| t.trim().to_ascii_lowercase())
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
        })
        .collect();
    headers
        .into_iter()
        .filter(|(name, _)| {
            if let Some(pseudo) = name.strip_prefix(':') {
                return matches!(pseudo, "method" | "path" | "authority" | "scheme");
            }
            !HOP_BY_HOP.contains(name)
                && !NOT_FORWARDED.contains(name)
                && !steers_proxy(name)
                && !named_by_connection.iter().any(|n| n == name)
        })
        .collect()
}

/// Whether an answer header (lower-case) is relayed to the client: end-to-end headers only,
/// without the proxy's own and without the re-entry mark.
pub(crate) fn relays(name: &str) -> bool {
    !name.starts_with(':')
        && !HOP_BY_HOP.contains(&name)
        && !NOT_RELAYED.contains(&name)
        && !name.starts_with(PROXY_PREFIX)
}

/// The answer headers a client is sent of `headers` (`relays`), those with UTF-8 values.
pub fn relayed<'h>(
    headers: impl IntoIterator<Item = (&'h str, &'h [u8])>,
) -> Vec<(String, String)> {
    headers
        .into_iter()
        .filter(|(name, _)| relays(name))
        .filter_map(|(name, value)| {
            let value = core::str::from_utf8(value).ok()?;
            Some((name.to_owned(), value.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The answer headers never relayed are exactly those the filter's two lists named before
    /// they were one: hop-by-hop, the length, `date`, `server`, the mark.
    #[test]
    fn relays_end_to_end_answer_headers_only() {
        for name in [
            "connection",
            "keep-alive",
            "proxy-connection",
            "transfer-encoding",
            "te",
            "trailer",
            "upgrade",
            "content-length",
            "date",
            "server",
            REENTRY_MARK,
            "x-envoy-upstream-service-time",
            ":status",
        ] {
            assert!(!relays(name), "{name}");
        }
        for name in [
            "location",
            "set-cookie",
            "proxy-authenticate",
            "content-type",
            "etag",
        ] {
            assert!(relays(name), "{name}");
        }
        let out = relayed([
            ("location", &b"/o/1"[..]),
            ("x-bad", b"\xff"),
            ("date", b"today"),
        ]);
        assert_eq!(out, [("location".into(), "/o/1".into())]);
    }

    #[test]
    fn the_never_replayed_list_covers_every_hop_by_hop_and_unrelayed_header() {
        for name in HOP_BY_HOP.iter().chain(NOT_RELAYED).chain(NOT_FORWARDED) {
            assert!(never_replayed(name), "{name}");
        }
        assert!(never_replayed("X-Envoy-Anything"));
        assert!(never_replayed("Set-Cookie"));
        assert!(!never_replayed("content-type"));
    }

    /// The lists made of others hold every name once, and the same names as when they were
    /// written out.
    #[test]
    fn the_made_lists_name_each_header_once() {
        for list in [NEVER_REPLAYED, NOT_FORWARDED] {
            for (i, name) in list.iter().enumerate() {
                assert!(!list[i + 1..].contains(name), "{name} twice");
            }
        }
        let mut never = NEVER_REPLAYED.to_vec();
        never.sort_unstable();
        let mut written = alloc::vec![
            "set-cookie",
            "set-cookie2",
            "connection",
            "keep-alive",
            "proxy-connection",
            "transfer-encoding",
            "te",
            "trailer",
            "upgrade",
            "proxy-authenticate",
            "proxy-authorization",
            "content-length",
            "date",
            "server",
            "idempotent-replayed",
            "x-idemgate-reentry",
        ];
        written.sort_unstable();
        assert_eq!(never, written);
        assert_eq!(
            NOT_FORWARDED,
            [
                "proxy-authenticate",
                "proxy-authorization",
                "content-length"
            ]
        );
    }

    #[test]
    fn proxy_control_headers_are_not_forwarded_its_facts_are() {
        assert!(steers_proxy("x-envoy-retry-on"));
        assert!(!steers_proxy("x-envoy-external-address"));
        assert!(!steers_proxy("x-request-id"));
    }
}
