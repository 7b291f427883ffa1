//! `problems`, compiled into the [`ProblemStyle`] every problem answer is written in.

use super::error::{invalid, Refusal};
use crate::policy::problems::{Compat, ProblemStyle, Styled};
use alloc::string::String;

/// The `problems` section as written.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProblemsConfig {
    pub(crate) type_base: Option<String>,
    pub(crate) describedby: Option<String>,
    pub(crate) compat: Option<Compat>,
}

/// The style `config` asks for; the default style without a section.
pub(super) fn compile(config: Option<&ProblemsConfig>) -> Result<ProblemStyle, Refusal> {
    let Some(config) = config else {
        return Ok(ProblemStyle::DEFAULT);
    };
    if config
        .type_base
        .as_deref()
        .is_some_and(|b| !is_uri_prefix(b))
    {
        return Err(invalid(
            "problems.type_base",
            &["must be a URI prefix such as \"https://errors.example.com/problems/\" or \"urn:example:problem:\" (a scheme, a colon, no spaces or quotes)"],
        ));
    }
    if config
        .describedby
        .as_deref()
        .is_some_and(|u| !is_http_url(u))
    {
        return Err(invalid(
            "problems.describedby",
            &["must be an absolute http:// or https:// URL with a host (no spaces, quotes or angle brackets)"],
        ));
    }
    Ok(ProblemStyle::new(Styled {
        type_base: config.type_base.clone(),
        describedby: config.describedby.clone(),
        compat: config.compat.unwrap_or(Compat::None),
    }))
}

/// Whether `text` can start a problem `type` URI (RFC 3986): a scheme (a letter, then letters,
/// digits, `+`, `-`, `.`), a colon, and only characters a URI may hold unescaped — nothing that
/// would need escaping in JSON or end a `Link` target.
fn is_uri_prefix(text: &str) -> bool {
    let Some((scheme, _)) = text.split_once(':') else {
        return false;
    };
    let mut letters = scheme.bytes();
    letters.next().is_some_and(|b| b.is_ascii_alphabetic())
        && letters.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
        && text.bytes().all(uri_byte)
}

/// Whether `text` is an absolute `http` or `https` URL with a host.
fn is_http_url(text: &str) -> bool {
    let after = |prefix: &str| match text.get(..prefix.len()) {
        Some(head) if head.eq_ignore_ascii_case(prefix) => text.get(prefix.len()..),
        _ => None,
    };
    let Some(rest) = after("https://").or_else(|| after("http://")) else {
        return false;
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    !host.is_empty() && text.bytes().all(uri_byte)
}

/// A byte a URI holds unescaped (RFC 3986's reserved and unreserved characters, and `%`).
fn uri_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'.'
                | b'_'
                | b'~'
                | b':'
                | b'/'
                | b'?'
                | b'#'
                | b'['
                | b']'
                | b'@'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b'%'
        )
}

#[cfg(test)]
mod tests {
    use crate::config::ConfigError;
    use crate::policy::problems::Compat;
    use crate::policy::{Policy, ProblemStyle};
    use alloc::string::String;

    #[test]
    fn type_bases_and_documentation_urls() {
        for good in [
            "urn:idemgate:problem:",
            "https://errors.example.com/problems/",
            "tag:example.com,2026:problem#",
        ] {
            assert!(super::is_uri_prefix(good), "{good}");
        }
        for bad in [
            "",
            "problems/",
            "1urn:x",
            "urn:a b",
            "urn:\"x",
            "urn:<x>",
            ":x",
        ] {
            assert!(!super::is_uri_prefix(bad), "{bad}");
        }
        for good in ["https://docs.example.com/idempotency", "HTTP://a"] {
            assert!(super::is_http_url(good), "{good}");
        }
        for bad in [
            "",
            "/docs",
            "ftp://example.com",
            "https://",
            "https:///x",
            "https://a/b c",
            "https://a/>",
        ] {
            assert!(!super::is_http_url(bad), "{bad}");
        }
    }

    fn compiled(text: &str) -> Result<Policy, ConfigError> {
        Policy::from_json(text, &|_| None)
    }

    fn refused_field(text: &str) -> String {
        match compiled(text) {
            Err(ConfigError::Invalid { field, .. }) => field,
            other => panic!("{text}: {other:?}"),
        }
    }

    fn syntax(text: &str) -> String {
        match compiled(text) {
            Err(ConfigError::Syntax { message }) => message,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn without_the_section_or_with_an_empty_one_the_style_is_the_default() {
        for text in ["{}", r#"{"problems": null}"#, r#"{"problems": {}}"#] {
            assert_eq!(
                compiled(text).unwrap().problems,
                ProblemStyle::DEFAULT,
                "{text}"
            );
        }
        let stripe = compiled(r#"{"problems": {"compat": "stripe"}}"#).unwrap();
        assert_eq!(stripe.problems.compat(), Compat::Stripe);
    }

    #[test]
    fn each_field_is_checked_at_its_path() {
        assert_eq!(
            refused_field(r#"{"problems": {"type_base": "problems/"}}"#),
            "problems.type_base"
        );
        assert_eq!(
            refused_field(r#"{"problems": {"type_base": "urn:a b:"}}"#),
            "problems.type_base"
        );
        assert_eq!(
            refused_field(r#"{"problems": {"describedby": "/docs"}}"#),
            "problems.describedby"
        );
        assert_eq!(
            refused_field(r#"{"problems": {"describedby": "ftp://example.com/x"}}"#),
            "problems.describedby"
        );
        assert!(syntax(r#"{"problems": {"compat": "paypal"}}"#)
            .starts_with("`problems.compat`: unknown value \"paypal\""));
        assert!(syntax(r#"{"problems": {"type": "x"}}"#).contains("type_base"));
        assert!(syntax(r#"{"problems": {"describedby": 1}}"#).starts_with("`problems.describedby`"));
        assert!(syntax(r#"{"problems": "stripe"}"#).starts_with("`problems`"));
    }
}
