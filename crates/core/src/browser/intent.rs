//! One business intent in the browser (`docs/semantics.md` §9), sans-IO: when a submission has
//! settled, which submit-lifecycle event it is, and whether the intent's idempotency key survives
//! it.
//!
//! The key is what makes a repeat safe: the edge runs a key once and replays its answer. So a key
//! is kept exactly as long as a repeat might meet a request that already ran — after a retryable
//! failure (the outcome is unknown or the server said "not now") — and only for the same payload (a
//! changed payload with the old key would be refused with 422). After a final outcome, success or
//! not, the next submit is a new intent with a new key. Within one `fetch` and its retries the key
//! never changes ([`crate::browser::retry::RetryDecision::Retry`] sends the same request again).

use crate::browser::retry::classify;

/// How a submission ended, as the submit button's lifecycle ([`SUBMIT_LIFECYCLE`]) sees it.
///
/// [`SUBMIT_LIFECYCLE`]: crate::order::transition::SUBMIT_LIFECYCLE
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Settled {
    /// A 2xx or 3xx answer, or a sender that resolved without an HTTP answer to judge.
    Succeeded,
    /// 409, 429, 502–504, or no answer at all (network error, timeout, a rejected sender): the
    /// request may or may not have run, so repeating it must carry the same key.
    FailedRetryable,
    /// Any other answer: repeating it cannot change it (400, 404, 422 …, or an unknown 5xx).
    FailedFinal,
}

impl Settled {
    /// Every value.
    #[cfg(test)]
    pub(crate) const ALL: [Settled; 3] = [
        Settled::Succeeded,
        Settled::FailedRetryable,
        Settled::FailedFinal,
    ];

    /// A submission with no answer at all (network error, timeout, a sender that failed): the
    /// request may have run at the edge, so it is a retryable failure and the key is kept.
    pub const UNANSWERED: Settled = Settled::FailedRetryable;

    /// A sender that resolved with something other than an HTTP answer: the application says it
    /// succeeded, and nothing here can judge otherwise.
    pub const RESOLVED: Settled = Settled::Succeeded;

    /// The [`SUBMIT_LIFECYCLE`] event this outcome is (`succeed`, `fail_retryable`, `fail_final`).
    ///
    /// [`SUBMIT_LIFECYCLE`]: crate::order::transition::SUBMIT_LIFECYCLE
    pub const fn event(self) -> &'static str {
        match self {
            Settled::Succeeded => "succeed",
            Settled::FailedRetryable => "fail_retryable",
            Settled::FailedFinal => "fail_final",
        }
    }

    /// Whether the intent keeps its key: only after a retryable failure, since only then may the
    /// next submit meet a request that already ran at the edge.
    pub const fn keeps_key(self) -> bool {
        matches!(self, Settled::FailedRetryable)
    }
}

/// How a submission that got an HTTP answer with `status` settled: by the same classes the retry
/// policy uses ([`classify`]), so an answer that retries gave up on is a retryable failure and one
/// they would never repeat is final. Not a final status (1xx, out of range) is final too: nothing
/// says repeating it helps.
#[must_use]
pub const fn settle(status: u16) -> Settled {
    let class = classify(status);
    if class.is_success() {
        Settled::Succeeded
    } else if class.is_retryable() {
        Settled::FailedRetryable
    } else {
        Settled::FailedFinal
    }
}

/// Whether the next submit reuses the intent's key: only when the intent still holds one
/// (`held` is the fingerprint of the payload it was made for) and the new payload's fingerprint is
/// known and equal, for the same version: `held_if_match` is the `If-Match` the key was sent with
/// (`None`: none), `if_match` the new submit's. An update at another version is another request
/// (the edge refuses the old key with 422 there), so another intent. A payload that cannot be
/// fingerprinted (a stream, read once) is a new intent.
#[must_use]
pub fn reuses_key(
    held: Option<&str>,
    payload: Option<&str>,
    held_if_match: Option<&str>,
    if_match: Option<&str>,
) -> bool {
    matches!((held, payload), (Some(a), Some(b)) if a == b) && held_if_match == if_match
}

/// Whether an intent in `state` (of [`SUBMIT_LIFECYCLE`]) is over: it succeeded or failed for
/// good, so the next submit is a new intent — `reset` first, then a new key. Read off the table
/// (the states `reset` leaves), so the browser never keeps its own list of final states.
///
/// [`SUBMIT_LIFECYCLE`]: crate::order::transition::SUBMIT_LIFECYCLE
#[must_use]
pub fn is_over(state: &str) -> bool {
    crate::order::transition::SUBMIT_LIFECYCLE.has(state, "reset")
}

/// What a submitted payload is, as far as comparing it with the last one goes (the browser sees
/// the JS type; the rule for each is here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Payload {
    /// A value sent as JSON: compared as canonical JSON, so member order and spelling do not matter.
    Value,
    /// A body sent as it is (text, bytes, a Blob, URLSearchParams): compared byte for byte.
    Body,
    /// A form with files (FormData), given as the JSON list of its entries: compared as canonical
    /// JSON (its multipart encoding differs on every request).
    FormEntries,
    /// A stream, readable once: never the same payload, so every submit is a new intent.
    Stream,
}

impl Payload {
    /// Every kind, by name (the browser module's argument).
    pub const ALL: [Payload; 4] = [
        Payload::Value,
        Payload::Body,
        Payload::FormEntries,
        Payload::Stream,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Payload::Value => "value",
            Payload::Body => "body",
            Payload::FormEntries => "form_entries",
            Payload::Stream => "stream",
        }
    }

    /// The fingerprint mode that decides whether two payloads of this kind are the same
    /// ([`reuses_key`] compares the fingerprints): canonical JSON for values and form entries,
    /// the raw bytes of a body; `None` when no two can be (a stream). The payload is
    /// fingerprinted alone: no headers, and the same method and path for every payload.
    #[must_use]
    pub const fn mode(self) -> Option<crate::request::fingerprint::FingerprintMode> {
        use crate::request::fingerprint::FingerprintMode;
        match self {
            Payload::Value | Payload::FormEntries => Some(FingerprintMode::Json),
            Payload::Body => Some(FingerprintMode::Raw),
            Payload::Stream => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::transition::{Transition, SUBMIT_LIFECYCLE};

    #[test]
    fn statuses_settle_like_the_retry_policy() {
        let cases = [
            (200, Settled::Succeeded),
            (201, Settled::Succeeded),
            (303, Settled::Succeeded),
            (409, Settled::FailedRetryable),
            (429, Settled::FailedRetryable),
            (502, Settled::FailedRetryable),
            (504, Settled::FailedRetryable),
            (400, Settled::FailedFinal),
            (422, Settled::FailedFinal),
            (500, Settled::FailedFinal),
            (505, Settled::FailedFinal),
            (101, Settled::FailedFinal),
        ];
        for (status, want) in cases {
            assert_eq!(settle(status), want, "{status}");
        }
    }

    #[test]
    fn every_outcome_is_an_event_of_the_submit_lifecycle() {
        for settled in Settled::ALL {
            let step = SUBMIT_LIFECYCLE.on("in_flight", settled.event());
            assert!(matches!(step, Transition::Apply { .. }), "{settled:?}");
        }
        let kept: [bool; 3] = Settled::ALL.map(Settled::keeps_key);
        assert_eq!(kept, [false, true, false]);
    }

    #[test]
    fn an_intent_is_over_after_a_final_outcome_only() {
        let over: [bool; 5] = [
            "idle",
            "in_flight",
            "succeeded",
            "failed_retryable",
            "failed_final",
        ]
        .map(is_over);
        assert_eq!(over, [false, false, true, false, true]);
        assert!(!is_over("no_such_state"));
    }

    #[test]
    fn payloads_compare_by_their_kind() {
        use crate::request::fingerprint::FingerprintBuilder;
        use crate::request::fingerprint::FingerprintSpec;
        let print = |kind: Payload, body: &[u8]| {
            let spec = FingerprintSpec {
                mode: kind.mode()?,
                headers: alloc::vec::Vec::new(),
                json_limits: crate::request::json::JsonLimits::default(),
            };
            let none = core::iter::empty::<(&str, &[u8])>();
            let mut fp = FingerprintBuilder::new(&spec, "POST", "/", none);
            fp.update(body).ok()?;
            fp.finish().ok()
        };
        let (a, b) = (br#"{"a":1,"b":2}"#, br#"{ "b": 2, "a": 1 }"#);
        assert_eq!(print(Payload::Value, a), print(Payload::Value, b));
        assert!(print(Payload::Value, a).is_some());
        assert_eq!(
            print(Payload::FormEntries, a),
            print(Payload::FormEntries, b)
        );
        assert_ne!(print(Payload::Body, a), print(Payload::Body, b));
        assert_eq!(print(Payload::Stream, a), None);
        let names = Payload::ALL.map(Payload::name);
        assert_eq!(names, ["value", "body", "form_entries", "stream"]);
    }

    #[test]
    fn a_key_is_reused_only_for_the_same_known_payload() {
        assert!(reuses_key(Some("ab"), Some("ab"), None, None));
        assert!(!reuses_key(Some("ab"), Some("ac"), None, None));
        assert!(!reuses_key(None, Some("ab"), None, None));
        assert!(!reuses_key(Some("ab"), None, None, None));
        assert!(!reuses_key(None, None, None, None));
        // The version the update names is part of the intent.
        let (v1, v2) = (Some("\"v1\""), Some("\"v2\""));
        assert!(reuses_key(Some("ab"), Some("ab"), v1, v1));
        assert!(!reuses_key(Some("ab"), Some("ab"), v1, v2));
        assert!(!reuses_key(Some("ab"), Some("ab"), None, v1));
        assert!(!reuses_key(Some("ab"), Some("ab"), v1, None));
    }
}
