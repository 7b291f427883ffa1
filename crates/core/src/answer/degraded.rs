//! The mark of a degraded edge: a guarded request the store could not decide for, let on
//! unprotected because the failure mode says `pass_through` (`docs/semantics.md` §5). The
//! upstream's answer reaches the client with [`Degraded::header`], so a client (and whoever reads
//! its logs) can tell that a retry of it may run again; the host adds it and counts it.

/// The header a degraded pass's answer gets: the edge's word, never replayed (nothing of such a
/// request is stored, and `replay_headers` may not name it, so one an upstream sent is not).
pub(crate) const DEGRADED_HEADER: &str = "idempotent-degraded";

/// Why the request went on without idempotency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Degraded {
    /// The key's store cell was full (`on_store_full: "pass_through"`).
    StoreFull,
    /// The store failed or could not be reached (`on_store_error: "pass_through"`).
    StoreUnavailable,
}

impl Degraded {
    /// The reason as the header and the counters name it.
    #[must_use]
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Degraded::StoreFull => "store_full",
            Degraded::StoreUnavailable => "store_unavailable",
        }
    }

    /// The header the upstream's answer gets: `Idempotent-Degraded: <reason>`.
    #[must_use]
    pub fn header(self) -> (&'static str, &'static str) {
        (DEGRADED_HEADER, self.reason())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reason_is_one_header_value() {
        assert_eq!(
            Degraded::StoreFull.header(),
            ("idempotent-degraded", "store_full")
        );
        assert_eq!(
            Degraded::StoreUnavailable.header(),
            ("idempotent-degraded", "store_unavailable")
        );
    }
}
