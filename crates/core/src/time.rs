//! Time as the host tells it. The core never reads a clock: every rule that depends on time takes
//! `now` as an argument, so tests and the harness can replay any moment (and clocks that jump).

use core::fmt;

/// Milliseconds since the Unix epoch, as reported by the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct UnixMillis(pub u64);

impl UnixMillis {
    /// `self + span`, saturating: a far-future expiry is still an expiry, never a wrap to the past.
    #[must_use]
    pub fn after(self, span: Span) -> UnixMillis {
        UnixMillis(self.0.saturating_add(span.0))
    }

    /// Time from `self` until `later` (zero when `later` has passed).
    #[must_use]
    pub(crate) fn until(self, later: UnixMillis) -> Span {
        Span(later.0.saturating_sub(self.0))
    }
}

/// A length of time in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Span(pub u64);

impl Span {
    pub const fn from_secs(secs: u64) -> Span {
        Span(secs.saturating_mul(1000))
    }

    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// Whole seconds, rounded up and at least one: a `Retry-After: 0` would invite a busy loop.
    pub(crate) const fn retry_after_secs(self) -> u64 {
        let secs = self.0.div_ceil(1000);
        if secs == 0 {
            1
        } else {
            secs
        }
    }
}

/// Why a human duration string was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpanError {
    /// Nothing, or no number before the unit.
    Empty,
    /// Not `<digits><unit>` pairs with units ms, s, m, h, d.
    Malformed,
    /// More than `u64` milliseconds.
    Overflow,
}

impl SpanError {
    pub fn code(&self) -> &'static str {
        match self {
            SpanError::Empty => "duration_empty",
            SpanError::Malformed => "duration_malformed",
            SpanError::Overflow => "duration_overflow",
        }
    }
}

impl SpanError {
    /// The text `Display` writes, without `core::fmt` (configuration errors quote it).
    pub(crate) fn text(&self) -> &'static str {
        match self {
            SpanError::Empty => "empty duration",
            SpanError::Malformed => {
                "expected a duration such as \"250ms\", \"30s\", \"5m\", \"24h\", \"7d\" or \"1h30m\""
            }
            SpanError::Overflow => "duration too large",
        }
    }
}

impl fmt::Display for SpanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

impl core::str::FromStr for Span {
    type Err = SpanError;

    /// Human durations as operators write them in configuration: `"30s"`, `"24h"`, `"1h30m"`.
    fn from_str(text: &str) -> Result<Span, SpanError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(SpanError::Empty);
        }
        let bytes = text.as_bytes();
        let mut total: u64 = 0;
        let mut i = 0;
        while i < bytes.len() {
            let start = i;
            let mut value: u64 = 0;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                value = value
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(u64::from(bytes[i] - b'0')))
                    .ok_or(SpanError::Overflow)?;
                i += 1;
            }
            if i == start {
                return Err(SpanError::Malformed);
            }
            let unit_start = i;
            while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
                i += 1;
            }
            // Bytes, not `&text[..]`: a `str` slice brings the panic path of a cut character
            // (and its `Debug` escaping) into the filter's `.wasm`, 4 KB with its tables.
            let per_unit: u64 = match bytes.get(unit_start..i) {
                Some(b"ms") => 1,
                Some(b"s") => 1_000,
                Some(b"m") => 60_000,
                Some(b"h") => 3_600_000,
                Some(b"d") => 86_400_000,
                _ => return Err(SpanError::Malformed),
            };
            let part = value.checked_mul(per_unit).ok_or(SpanError::Overflow)?;
            total = total.checked_add(part).ok_or(SpanError::Overflow)?;
        }
        Ok(Span(total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_human_durations() {
        assert_eq!("30s".parse::<Span>(), Ok(Span(30_000)));
        assert_eq!("24h".parse::<Span>(), Ok(Span(86_400_000)));
        assert_eq!("1h30m".parse::<Span>(), Ok(Span(5_400_000)));
        assert_eq!("250ms".parse::<Span>(), Ok(Span(250)));
        assert_eq!("".parse::<Span>(), Err(SpanError::Empty));
        assert_eq!("30".parse::<Span>(), Err(SpanError::Malformed));
        assert_eq!("s".parse::<Span>(), Err(SpanError::Malformed));
        assert_eq!("3 weeks".parse::<Span>(), Err(SpanError::Malformed));
        assert_eq!(
            "99999999999999999999d".parse::<Span>(),
            Err(SpanError::Overflow)
        );
    }

    #[test]
    fn retry_after_is_at_least_one_second_and_rounds_up() {
        assert_eq!(Span(0).retry_after_secs(), 1);
        assert_eq!(Span(1).retry_after_secs(), 1);
        assert_eq!(Span(1000).retry_after_secs(), 1);
        assert_eq!(Span(1001).retry_after_secs(), 2);
    }

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(
            UnixMillis(u64::MAX - 1).after(Span(10)),
            UnixMillis(u64::MAX)
        );
        assert_eq!(UnixMillis(10).until(UnixMillis(5)), Span(0));
    }
}
