//! Where a route's idempotency key comes from (issue 15): the `Idempotency-Key` header (default),
//! another header (a provider's delivery id such as `X-GitHub-Delivery`), a JSON pointer into the
//! body (a Stripe event's `/id`, an AWS-style `/ClientToken`) or a form field. The sources are
//! tried in the configured order and the first one present wins; whatever the source, the value
//! obeys the same key rules ([`IdempotencyKey::parse`]: 1 to 255 visible ASCII characters).
//!
//! Header sources are decided when the headers arrive. When a body source comes before every
//! present header, the decision waits for the end of the body — which the filter's placement
//! (before the buffer filter) guarantees comes before anything is forwarded. Body sources keep
//! the body they search, bounded by `max_request_body`; sources that only read headers keep
//! nothing.

use crate::json::{JsonPointer, Value};
use crate::key::{IdempotencyKey, KeyError};
use crate::media_type::BodyKind;
use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

/// One place a key may be found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A request header (lowercase name); every occurrence must carry the same key.
    Header(String),
    /// A JSON pointer into a JSON body; the value must be a string or a number.
    Json(JsonPointer),
    /// A field of an `application/x-www-form-urlencoded` body (decoded name); repeated fields
    /// must carry the same key.
    Form(String),
}

impl KeySource {
    /// Says where the key was expected, for the "missing key" answer.
    pub fn describe(&self) -> String {
        match self {
            KeySource::Header(name) => format!("the {name} header"),
            KeySource::Json(pointer) => format!("the JSON body field {}", pointer.as_str()),
            KeySource::Form(name) => format!("the form field {name}"),
        }
    }
}

/// Says where a route looks for its key, in order (for the "missing key" answer).
pub fn describe_sources(sources: &[KeySource]) -> String {
    let mut out = String::new();
    for (i, source) in sources.iter().enumerate() {
        if i > 0 {
            out.push_str(if i + 1 == sources.len() { " or " } else { ", " });
        }
        out.push_str(&source.describe());
    }
    out
}

/// What the headers alone say about the key.
#[derive(Debug)]
pub enum KeyStart {
    /// Decided: the key (or none at all).
    Decided(Option<IdempotencyKey>),
    /// A body source may still decide: feed the body, then [`KeySearch::finish`].
    Body(KeySearch),
}

/// Per source, what the headers said (body sources are decided at the end).
#[derive(Debug)]
enum Slot {
    Header(Option<Result<IdempotencyKey, KeyError>>),
    Body,
}

/// A key search that waits for the body.
#[derive(Debug)]
pub struct KeySearch {
    sources: Arc<[KeySource]>,
    slots: Vec<Slot>,
    form: bool,
    body: Vec<u8>,
}

/// Starts the search from the request headers. `header` gives every value of a (lowercase)
/// header. An invalid value in the first header present is refused at once.
pub fn start<'h>(
    sources: &Arc<[KeySource]>,
    header: &dyn Fn(&str) -> Vec<&'h [u8]>,
) -> Result<KeyStart, KeyError> {
    let mut slots = Vec::with_capacity(sources.len());
    let mut body_first = false;
    for source in sources.iter() {
        match source {
            KeySource::Header(name) => {
                let values = header(name);
                let found = IdempotencyKey::parse_all(values.iter().copied()).transpose();
                if !body_first {
                    if let Some(found) = found {
                        return found.map(|key| KeyStart::Decided(Some(key)));
                    }
                }
                slots.push(Slot::Header(found));
            }
            _ => {
                body_first = true;
                slots.push(Slot::Body);
            }
        }
    }
    if !body_first {
        return Ok(KeyStart::Decided(None));
    }
    // The same classification as the `auto` fingerprint (one Content-Type field, its essence).
    let form = matches!(
        header("content-type").as_slice(),
        [value] if BodyKind::of_content_type(value) == BodyKind::Form
    );
    Ok(KeyStart::Body(KeySearch {
        sources: Arc::clone(sources),
        slots,
        form,
        body: Vec::new(),
    }))
}

impl KeySearch {
    /// A piece of the body, in order.
    pub fn update(&mut self, chunk: &[u8]) {
        self.body.extend_from_slice(chunk);
    }

    /// The body is complete: the first source present gives the key. A JSON source on a body
    /// that is not JSON, or a form source on a body that is not a form, is absent (the
    /// fingerprint decides whether such a body is acceptable at all).
    pub fn finish(self) -> Result<Option<IdempotencyKey>, KeyError> {
        let KeySearch {
            sources,
            slots,
            form,
            body,
        } = self;
        let json = sources
            .iter()
            .any(|s| matches!(s, KeySource::Json(_)))
            .then(|| {
                core::str::from_utf8(&body)
                    .ok()
                    .and_then(|text| Value::parse(text).ok())
            })
            .flatten();
        for (source, slot) in sources.iter().zip(slots) {
            let found = match (source, slot) {
                (_, Slot::Header(found)) => found,
                (KeySource::Json(pointer), Slot::Body) => json
                    .as_ref()
                    .and_then(|doc| pointer.resolve(doc))
                    .map(json_key),
                (KeySource::Form(name), Slot::Body) if form => form_key(&body, name).transpose(),
                _ => None,
            };
            if let Some(found) = found {
                return found.map(Some);
            }
        }
        Ok(None)
    }
}

fn json_key(value: &Value) -> Result<IdempotencyKey, KeyError> {
    match value {
        Value::String(s) => IdempotencyKey::parse(s.as_bytes()),
        Value::Number(n) => IdempotencyKey::parse(n.as_str().as_bytes()),
        _ => Err(KeyError::NotText),
    }
}

/// Every value of field `name` in a form body; absent → `Ok(None)`.
fn form_key(body: &[u8], name: &str) -> Result<Option<IdempotencyKey>, KeyError> {
    let values: Vec<Vec<u8>> = body
        .split(|b| *b == b'&')
        .filter_map(|pair| {
            let (n, v) = match pair.iter().position(|b| *b == b'=') {
                Some(at) => (&pair[..at], &pair[at + 1..]),
                None => (pair, &pair[pair.len()..]),
            };
            (form_decode(n) == name.as_bytes()).then(|| form_decode(v))
        })
        .collect();
    IdempotencyKey::parse_all(values.iter().map(Vec::as_slice))
}

/// `application/x-www-form-urlencoded` decoding: `+` is a space, `%XX` a byte; a `%` not followed
/// by two hex digits stays as it is (the WHATWG URL standard's rule).
fn form_decode(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while let Some(&b) = raw.get(i) {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = raw
                    .get(i + 1..i + 3)
                    .and_then(|h| core::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                if let Some(byte) = hex {
                    out.push(byte);
                    i += 3;
                    continue;
                }
                out.push(b'%');
            }
            b => out.push(b),
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn sources(list: &[KeySource]) -> Arc<[KeySource]> {
        list.to_vec().into()
    }

    fn header(name: &str) -> KeySource {
        KeySource::Header(name.into())
    }

    fn json(pointer: &str) -> KeySource {
        KeySource::Json(JsonPointer::parse(pointer).unwrap())
    }

    /// Runs a search over `headers` and a body delivered in 2-byte chunks.
    fn find(
        list: &[KeySource],
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<Option<String>, &'static str> {
        let sources = sources(list);
        let lookup = |name: &str| -> Vec<&[u8]> {
            headers
                .iter()
                .filter(|(n, _)| *n == name)
                .map(|(_, v)| v.as_bytes())
                .collect()
        };
        let found = match start(&sources, &lookup).map_err(|e| e.code())? {
            KeyStart::Decided(key) => Ok(key),
            KeyStart::Body(mut search) => {
                for chunk in body.as_bytes().chunks(2) {
                    search.update(chunk);
                }
                search.finish()
            }
        };
        found
            .map(|k| k.map(|k| k.as_str().into()))
            .map_err(|e| e.code())
    }

    #[test]
    fn headers_decide_without_the_body() {
        let sources = sources(&[header("idempotency-key")]);
        let start = start(&sources, &|_| vec![b"k1".as_slice()]).unwrap();
        assert!(matches!(start, KeyStart::Decided(Some(_))));
        assert_eq!(find(&[header("idempotency-key")], &[], ""), Ok(None));
        assert_eq!(
            find(
                &[header("x-github-delivery")],
                &[("x-github-delivery", "72d3162e-cc78")],
                ""
            ),
            Ok(Some("72d3162e-cc78".into()))
        );
    }

    #[test]
    fn first_present_source_wins() {
        let list = [json("/id"), header("x-delivery")];
        let hdr = [("x-delivery", "from-header")];
        assert_eq!(
            find(&list, &hdr, r#"{"id":"evt_1"}"#),
            Ok(Some("evt_1".into()))
        );
        assert_eq!(
            find(&list, &hdr, r#"{"other":1}"#),
            Ok(Some("from-header".into()))
        );
        assert_eq!(find(&list, &[], r#"{"other":1}"#), Ok(None));
        let list = [header("x-delivery"), json("/id")];
        let start = start(&sources(&list), &|n| {
            if n == "x-delivery" {
                vec![b"h".as_slice()]
            } else {
                vec![]
            }
        })
        .unwrap();
        assert!(
            matches!(start, KeyStart::Decided(Some(_))),
            "a header first needs no body"
        );
        assert_eq!(
            find(&list, &[], r#"{"id":"evt_1"}"#),
            Ok(Some("evt_1".into()))
        );
    }

    #[test]
    fn json_values() {
        let list = [json("/data/object/id"), json("/n"), json("/items/1")];
        assert_eq!(
            find(&list[..1], &[], r#"{"data":{"object":{"id":"ch_1"}}}"#),
            Ok(Some("ch_1".into()))
        );
        assert_eq!(
            find(&list[1..2], &[], r#"{"n":12345}"#),
            Ok(Some("12345".into()))
        );
        assert_eq!(
            find(&list[2..], &[], r#"{"items":["a","b"]}"#),
            Ok(Some("b".into()))
        );
        assert_eq!(
            find(&list[1..2], &[], r#"{"n":{"x":1}}"#),
            Err("key_not_text")
        );
        assert_eq!(find(&list[1..2], &[], r#"{"n":null}"#), Err("key_not_text"));
        // The same rules as the header: length, characters.
        assert_eq!(
            find(&list[1..2], &[], r#"{"n":"a b"}"#),
            Err("key_invalid_character")
        );
        assert_eq!(find(&list[1..2], &[], r#"{"n":""}"#), Err("key_empty"));
        let long = format!(r#"{{"n":"{}"}}"#, "a".repeat(256));
        assert_eq!(find(&list[1..2], &[], &long), Err("key_too_long"));
        assert_eq!(find(&list[1..2], &[], r#"{"n":"é"}"#), Err("key_non_ascii"));
        // Not JSON: absent (the fingerprint refuses such a body on JSON routes).
        assert_eq!(find(&list[1..2], &[], "n=1"), Ok(None));
    }

    #[test]
    fn form_fields() {
        let list = [KeySource::Form("client token".into())];
        let form = [(
            "content-type",
            "application/x-www-form-urlencoded; charset=utf-8",
        )];
        assert_eq!(
            find(&list, &form, "amount=5&client+token=abc%40x&z"),
            Ok(Some("abc@x".into()))
        );
        assert_eq!(
            find(&list, &form, "client%20token=a&client+token=a"),
            Ok(Some("a".into()))
        );
        assert_eq!(
            find(&list, &form, "client+token=a&client+token=b"),
            Err("key_conflicting")
        );
        assert_eq!(
            find(&list, &form, "client+token=a%20b"),
            Err("key_invalid_character")
        );
        assert_eq!(
            find(&list, &form, "client+token=50%"),
            Ok(Some("50%".into()))
        );
        assert_eq!(find(&list, &form, "amount=5"), Ok(None));
        // Not a form body: absent.
        assert_eq!(
            find(&list, &[("content-type", "text/plain")], "client+token=a"),
            Ok(None)
        );
    }

    #[test]
    fn describes_where_it_looked() {
        let list = [
            header("x-github-delivery"),
            json("/id"),
            KeySource::Form("id".into()),
        ];
        assert_eq!(
            describe_sources(&list),
            "the x-github-delivery header, the JSON body field /id or the form field id"
        );
    }
}
