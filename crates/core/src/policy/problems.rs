//! How the edge's problem answers are written (`problems`): the base of each problem `type`, the
//! documentation a `Link: <…>; rel="describedby"` points to, and whether the codes are Stripe's.
//! The HTTP meaning (status, the problem's code, `Retry-After`) does not depend on it.

use alloc::string::String;
use alloc::sync::Arc;

/// Every problem `type` is this prefix and the problem's stable code unless `problems.type_base`
/// says otherwise.
pub(crate) const DEFAULT_TYPE_BASE: &str = "urn:idemgate:problem:";

/// The configured style of problem answers; [`ProblemStyle::DEFAULT`] when `problems` is absent.
/// One word, shared rather than copied: each request's machine keeps one for the answers it may
/// make, and the default (nothing configured) holds nothing at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProblemStyle(Option<Arc<Styled>>);

/// What a `problems` section configures.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Styled {
    /// `problems.type_base`; `None`: [`DEFAULT_TYPE_BASE`].
    pub(crate) type_base: Option<String>,
    /// `problems.describedby`: an absolute http(s) URL sent as `Link: <url>; rel="describedby"`.
    pub(crate) describedby: Option<String>,
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
    pub(crate) const DEFAULT: ProblemStyle = ProblemStyle(None);

    /// The style `styled` asks for; the default when it asks for nothing else.
    // Only a configuration document makes one: a core built without `config` never does.
    #[cfg_attr(not(feature = "config"), allow(dead_code))]
    pub(crate) fn new(styled: Styled) -> ProblemStyle {
        let default = Styled {
            type_base: None,
            describedby: None,
            compat: Compat::None,
        };
        ProblemStyle((styled != default).then(|| Arc::new(styled)))
    }

    /// The prefix of every problem `type`.
    pub(crate) fn type_base(&self) -> &str {
        self.0
            .as_ref()
            .and_then(|s| s.type_base.as_deref())
            .unwrap_or(DEFAULT_TYPE_BASE)
    }

    /// The documentation URL every problem links to, if one is configured.
    pub(crate) fn describedby(&self) -> Option<&str> {
        self.0.as_ref().and_then(|s| s.describedby.as_deref())
    }

    /// The code a problem's `code` and `error.code` members carry for idemgate's `code`.
    pub(crate) fn code<'a>(&self, code: &'a str) -> &'a str {
        let compat = self.0.as_ref().map_or(Compat::None, |s| s.compat);
        match (compat, code) {
            (Compat::Stripe, "request_in_flight") => "idempotency_key_in_use",
            _ => code,
        }
    }

    /// Whose codes the problems carry.
    #[cfg(test)]
    pub(crate) fn compat(&self) -> Compat {
        self.0.as_ref().map_or(Compat::None, |s| s.compat)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_stripe_compatibility_renames_a_code() {
        let stripe = ProblemStyle::new(Styled {
            type_base: None,
            describedby: None,
            compat: Compat::Stripe,
        });
        assert_eq!(stripe.code("request_in_flight"), "idempotency_key_in_use");
        assert_eq!(stripe.code("key_reused"), "key_reused");
        assert_eq!(
            ProblemStyle::DEFAULT.code("request_in_flight"),
            "request_in_flight"
        );
        assert_eq!(ProblemStyle::DEFAULT.type_base(), DEFAULT_TYPE_BASE);
    }
}
