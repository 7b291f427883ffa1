//! Retry decisions through the public API; delays worked out by hand in the comments.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::browser::retry::{
    classify, next, AttemptOutcome, FinalReason, RetryDecision, RetryPolicy, StatusClass,
};
use crate::time::{Span, UnixMillis};

const NOW: UnixMillis = UnixMillis(784_111_777_000); // Sun, 06 Nov 1994 08:49:37 GMT
const HALF: u32 = 1 << 31;

fn decide(attempts: u32, outcome: AttemptOutcome<'_>, random: u32) -> RetryDecision {
    next(
        &RetryPolicy::default(),
        attempts,
        Span(0),
        outcome,
        NOW,
        random,
    )
}

fn status(status: u16) -> AttemptOutcome<'static> {
    AttemptOutcome::Response {
        status,
        retry_after: None,
    }
}

#[test]
fn full_jitter_backoff() {
    // attempt 1: cap 250 ms; half of it is 125.
    assert_eq!(
        decide(1, AttemptOutcome::NetworkError, HALF),
        RetryDecision::Retry { delay: Span(125) }
    );
    // attempt 3: cap 250 × 4 = 1000 ms.
    assert_eq!(
        decide(3, AttemptOutcome::Timeout, HALF),
        RetryDecision::Retry { delay: Span(500) }
    );
    assert_eq!(
        decide(2, status(503), 0),
        RetryDecision::Retry { delay: Span(0) }
    );
    // u32::MAX / 2^32 of 500 ms rounds down to 499.
    assert_eq!(
        decide(2, status(503), u32::MAX),
        RetryDecision::Retry { delay: Span(499) }
    );
    // Capped at max_delay: 250 × 2^9 > 10 s.
    let policy = RetryPolicy {
        max_attempts: 20,
        max_total: Span::from_secs(3600),
        ..RetryPolicy::default()
    };
    let d = next(
        &policy,
        10,
        Span(0),
        AttemptOutcome::NetworkError,
        NOW,
        HALF,
    );
    assert_eq!(d, RetryDecision::Retry { delay: Span(5_000) });
    let d = next(
        &policy,
        19,
        Span(0),
        AttemptOutcome::NetworkError,
        NOW,
        u32::MAX,
    );
    assert_eq!(d, RetryDecision::Retry { delay: Span(9_999) });
}

#[test]
fn retry_after_is_a_floor_honoured_above_max_delay() {
    let ra = |v| AttemptOutcome::Response {
        status: 503,
        retry_after: Some(v),
    };
    assert_eq!(
        decide(1, ra("2"), HALF),
        RetryDecision::Retry { delay: Span(2_000) }
    );
    assert_eq!(
        decide(1, ra("12"), HALF),
        RetryDecision::Retry {
            delay: Span(12_000)
        }
    );
    assert_eq!(
        decide(1, ra("0"), HALF),
        RetryDecision::Retry { delay: Span(125) }
    );
    assert_eq!(
        decide(1, ra("garbage"), HALF),
        RetryDecision::Retry { delay: Span(125) }
    );
    assert_eq!(
        decide(1, ra("31"), HALF),
        RetryDecision::Final(FinalReason::ExhaustedTime)
    );
}

#[test]
fn what_is_never_retried() {
    for s in [400, 401, 403, 404, 422, 500, 501, 408, 100, 600] {
        assert_eq!(
            decide(1, status(s), HALF),
            RetryDecision::Final(FinalReason::NotRetryable { status: s })
        );
    }
    for s in [200, 201, 204, 303] {
        assert_eq!(
            decide(1, status(s), HALF),
            RetryDecision::Final(FinalReason::Success { status: s })
        );
    }
    for s in [409, 429, 502, 503, 504] {
        assert!(
            matches!(decide(1, status(s), HALF), RetryDecision::Retry { .. }),
            "{s}"
        );
    }
}

#[test]
fn limits() {
    assert_eq!(
        decide(5, status(503), HALF),
        RetryDecision::Final(FinalReason::ExhaustedAttempts)
    );
    assert!(matches!(
        decide(4, status(503), HALF),
        RetryDecision::Retry { .. }
    ));
    let p = RetryPolicy::default();
    // attempt 2: cap 500, half 250; 29_750 + 250 = 30_000 is still within max_total.
    let at_edge = next(&p, 2, Span(29_750), AttemptOutcome::Timeout, NOW, HALF);
    assert_eq!(at_edge, RetryDecision::Retry { delay: Span(250) });
    let over = next(&p, 2, Span(29_751), AttemptOutcome::Timeout, NOW, HALF);
    assert_eq!(over, RetryDecision::Final(FinalReason::ExhaustedTime));
    assert_eq!(FinalReason::ExhaustedTime.code(), "retry_exhausted_time");
}

#[test]
fn classification() {
    assert_eq!(classify(409), StatusClass::InFlight);
    assert_eq!(classify(422), StatusClass::KeyReused);
    assert_eq!(classify(418), StatusClass::ClientError);
    assert_eq!(classify(599), StatusClass::ServerError);
    assert_eq!(classify(199), StatusClass::Invalid);
}
