//! Where a response came from, told by Envoy's `response.code_details` — the one fact that separates
//! the upstream's own answer from the proxy's. Pure: the filter reads the property, this module
//! names what it means, and the core decides what that does to the claim (`docs/semantics.md` §5).
//!
//! | `response.code_details`                                   | origin        |
//! |-----------------------------------------------------------|---------------|
//! | `via_upstream`                                            | upstream      |
//! | `no_healthy_upstream`, `cluster_not_found`, `route_not_found`, `direct_response`, `maintenance_mode`, `request_payload_too_large` (a later filter's 413), `request_overall_timeout`/`buffer_request_timeout`-style replies made before forwarding, `upstream_reset_before_response_started{connection_failure…}`, `{overflow}`, `{remote_refused_stream_reset}`, `{local_refused_stream_reset}`, `{overload_manager…}` | never reached |
//! | `response_timeout`, `upstream_per_try_timeout`, `upstream_reset_before_response_started{connection_termination / remote_reset / local_reset / protocol_error …}`, `upstream_reset_after_response_started{…}`, `downstream_remote_disconnect`, `downstream_local_disconnect`, anything else or nothing | in doubt |
//!
//! Anything unknown is *in doubt*: the cost of that mistake is a 409 until the lease ends, while the
//! cost of wrongly saying "never reached" is a second execution.

#[allow(unused_imports)]
use crate::prelude::*;
pub use idemgate_core::decision::DoubtCause;
use idemgate_core::decision::ResponseFacts;

/// The detail Envoy gives an answer that came from the upstream.
pub const VIA_UPSTREAM: &str = "via_upstream";

/// What a request's end tells about the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The upstream answered: its status, headers and body are the candidate result.
    Upstream,
    /// The request was certainly not sent (or refused unprocessed): a retry is safe.
    NeverReached,
    /// The request may have been sent and acted on, with no complete answer back.
    InDoubt,
}

impl Origin {
    /// The facts for the core when no complete upstream answer is at hand.
    pub fn facts_without_answer(self) -> ResponseFacts {
        match self {
            Origin::NeverReached => ResponseFacts::NeverReached,
            // An upstream answer that did not complete is in doubt as well.
            Origin::InDoubt | Origin::Upstream => ResponseFacts::InDoubt,
        }
    }
}

/// Replies Envoy or a later filter makes before the request is handed to an upstream connection.
const NEVER_REACHED_DETAILS: &[&str] = &[
    "no_healthy_upstream",
    "cluster_not_found",
    "route_not_found",
    "direct_response",
    "maintenance_mode",
    "request_payload_too_large",
    "request_headers_too_large",
    "buffer_request_timeout",
    "request_overall_timeout",
    "filter_chain_not_found",
    "overload",
    "ext_authz_denied",
    "ext_authz_error",
    "rbac_access_denied_matched_policy",
    "jwt_authn_access_denied",
    "rate_limited",
    "request_rate_limited",
    "local_rate_limited",
    "upstream_max_stream_duration_reached_before_request",
];

/// Reset reasons (inside `upstream_reset_before_response_started{…}`) that prove the request was not
/// processed: the connection never came up, a circuit breaker refused it, or an HTTP/2 peer refused
/// the stream (REFUSED_STREAM guarantees no processing, RFC 9113 §8.7).
pub const NEVER_REACHED_RESETS: &[&str] = &[
    "connection_failure",
    "connection failure",
    "overflow",
    "remote_refused_stream_reset",
    "local_refused_stream_reset",
    "overload_manager",
    "remote_connection_failure",
];

const RESET_BEFORE: &str = "upstream_reset_before_response_started";

/// Classifies a `response.code_details` value.
pub fn classify(details: Option<&str>) -> Origin {
    let Some(details) = details else {
        return Origin::InDoubt;
    };
    // `rbac_access_denied_matched_policy[deny-evil]`: the name of the policy that matched follows
    // the detail in brackets.
    let details = match details.split_once('[') {
        Some((head, _)) if details.ends_with(']') => head,
        _ => details,
    };
    if details == VIA_UPSTREAM {
        return Origin::Upstream;
    }
    if NEVER_REACHED_DETAILS.contains(&details) {
        return Origin::NeverReached;
    }
    if let Some(rest) = details.strip_prefix(RESET_BEFORE) {
        let reason = rest
            .trim_start_matches('{')
            .split(['|', ',', '}'])
            .next()
            .unwrap_or("");
        if NEVER_REACHED_RESETS.iter().any(|r| reason.starts_with(r)) {
            return Origin::NeverReached;
        }
    }
    Origin::InDoubt
}

/// Classifies the end of a request whose upstream request may have been tried several times (a
/// route's retry policy): `response.code_details` describe the **last** attempt only, so with more
/// than one attempt an earlier one may have reached the upstream and been acted on. "Never
/// reached" holds only when at most one attempt was made; an unknown count is not proof of that.
/// The count is asked for only when it matters (on the router path it costs a host call).
pub fn classify_attempts(details: Option<&str>, attempts: impl FnOnce() -> Option<u64>) -> Origin {
    match classify(details) {
        Origin::NeverReached if attempts().is_none_or(|n| n > 1) => Origin::InDoubt,
        origin => origin,
    }
}

/// Reads the re-entry listener's mark (`idemgate_core::policy::REENTRY_MARK`):
/// `%RESPONSE_CODE_DETAILS%;%UPSTREAM_REQUEST_ATTEMPT_COUNT%` as Envoy's header_mutation filter
/// formats it on the inner pass: details, `;`, and a count or Envoy's `-` for none (`None`).
/// A value of another shape is not the inner chain's (`None`): whoever wrote it, it says nothing
/// about where the answer came from.
pub fn reentry_mark(value: &str) -> Option<(&str, Option<u64>)> {
    let (details, attempts) = value.rsplit_once(';')?;
    if details.is_empty() {
        return None;
    }
    match attempts {
        "-" => Some((details, None)),
        count if !count.is_empty() && count.bytes().all(|b| b.is_ascii_digit()) => {
            Some((details, Some(count.parse().ok()?)))
        }
        _ => None,
    }
}

/// Where `needle` first occurs in `text`. A plain byte search instead of `str::find`/`contains`
/// with a `&str` pattern: those bring core's two-way string searcher (~2.5 KB of the `.wasm`) for
/// the two short searches the filter makes. A match of a UTF-8 needle in UTF-8 text always
/// starts on a character boundary, so the answer is what `str::find` gives.
pub fn find(text: &str, needle: &str) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    text.as_bytes()
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
}

/// The cause of an in-doubt outcome, told by `response.code_details`.
pub fn doubt_cause(details: Option<&str>) -> DoubtCause {
    let details = details.unwrap_or("");
    if details == "response_timeout"
        || details == "upstream_per_try_timeout"
        || details == "upstream_max_stream_duration_reached"
    {
        DoubtCause::UpstreamTimeout
    } else if details.starts_with("downstream_")
        || find(details, "downstream_remote_disconnect").is_some()
    {
        DoubtCause::ClientGone
    } else if details.starts_with("upstream_reset_") {
        DoubtCause::UpstreamReset
    } else {
        DoubtCause::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_agrees_with_str_find() {
        let texts = [
            "",
            "a",
            "abc",
            "reset reason: x, reset reason: y",
            "ééreset reason: ü",
            "aaab",
        ];
        let needles = ["", "a", "ab", "aab", "reset reason: ", "ü", "é", "zz"];
        for text in texts {
            for needle in needles {
                assert_eq!(find(text, needle), text.find(needle), "{text:?} {needle:?}");
            }
        }
    }

    #[test]
    fn doubt_causes() {
        assert_eq!(
            doubt_cause(Some("response_timeout")),
            DoubtCause::UpstreamTimeout
        );
        assert_eq!(
            doubt_cause(Some("downstream_remote_disconnect")),
            DoubtCause::ClientGone
        );
        assert_eq!(
            doubt_cause(Some("upstream_reset_before_response_started{remote_reset}")),
            DoubtCause::UpstreamReset
        );
        assert_eq!(doubt_cause(None), DoubtCause::Other);
    }

    #[test]
    fn upstream_answers() {
        assert_eq!(classify(Some("via_upstream")), Origin::Upstream);
    }

    #[test]
    fn never_reached() {
        for details in [
            "no_healthy_upstream",
            "direct_response",
            "request_payload_too_large",
            "route_not_found",
            "cluster_not_found",
            "upstream_reset_before_response_started{connection_failure}",
            "upstream_reset_before_response_started{connection_failure|delayed_connect_error:_Connection_refused}",
            "upstream_reset_before_response_started{connection_failure,delayed_connect_error:_111}",
            "upstream_reset_before_response_started{overflow}",
            "upstream_reset_before_response_started{remote_refused_stream_reset}",
        ] {
            assert_eq!(classify(Some(details)), Origin::NeverReached, "{details}");
        }
    }

    #[test]
    fn in_doubt() {
        for details in [
            "response_timeout",
            "upstream_per_try_timeout",
            "upstream_reset_before_response_started{connection_termination}",
            "upstream_reset_before_response_started{remote_reset}",
            "upstream_reset_before_response_started{local_reset}",
            "upstream_reset_before_response_started{protocol_error}",
            "upstream_reset_after_response_started{remote_reset}",
            "upstream_reset_after_response_started{connection_failure}",
            "downstream_remote_disconnect",
            "something_new_in_a_later_envoy",
            "",
        ] {
            assert_eq!(classify(Some(details)), Origin::InDoubt, "{details}");
        }
        assert_eq!(classify(None), Origin::InDoubt);
    }

    #[test]
    fn a_policy_name_after_the_detail_is_not_part_of_it() {
        assert_eq!(
            classify(Some("rbac_access_denied_matched_policy[deny-evil]")),
            Origin::NeverReached
        );
        assert_eq!(classify(Some("via_upstream[x]")), Origin::Upstream);
        assert_eq!(classify(Some("response_timeout[")), Origin::InDoubt);
    }

    /// Re-entry: a first attempt that reached the upstream and was reset, then a retry that could
    /// not connect, ends with "connection failure" details — never proof that nothing ran.
    #[test]
    fn an_earlier_attempt_may_have_reached_the_upstream() {
        let refused = Some("upstream_reset_before_response_started{connection_failure}");
        assert_eq!(classify_attempts(refused, || Some(1)), Origin::NeverReached);
        assert_eq!(classify_attempts(refused, || Some(0)), Origin::NeverReached);
        assert_eq!(classify_attempts(refused, || Some(2)), Origin::InDoubt);
        assert_eq!(classify_attempts(refused, || None), Origin::InDoubt);
        assert_eq!(
            classify_attempts(Some("direct_response"), || Some(0)),
            Origin::NeverReached
        );
        assert_eq!(
            classify_attempts(Some("via_upstream"), || Some(3)),
            Origin::Upstream
        );
        assert_eq!(
            classify_attempts(Some("response_timeout"), || Some(1)),
            Origin::InDoubt
        );
    }

    #[test]
    fn reads_the_reentry_mark() {
        assert_eq!(
            reentry_mark("via_upstream;1"),
            Some(("via_upstream", Some(1)))
        );
        assert_eq!(
            reentry_mark("rbac_access_denied_matched_policy[evil];0"),
            Some(("rbac_access_denied_matched_policy[evil]", Some(0)))
        );
        assert_eq!(
            reentry_mark("upstream_reset_before_response_started{remote_connection_failure|delayed_connect_error:_Connection_refused};3"),
            Some(("upstream_reset_before_response_started{remote_connection_failure|delayed_connect_error:_Connection_refused}", Some(3)))
        );
        assert_eq!(
            reentry_mark("direct_response;-"),
            Some(("direct_response", None))
        );
        for other in [
            "garbage",
            "direct_response",
            ";0",
            "direct_response;",
            "direct_response; 0",
            "direct_response;0x1",
            "direct_response;99999999999999999999999",
        ] {
            assert_eq!(reentry_mark(other), None, "{other}");
        }
    }

    #[test]
    fn facts() {
        assert_eq!(
            Origin::NeverReached.facts_without_answer(),
            ResponseFacts::NeverReached
        );
        assert_eq!(
            Origin::InDoubt.facts_without_answer(),
            ResponseFacts::InDoubt
        );
        assert_eq!(
            Origin::Upstream.facts_without_answer(),
            ResponseFacts::InDoubt
        );
    }
}
