//! The browser's client retry policy (`docs/semantics.md` §9), sans-IO: the caller reports how an
//! attempt ended and passes the time and a random number; [`next`] says whether and when to try
//! again.
//!
//! Retried: network errors, timeouts, 409 (another attempt with this key is still in flight), 429
//! and 502/503/504 (the server says it did not act). Never retried: 400/401/403/404/422 and every
//! other status — repeating them cannot change the answer, and a 422 means the key was reused for a
//! different payload. The same idempotency key is reused for every retry, so retrying is safe.
//!
//! Delay: exponential back-off with *full* jitter (`random / 2^32 × min(max_delay, base ×
//! 2^(attempts_made-1))`), which spreads a crowd of clients evenly instead of having them retry in
//! lock-step. A valid `Retry-After` is a floor that is honoured exactly, even above `max_delay`:
//! the server knows when the lease ends. Retrying stops after `max_attempts` attempts, or when the
//! next delay would end past `max_total` since the first attempt.

use crate::time::{Span, UnixMillis};

/// Limits of one intent's retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, the first included.
    pub max_attempts: u32,
    /// Cap of the first retry's delay; doubles per attempt.
    pub base_delay: Span,
    /// Largest back-off cap (a `Retry-After` may exceed it).
    pub max_delay: Span,
    /// No retry is scheduled to start later than this after the first attempt.
    pub max_total: Span,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Span(250),
            max_delay: Span::from_secs(10),
            max_total: Span::from_secs(30),
        }
    }
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptOutcome<'a> {
    /// No response: connection failed or was cut.
    NetworkError,
    /// The client gave up waiting.
    Timeout,
    /// A response, with its `Retry-After` header if any.
    Response {
        status: u16,
        retry_after: Option<&'a str>,
    },
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Send the same request (same key) again after `delay`.
    Retry { delay: Span },
    /// Stop; the intent has its final outcome.
    Final(FinalReason),
}

/// Why retrying stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FinalReason {
    /// A 2xx or 3xx answer.
    Success { status: u16 },
    /// An answer that retrying cannot change.
    NotRetryable { status: u16 },
    /// `max_attempts` attempts were made.
    ExhaustedAttempts,
    /// The next retry would start after `max_total`.
    ExhaustedTime,
}

impl FinalReason {
    pub fn code(&self) -> &'static str {
        match self {
            FinalReason::Success { .. } => "success",
            FinalReason::NotRetryable { .. } => "not_retryable",
            FinalReason::ExhaustedAttempts => "retry_exhausted_attempts",
            FinalReason::ExhaustedTime => "retry_exhausted_time",
        }
    }
}

/// What a status means to the browser module (which shows it to the user).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StatusClass {
    /// 2xx (a replay carries `Idempotent-Replayed: true`; the status alone cannot tell).
    Success,
    /// 3xx that reached the caller.
    Redirect,
    /// 409: another request with this key is in flight. Retried.
    InFlight,
    /// 429. Retried.
    RateLimited,
    /// 502, 503, 504: the server did not act. Retried.
    Unavailable,
    /// 422: the key was already used for a different payload.
    KeyReused,
    /// Any other 4xx.
    ClientError,
    /// Any other 5xx: the outcome is unknown, so it is not retried blindly.
    ServerError,
    /// Not a final HTTP status (1xx or outside 100..=599).
    Invalid,
}

impl StatusClass {
    /// Stable snake_case name (what the browser module hands to JS).
    pub const fn name(self) -> &'static str {
        match self {
            StatusClass::Success => "success",
            StatusClass::Redirect => "redirect",
            StatusClass::InFlight => "in_flight",
            StatusClass::RateLimited => "rate_limited",
            StatusClass::Unavailable => "unavailable",
            StatusClass::KeyReused => "key_reused",
            StatusClass::ClientError => "client_error",
            StatusClass::ServerError => "server_error",
            StatusClass::Invalid => "invalid",
        }
    }

    pub(crate) const fn is_retryable(self) -> bool {
        matches!(
            self,
            StatusClass::InFlight | StatusClass::RateLimited | StatusClass::Unavailable
        )
    }

    pub(crate) const fn is_success(self) -> bool {
        matches!(self, StatusClass::Success | StatusClass::Redirect)
    }
}

pub const fn classify(status: u16) -> StatusClass {
    match status {
        200..=299 => StatusClass::Success,
        300..=399 => StatusClass::Redirect,
        409 => StatusClass::InFlight,
        429 => StatusClass::RateLimited,
        502..=504 => StatusClass::Unavailable,
        422 => StatusClass::KeyReused,
        400..=499 => StatusClass::ClientError,
        500..=599 => StatusClass::ServerError,
        _ => StatusClass::Invalid,
    }
}

/// Decides after attempt number `attempts_made` (1 for the first) ended with `outcome`, `elapsed`
/// after the first attempt started. `random` is a uniform `u32` from the host; the jitter fraction
/// is `random / 2^32`.
#[must_use = "the decision says whether and when to retry"]
pub fn next(
    policy: &RetryPolicy,
    attempts_made: u32,
    elapsed: Span,
    outcome: AttemptOutcome<'_>,
    now: UnixMillis,
    random: u32,
) -> RetryDecision {
    let floor = match outcome {
        AttemptOutcome::NetworkError | AttemptOutcome::Timeout => None,
        AttemptOutcome::Response {
            status,
            retry_after,
        } => {
            let class = classify(status);
            if class.is_success() {
                return RetryDecision::Final(FinalReason::Success { status });
            }
            if !class.is_retryable() {
                return RetryDecision::Final(FinalReason::NotRetryable { status });
            }
            retry_after.and_then(|value| parse_retry_after(value, now))
        }
    };
    if attempts_made >= policy.max_attempts {
        return RetryDecision::Final(FinalReason::ExhaustedAttempts);
    }
    let jittered = backoff(policy, attempts_made, random);
    let delay = floor.map_or(jittered, |floor| floor.max(jittered));
    if elapsed.0.saturating_add(delay.0) > policy.max_total.0 {
        return RetryDecision::Final(FinalReason::ExhaustedTime);
    }
    RetryDecision::Retry { delay }
}

/// `random / 2^32 × min(max_delay, base × 2^(attempts_made-1))`, rounded down; saturating.
fn backoff(policy: &RetryPolicy, attempts_made: u32, random: u32) -> Span {
    let doublings = attempts_made.saturating_sub(1);
    let factor = 1u64.checked_shl(doublings).unwrap_or(u64::MAX);
    let cap = policy
        .base_delay
        .0
        .saturating_mul(factor)
        .min(policy.max_delay.0);
    let jittered = (u128::from(cap) * u128::from(random)) >> 32;
    Span(u64::try_from(jittered).unwrap_or(u64::MAX))
}

/// A `Retry-After` value (RFC 9110 §10.2.3): delta-seconds, or an IMF-fixdate taken relative to
/// `now` (a date in the past is zero). Anything else is `None` and ignored by [`next`]. The
/// obsolete RFC 850 and asctime date forms are not accepted: the client then falls back to its
/// own back-off, which is safe.
pub fn parse_retry_after(value: &str, now: UnixMillis) -> Option<Span> {
    // Trimmed as bytes (optional whitespace is ASCII): no `str` pattern machinery in the browser
    // module's .wasm.
    let value = crate::request::key::trim_ows(value.as_bytes());
    if !value.is_empty() && value.iter().all(u8::is_ascii_digit) {
        let secs = value.iter().fold(0u64, |acc, b| {
            acc.saturating_mul(10).saturating_add(u64::from(b - b'0'))
        });
        return Some(Span::from_secs(secs));
    }
    http_date(value).map(|date| now.until(date))
}

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110 §5.6.7) to milliseconds since
/// the epoch. Field ranges are checked (including leap years); the day name must be one of the
/// seven but is not checked against the date. Dates before 1970 are `None`.
#[cfg(test)]
fn parse_http_date(text: &str) -> Option<UnixMillis> {
    http_date(text.as_bytes())
}

fn http_date(b: &[u8]) -> Option<UnixMillis> {
    const DAYS: [&[u8]; 7] = [b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat", b"Sun"];
    const MONTHS: [&[u8]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    if b.len() != 29 || b.get(3..5)? != b", " || b.get(25..)? != b" GMT" {
        return None;
    }
    let separators = [(7, b' '), (11, b' '), (16, b' '), (19, b':'), (22, b':')];
    if separators.iter().any(|&(i, c)| b.get(i) != Some(&c)) || !DAYS.contains(&b.get(..3)?) {
        return None;
    }
    let number = |range: core::ops::Range<usize>| -> Option<u64> {
        let digits = b.get(range)?;
        digits.iter().try_fold(0u64, |acc, &d| {
            d.is_ascii_digit().then(|| acc * 10 + u64::from(d - b'0'))
        })
    };
    let month = MONTHS.iter().position(|m| Some(*m) == b.get(8..11))? as u64 + 1;
    let (day, year) = (number(5..7)?, number(12..16)?);
    let (hour, minute, second) = (number(17..19)?, number(20..22)?, number(23..25)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if year < 1970 || day == 0 || day > month_days || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let days = days_since_epoch(year, month, day);
    let secs = days * 86_400 + hour * 3_600 + minute * 60 + second;
    Some(UnixMillis(secs * 1_000))
}

/// Days from 1970-01-01 to a proleptic Gregorian date (year ≥ 1970), after Howard Hinnant's
/// `days_from_civil`, with the year starting in March so the leap day comes last.
fn days_since_epoch(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let (era, yoe) = (y / 400, y % 400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: UnixMillis = UnixMillis(784_111_777_000); // Sun, 06 Nov 1994 08:49:37 GMT
    #[test]
    fn backoff_doubles_caps_and_saturates() {
        let p = RetryPolicy::default();
        let half = 1u32 << 31;
        // 250 × 2^(n-1) capped at 10 000, halved.
        let halves: [u64; 8] = [125, 125, 250, 500, 1_000, 2_000, 4_000, 5_000];
        for (n, want) in halves.iter().enumerate() {
            assert_eq!(backoff(&p, n as u32, half), Span(*want), "attempt {n}");
        }
        assert_eq!(backoff(&p, u32::MAX, half), Span(5_000));
        let huge = RetryPolicy {
            base_delay: Span(u64::MAX),
            max_delay: Span(u64::MAX),
            ..p
        };
        assert_eq!(
            backoff(&huge, 64, u32::MAX),
            Span(u64::MAX - (u64::MAX >> 32) - 1)
        );
    }

    #[test]
    fn http_date_matches_known_instants() {
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), Some(NOW));
        assert_eq!(
            parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"),
            Some(UnixMillis(0))
        );
        // date -u -d '2024-02-29 23:59:59' +%s → 1709251199
        let leap = parse_http_date("Thu, 29 Feb 2024 23:59:59 GMT");
        assert_eq!(leap, Some(UnixMillis(1_709_251_199_000)));
        assert_eq!(parse_http_date("Thu, 29 Feb 2023 23:59:59 GMT"), None);
        assert_eq!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), None);
        assert_eq!(parse_http_date("Sun Nov  6 08:49:37 1994"), None);
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 24:00:00 GMT"), None);
        assert_eq!(parse_http_date("Xyz, 06 Nov 1994 08:49:37 GMT"), None);
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 UTC"), None);
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(parse_retry_after(" 2 ", NOW), Some(Span(2_000)));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", NOW),
            Some(Span(30_000))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", NOW),
            Some(Span(0))
        );
        for bad in ["", "-1", "1.5", "2s", "soon"] {
            assert_eq!(parse_retry_after(bad, NOW), None, "{bad}");
        }
    }
}
