//! A callback route's admission over arbitrary bodies: the key and pass-through a body decides
//! (the `sns` and `pubsub-push` presets, and a `pass_through` read from the body behind a header
//! key). Input: one byte choosing the route, a split spec (see `Input::splits`), the body.
//! Checks: the answer is the same whole, cut at the given points and one byte per chunk; a body
//! passes unguarded exactly when the route's pass-through field is one of its values; an SNS key
//! is always the body's `MessageId` (a string, or a number by its value), never the headers' id;
//! a Pub/Sub body id wins over the header's.
#![no_main]

use idemgate_core::decision::admission::admit;
use idemgate_core::policy::Policy;
use idemgate_core::request::key::IdempotencyKey;
use idemgate_core::time::UnixMillis;
use idemgate_core_fuzz::{chunks, Input, BYTEWISE_MAX};
use idemgate_json::{JsonPointer, Value};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

const ROUTES: &str = r#"{"routes": [
    {"prefix": "/sns", "preset": "sns"},
    {"prefix": "/push", "preset": "pubsub-push"},
    {"prefix": "/h", "kind": "callback", "key_from": [{"header": "x-id"}],
     "pass_through": {"json": "/kind", "values": ["ping"]}}
]}"#;

/// Headers an attacker would forge: ids and a confirmation type that the body must overrule.
const HEADERS: &[(&str, &str)] = &[
    ("x-amz-sns-message-id", "header-id"),
    ("x-amz-sns-message-type", "SubscriptionConfirmation"),
    ("x-goog-pubsub-message-id", "header-id"),
    ("x-id", "header-id"),
];

fn policy() -> &'static Policy {
    static POLICY: OnceLock<Policy> = OnceLock::new();
    POLICY.get_or_init(|| Policy::from_json(ROUTES, &|_| None).expect("the routes compile"))
}

fn header(name: &str) -> Vec<&'static [u8]> {
    HEADERS
        .iter()
        .filter(|(n, _)| *n == name)
        .map(|(_, v)| v.as_bytes())
        .collect()
}

/// The admission's answer for `body` cut into `pieces`: the key's text, or the refusal's code.
fn run(route: usize, pieces: &[&[u8]]) -> Result<Option<String>, &'static str> {
    let route = &policy().routes[route];
    let mut admission =
        admit(route, &header, UnixMillis(1_700_000_000_000)).map_err(|e| e.code())?;
    assert!(admission.needs_body());
    for piece in pieces {
        admission.update(piece);
    }
    admission
        .finish()
        .map(|key| key.map(|k| k.key.as_str().to_string()))
        .map_err(|e| e.code())
}

/// The string at `pointer` of `body`, read with the core's own JSON reader.
fn field(body: &[u8], pointer: &str) -> Option<String> {
    let doc = Value::parse(std::str::from_utf8(body).ok()?).ok()?;
    let pointer = JsonPointer::parse(pointer).ok()?;
    Some(pointer.resolve(&doc)?.as_str()?.to_string())
}

/// The key a body field at `pointer` gives: a string read as an `Idempotency-Key` value is
/// (optional whitespace around it dropped, an sf-string unquoted), a number by its value, one
/// spelling per value (`280`, `2.8e2` → `280`; 255 digits at most written plainly, as a key is).
fn key_field(body: &[u8], pointer: &str) -> Option<String> {
    let doc = Value::parse(std::str::from_utf8(body).ok()?).ok()?;
    let value = JsonPointer::parse(pointer).ok()?.resolve(&doc)?;
    let text = match value {
        Value::Number(n) => n.value_text(255)?,
        other => other.as_str()?.to_string(),
    };
    Some(
        IdempotencyKey::parse(text.as_bytes())
            .ok()?
            .as_str()
            .to_string(),
    )
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let route = usize::from(input.byte() % 3);
    let cuts = input.splits();
    let body = input.rest();

    let whole = run(route, &[body]);
    assert_eq!(run(route, &chunks(body, &cuts)), whole, "cut at {cuts:?}");
    if body.len() <= BYTEWISE_MAX {
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(run(route, &bytes), whole, "one byte per chunk");
    }

    match route {
        0 => {
            let kind = field(body, "/Type");
            let confirmation = kind
                .as_deref()
                .is_some_and(|k| k == "SubscriptionConfirmation" || k == "UnsubscribeConfirmation");
            assert_eq!(whole == Ok(None), confirmation, "{whole:?}");
            if let Ok(Some(key)) = &whole {
                assert_eq!(Some(key), key_field(body, "/MessageId").as_ref());
            }
        }
        1 => {
            if let (Ok(Some(key)), Some(id)) = (&whole, key_field(body, "/message/messageId")) {
                assert_eq!(key, &id, "the body's id wins over the header's");
            }
        }
        _ => {
            let ping = field(body, "/kind").is_some_and(|k| k == "ping");
            assert_eq!(whole == Ok(None), ping, "{whole:?}");
            if !ping {
                assert_eq!(whole, Ok(Some("header-id".to_string())));
            }
        }
    }
});
