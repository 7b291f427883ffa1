//! Group `signature`: input `{"scheme", "secret" | "secrets": [..], "tolerance"?, "header"?,
//! "headers"?: {name: value}, "body" | "body_hex", "chunks"?, "now_ms"}`; output `true` when the
//! delivery's signature verifies against the body (`crate::client::signature`), `"late"` when it
//! verifies but was signed longer ago than the tolerance (only a stored answer may answer it),
//! else the error code. Schemes: `github`, `stripe`, `standard_webhooks`, `svix`, `shopify`, `slack`. `header` is
//! the value of the scheme's signature header; `headers` gives any headers by lowercase name (the
//! other headers a scheme signs, or the signature header itself); a header in neither is absent.

use crate::client::signature::{Freshness, SignatureRule, SignatureScheme, DEFAULT_TOLERANCE};
use crate::conformance::{bytes_field, opt_str_field, split_chunks, str_field, u64_field, Outcome};
use crate::request::json::Value;
use crate::time::{Span, UnixMillis};
use alloc::string::{String, ToString};
use alloc::vec::Vec;

pub fn eval(input: &Value) -> Outcome {
    let tolerance = match opt_str_field(input, "tolerance")? {
        Some(text) => text.parse::<Span>().map_err(|e| String::from(e.code()))?,
        None => DEFAULT_TOLERANCE,
    };
    let scheme = match str_field(input, "scheme")? {
        "github" => SignatureScheme::GitHub,
        "stripe" => SignatureScheme::Stripe { tolerance },
        "standard_webhooks" => SignatureScheme::StandardWebhooks { tolerance },
        "svix" => SignatureScheme::Svix { tolerance },
        "shopify" => SignatureScheme::Shopify,
        "slack" => SignatureScheme::Slack { tolerance },
        _ => return Err("vector_bad_input:scheme".into()),
    };
    let secrets: Vec<&str> = match (opt_str_field(input, "secret")?, input.get("secrets")) {
        (Some(secret), None) => alloc::vec![secret],
        (None, Some(list)) => list
            .as_array()
            .and_then(|items| items.iter().map(Value::as_str).collect())
            .ok_or("vector_bad_input:secrets")?,
        _ => return Err("vector_bad_input:secret".into()),
    };
    let secrets: Vec<&[u8]> = secrets.iter().map(|s| s.as_bytes()).collect();
    let rule = SignatureRule::new(scheme, &secrets).map_err(|e| e.code().to_string())?;
    let mut headers: Vec<(&str, &[u8])> = Vec::new();
    if let Some(value) = opt_str_field(input, "header")? {
        headers.push((scheme.header(), value.as_bytes()));
    }
    match input.get("headers") {
        None => {}
        Some(Value::Object(members)) => {
            for (name, value) in members {
                let value = value.as_str().ok_or("vector_bad_input:headers")?;
                headers.push((name, value.as_bytes()));
            }
        }
        Some(_) => return Err("vector_bad_input:headers".into()),
    }
    let lookup = |name: &str| -> Vec<&[u8]> {
        headers
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, v)| *v)
            .collect()
    };
    let now = UnixMillis(u64_field(input, "now_ms")?);
    let body = bytes_field(input, "body")?.ok_or("vector_bad_input:body")?;
    let mut check = rule.start(&lookup, now).map_err(|e| e.code().to_string())?;
    for chunk in split_chunks(&body, input.get("chunks"))? {
        check.update(chunk);
    }
    check
        .verify()
        .map(|freshness| match freshness {
            Freshness::Fresh => Value::Bool(true),
            Freshness::Late => Value::String("late".into()),
        })
        .map_err(|e| e.code().to_string())
}
