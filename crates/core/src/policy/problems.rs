//! How the edge's problem answers are written (`problems`): the base of each problem `type`, the
//! documentation a `Link: <…>; rel="describedby"` points to, and whether the codes are Stripe's.
//! The HTTP meaning (status, the problem's code, `Retry-After`) does not depend on it.

use alloc::sync::Arc;

/// Every problem `type` is this prefix and the problem's stable code unless `problems.type_base`
/// says otherwise.
pub(crate) const DEFAULT_TYPE_BASE: &str = "urn:idemgate:problem:";

/// The configured style of problem answers; [`ProblemStyle::DEFAULT`] when `problems` is absent.
/// Shared, not copied: each request's machine keeps one for the answers it may make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProblemStyle {
    /// `problems.type_base`; `None`: [`DEFAULT_TYPE_BASE`].
    pub(crate) type_base: Option<Arc<str>>,
    /// `problems.describedby`: an absolute http(s) URL sent as `Link: <url>; rel="describedby"`.
    pub(crate) describedby: Option<Arc<str>>,
    /// `problems.compat`: which codes the problems carry.
    pub(crate) compat: Compat,
}

/// `problems.compat`: whose codes a problem's `code` and `error.code` members use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compat {
    /// idemgate's own codes (`request_in_flight`), as the problem `type` names them.
    None,
    /// Stripe's codes where Stripe has one (`idempotency_key_in_use`); the `type` keeps
    /// idemgate's, so a client of the IETF draft that matches on `type` sees no change.
    // Only a configuration document chooses it: a core built without `config` never does.
    #[cfg_attr(not(feature = "config"), allow(dead_code))]
    Stripe,
}

impl ProblemStyle {
    pub(crate) const DEFAULT: ProblemStyle = ProblemStyle {
        type_base: None,
        describedby: None,
        compat: Compat::None,
    };

    /// The prefix of every problem `type`.
    pub(crate) fn type_base(&self) -> &str {
        self.type_base.as_deref().unwrap_or(DEFAULT_TYPE_BASE)
    }

    /// The code a problem's `code` and `error.code` members carry for idemgate's `code`.
    pub(crate) fn code<'a>(&self, code: &'a str) -> &'a str {
        match (self.compat, code) {
            (Compat::Stripe, "request_in_flight") => "idempotency_key_in_use",
            _ => code,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_stripe_compatibility_renames_a_code() {
        let stripe = ProblemStyle {
            compat: Compat::Stripe,
            ..ProblemStyle::DEFAULT
        };
        assert_eq!(stripe.code("request_in_flight"), "idempotency_key_in_use");
        assert_eq!(stripe.code("key_reused"), "key_reused");
        assert_eq!(
            ProblemStyle::DEFAULT.code("request_in_flight"),
            "request_in_flight"
        );
        assert_eq!(ProblemStyle::DEFAULT.type_base(), DEFAULT_TYPE_BASE);
    }
}
