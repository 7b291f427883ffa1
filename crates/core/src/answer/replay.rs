//! The replay of a stored answer (`docs/semantics.md` §4, §5): its status, the headers today's
//! allow-list names, its body — and, when the body was over `max_response_body` and not kept, no
//! header that describes a body the replay does not carry.

use super::{HttpAnswer, BODY_OMITTED_HEADER, REPLAYED_HEADER, SHOULD_RETRY_HEADER};
use crate::policy::replayable;
use crate::record::{StoredBody, StoredResponse};
use alloc::string::String;
use alloc::vec::Vec;

/// Headers that describe the stored body (RFC 9110 §8: representation metadata, §8.8: its
/// validators, and digests of its bytes). Replayed next to an empty body they would lie: a JSON
/// client would parse nothing as JSON, a cache would store an empty representation under a real
/// `ETag`. `Location` and the rest of the answer are about the outcome, not the body, and stay.
const DESCRIBES_THE_BODY: &[&str] = &[
    "content-type",
    "content-encoding",
    "content-language",
    "content-location",
    "content-length",
    "content-range",
    "content-md5",
    "content-digest",
    "repr-digest",
    "digest",
    "etag",
    "last-modified",
];

fn describes_the_body(name: &str) -> bool {
    DESCRIBES_THE_BODY
        .iter()
        .any(|h| h.eq_ignore_ascii_case(name))
}

/// An upstream's answer relayed without its body (over the relay bound): its status, the
/// `headers` that do not describe the body, and the marker that the body was omitted.
pub(super) fn without_body(status: u16, headers: &[(String, String)]) -> HttpAnswer {
    let mut headers: Vec<(String, String)> = headers
        .iter()
        .filter(|(name, _)| !describes_the_body(name))
        .filter(|(name, _)| !name.eq_ignore_ascii_case(BODY_OMITTED_HEADER))
        .cloned()
        .collect();
    headers.push((BODY_OMITTED_HEADER.into(), "true".into()));
    HttpAnswer {
        status,
        headers,
        body: Vec::new(),
    }
}

pub(super) fn replay(stored: &StoredResponse, replay_headers: &[String]) -> HttpAnswer {
    let kept = matches!(stored.body, StoredBody::Kept(_));
    // Room for the edge's own headers below, so adding them moves none of the stored ones.
    let mut headers: Vec<(String, String)> = Vec::with_capacity(stored.headers.len() + 3);
    headers.extend(
        stored
            .headers
            .iter()
            .filter(|(name, _)| replayable(name, replay_headers))
            // Decided here, at replay, rather than when the answer is stored: a record stored by
            // an earlier version still holds them, and must not pretend either.
            .filter(|(name, _)| kept || !describes_the_body(name))
            .filter(|(name, _)| !name.eq_ignore_ascii_case(SHOULD_RETRY_HEADER))
            .cloned(),
    );
    headers.push((REPLAYED_HEADER.into(), "true".into()));
    // A replay is the answer this key has, whatever its status: retrying it (as the Stripe SDKs
    // do on a 5xx) only replays it again.
    headers.push((SHOULD_RETRY_HEADER.into(), "false".into()));
    let body = match &stored.body {
        StoredBody::Kept(body) => body.clone(),
        StoredBody::NotKept => {
            headers.push((BODY_OMITTED_HEADER.into(), "true".into()));
            Vec::new()
        }
    };
    HttpAnswer {
        status: stored.status,
        headers,
        body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;

    fn stored(body: StoredBody) -> StoredResponse {
        let headers = [
            ("content-type", "application/json"),
            ("Content-Encoding", "gzip"),
            ("etag", "\"v2\""),
            ("last-modified", "Fri, 04 Dec 2026 12:00:00 GMT"),
            ("location", "/orders/42"),
            ("cache-control", "no-store"),
        ];
        StoredResponse {
            status: 201,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            body,
            seal: None,
        }
    }

    fn allow_all() -> Vec<String> {
        [
            "content-type",
            "content-encoding",
            "etag",
            "last-modified",
            "location",
            "cache-control",
        ]
        .iter()
        .map(ToString::to_string)
        .collect()
    }

    #[test]
    fn a_kept_body_is_replayed_with_what_describes_it() {
        let answer = replay(&stored(StoredBody::Kept(b"{}".to_vec())), &allow_all());
        assert_eq!(answer.body, b"{}");
        assert_eq!(answer.header("content-type"), Some("application/json"));
        assert_eq!(answer.header("etag"), Some("\"v2\""));
        assert_eq!(answer.header(BODY_OMITTED_HEADER), None);
    }

    #[test]
    fn a_replay_without_the_body_carries_nothing_that_describes_it() {
        let answer = replay(&stored(StoredBody::NotKept), &allow_all());
        assert!(answer.body.is_empty());
        let names: Vec<&str> = answer.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "location",
                "cache-control",
                REPLAYED_HEADER,
                SHOULD_RETRY_HEADER,
                BODY_OMITTED_HEADER
            ]
        );
        assert_eq!(answer.status, 201);
    }

    /// A detached exchange's answer over the relay bound reaches its first client with the
    /// upstream's own status (a 201 stays a 201, never a 502 the edge made), `Location` and the
    /// rest, but nothing that describes the body it lacks — as its retry's replay says.
    #[test]
    fn an_answer_relayed_without_its_body_keeps_its_status_and_says_so() {
        let headers: Vec<(String, String)> = [
            ("content-type", "application/json"),
            ("Content-Length", "12000000"),
            ("etag", "\"v2\""),
            ("location", "/orders/42"),
            ("x-request-id", "r1"),
        ]
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
        let answer = without_body(201, &headers);
        assert_eq!(answer.status, 201);
        assert!(answer.body.is_empty());
        let names: Vec<&str> = answer.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, vec!["location", "x-request-id", BODY_OMITTED_HEADER]);
        assert_eq!(answer.header(BODY_OMITTED_HEADER), Some("true"));
    }
}
