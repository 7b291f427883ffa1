//! Where a route's idempotency key comes from: the `Idempotency-Key` header (default),
//! another header (a provider's delivery id such as `X-GitHub-Delivery`), a JSON pointer into the
//! body (a Stripe event's `/id`, an AWS-style `/ClientToken`), a form field, or a CloudEvent's
//! (source, id). The sources are tried in the configured order and the first one present wins;
//! whatever the source, the value obeys the same key rules ([`IdempotencyKey::parse`]: 1 to 255
//! visible ASCII characters).
//!
//! Header sources are decided when the headers arrive. When a body source comes before every
//! present header, the decision waits for the end of the body — which the filter's placement
//! (before the buffer filter) guarantees comes before anything is forwarded. Body sources keep
//! the body they search, bounded by `max_request_body`; sources that only read headers keep
//! nothing.
//!
//! Two rules keep a body source from being fooled: a JSON number is a key by its
//! value, as the fingerprint compares it (`100`, `1e2` and `100.0` are one key); and a body that
//! the route's body sources cannot read at all (not JSON for a JSON source, not a form for a form
//! source) is refused, never taken for "no key" — on a route whose key is optional that would let
//! the request pass unguarded.

use crate::hash::{to_hex, PartsHasher};
use crate::request::json::{JsonPointer, Value};
use crate::request::key::{IdempotencyKey, KeyError, MAX_KEY_LEN};
use crate::request::media_type::{essence, BodyKind};
use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

/// One place a key may be found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeySource {
    /// A request header (lowercase name); every occurrence must carry the same key.
    Header(String),
    /// A JSON pointer into a JSON body; the value must be a string or a number (a number is the
    /// key by its value, see `json_key`).
    Json(JsonPointer),
    /// A field of an `application/x-www-form-urlencoded` body (decoded name); repeated fields
    /// must carry the same key.
    Form(String),
    /// A CloudEvent's `source` and `id` together (the CloudEvents spec: events with the same
    /// source and id are duplicates): the `ce-source` and `ce-id` headers of binary mode, or the
    /// `/source` and `/id` members of a structured-mode body (`application/cloudevents+json`).
    /// Batched mode (`application/cloudevents-batch+json`) is refused: one request, many events,
    /// no one key.
    CloudEvent,
}

/// Binary-mode CloudEvent headers.
const CE_ID: &str = "ce-id";
const CE_SOURCE: &str = "ce-source";
/// Structured and batched CloudEvents media types.
const CE_STRUCTURED: &[u8] = b"application/cloudevents+json";
const CE_BATCH: &[u8] = b"application/cloudevents-batch+json";
/// Domain tag of the key made from a CloudEvent's (source, id).
const CE_KEY_TAG: &str = "idemgate.cloudevent.v1";

impl KeySource {
    /// Says where the key was expected, for the "missing key" answer.
    pub(crate) fn describe(&self) -> String {
        match self {
            KeySource::Header(name) => format!("the {name} header"),
            KeySource::Json(pointer) => format!("the JSON body field {}", pointer.as_str()),
            KeySource::Form(name) => format!("the form field {name}"),
            KeySource::CloudEvent => {
                String::from("the CloudEvent's source and id (ce-source and ce-id headers, or a structured event's body)")
            }
        }
    }
}

/// Says where a route looks for its key, in order (for the "missing key" answer).
pub(crate) fn describe_sources(sources: &[KeySource]) -> String {
    let mut out = String::new();
    for (i, source) in sources.iter().enumerate() {
        if i > 0 {
            out.push_str(if i + 1 == sources.len() { " or " } else { ", " });
        }
        out.push_str(&source.describe());
    }
    out
}

/// Why a key search refused the request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceError {
    /// A source held a value that is not a valid key.
    Key(KeyError),
    /// The key comes from the body and no body source of the route can read this body (not
    /// JSON for a JSON source, not a form for a form source).
    BodyUnreadable,
    /// A CloudEvent names an id without a source, or a source without an id.
    CloudEventIncomplete,
    /// A batch of CloudEvents in one request.
    CloudEventsBatch,
}

impl From<KeyError> for SourceError {
    fn from(e: KeyError) -> SourceError {
        SourceError::Key(e)
    }
}

impl SourceError {
    pub fn code(&self) -> &'static str {
        match self {
            SourceError::Key(e) => e.code(),
            SourceError::BodyUnreadable => "key_body_unreadable",
            SourceError::CloudEventIncomplete => "cloudevent_incomplete",
            SourceError::CloudEventsBatch => "cloudevents_batch_unsupported",
        }
    }
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceError::Key(e) => e.fmt(f),
            SourceError::BodyUnreadable => f.write_str(
                "this endpoint reads its idempotency key from the body, and the body is not in a form it can read (JSON or a form, as configured)",
            ),
            SourceError::CloudEventIncomplete => f.write_str(
                "a CloudEvent needs both its source and its id (ce-source and ce-id, or the structured event's source and id)",
            ),
            SourceError::CloudEventsBatch => f.write_str(
                "batched CloudEvents (application/cloudevents-batch+json) are not accepted: deliver each event in its own request, in binary or structured mode",
            ),
        }
    }
}

/// What the headers alone say about the key.
#[derive(Debug)]
pub(crate) enum KeyStart {
    /// Decided: the key (or none at all).
    Decided(Option<IdempotencyKey>),
    /// A body source may still decide: feed the body, then [`KeySearch::finish`].
    Body(KeySearch),
}

/// Per source, what the headers said (body sources are decided at the end).
#[derive(Debug)]
enum Slot {
    Header(Option<Result<IdempotencyKey, SourceError>>),
    Body,
}

/// A key search that waits for the body.
#[derive(Debug)]
pub(crate) struct KeySearch {
    sources: Arc<[KeySource]>,
    slots: Vec<Slot>,
    form: bool,
    body: Vec<u8>,
}

/// Starts the search from the request headers. `header` gives every value of a (lowercase)
/// header. An invalid value in the first header present is refused at once.
pub(crate) fn start<'h>(
    sources: &Arc<[KeySource]>,
    header: &dyn Fn(&str) -> Vec<&'h [u8]>,
) -> Result<KeyStart, SourceError> {
    // Header sources alone (the common route) need no Content-Type and keep no slots: the
    // first one present decides, as in the loop below.
    if sources.iter().all(|s| matches!(s, KeySource::Header(_))) {
        for source in sources.iter() {
            if let KeySource::Header(name) = source {
                if let Some(key) = IdempotencyKey::parse_all(header(name).iter().copied())? {
                    return Ok(KeyStart::Decided(Some(key)));
                }
            }
        }
        return Ok(KeyStart::Decided(None));
    }
    let content_type = header("content-type");
    // The same classification as the `auto` fingerprint: one Content-Type field, its essence.
    let one_type = match content_type.as_slice() {
        [value] => Some(essence(value)),
        _ => None,
    };
    let mut slots = Vec::with_capacity(sources.len());
    let mut body_first = false;
    for source in sources.iter() {
        let found = match source {
            KeySource::Header(name) => IdempotencyKey::parse_all(header(name).iter().copied())
                .map_err(SourceError::from)
                .transpose(),
            KeySource::CloudEvent
                if content_type
                    .iter()
                    .any(|v| essence(v).eq_ignore_ascii_case(CE_BATCH)) =>
            {
                Some(Err(SourceError::CloudEventsBatch))
            }
            KeySource::CloudEvent
                if !one_type.is_some_and(|t| t.eq_ignore_ascii_case(CE_STRUCTURED)) =>
            {
                cloud_event_headers(header)
            }
            KeySource::CloudEvent | KeySource::Json(_) | KeySource::Form(_) => {
                body_first = true;
                slots.push(Slot::Body);
                continue;
            }
        };
        if !body_first {
            if let Some(found) = found {
                return found.map(|key| KeyStart::Decided(Some(key)));
            }
        }
        slots.push(Slot::Header(found));
    }
    if !body_first {
        return Ok(KeyStart::Decided(None));
    }
    let form = one_type.is_some_and(|t| BodyKind::of_content_type(t) == BodyKind::Form);
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

    /// The body so far (a route's pass-through reads the same copy).
    pub(crate) fn body(&self) -> &[u8] {
        &self.body
    }

    /// The body is complete: the first source present gives the key. A body source that cannot
    /// read this body is passed over when another body source of the route can read it; when
    /// none can, the body is refused ([`SourceError::BodyUnreadable`]) rather than found keyless.
    pub fn finish(self) -> Result<Option<IdempotencyKey>, SourceError> {
        let KeySearch {
            sources,
            slots,
            form,
            body,
        } = self;
        let json = slots
            .iter()
            .zip(sources.iter())
            .any(|(slot, source)| {
                matches!(
                    (slot, source),
                    (Slot::Body, KeySource::Json(_) | KeySource::CloudEvent)
                )
            })
            .then(|| {
                core::str::from_utf8(&body)
                    .ok()
                    .and_then(|text| Value::parse(text).ok())
            })
            .flatten();
        let reads = |source: &KeySource| match source {
            KeySource::Json(_) | KeySource::CloudEvent => json.is_some(),
            KeySource::Form(_) => form,
            KeySource::Header(_) => false,
        };
        let readable = sources
            .iter()
            .zip(slots.iter())
            .any(|(source, slot)| matches!(slot, Slot::Body) && reads(source));
        // A body no body source reads is refused, unless a header source after them has the
        // key (Pub/Sub's unwrapped push: a raw body, the id in a header).
        let mut unreadable = None;
        for (source, slot) in sources.iter().zip(slots) {
            let found = match slot {
                Slot::Header(found) => found,
                Slot::Body if !readable => {
                    unreadable = Some(SourceError::BodyUnreadable);
                    None
                }
                Slot::Body if !reads(source) => None,
                Slot::Body => match source {
                    KeySource::Json(pointer) => json
                        .as_ref()
                        .and_then(|doc| pointer.resolve(doc))
                        .map(|v| json_key(v).map_err(SourceError::from)),
                    KeySource::CloudEvent => json.as_ref().and_then(cloud_event_body),
                    KeySource::Form(name) => {
                        form_key(&body, name).map_err(SourceError::from).transpose()
                    }
                    KeySource::Header(_) => None,
                },
            };
            if let Some(found) = found {
                return found.map(Some);
            }
        }
        match unreadable {
            Some(refusal) => Err(refusal),
            None => Ok(None),
        }
    }
}

/// A key from a JSON value: a string as it is, a number by its value (one spelling per value,
/// as the fingerprint compares numbers: `100`, `1e2` and `100.0` are the key `100`).
fn json_key(value: &Value) -> Result<IdempotencyKey, KeyError> {
    match value {
        Value::String(s) => IdempotencyKey::parse(s.as_bytes()),
        Value::Number(n) => match n.value_text(MAX_KEY_LEN) {
            Some(text) => IdempotencyKey::parse(text.as_bytes()),
            None => Err(KeyError::NotText),
        },
        _ => Err(KeyError::NotText),
    }
}

/// Binary mode: `ce-source` and `ce-id`, each sent once (or repeated alike).
fn cloud_event_headers<'h>(
    header: &dyn Fn(&str) -> Vec<&'h [u8]>,
) -> Option<Result<IdempotencyKey, SourceError>> {
    let one = |name: &str| -> Result<Option<&'h [u8]>, SourceError> {
        let values = header(name);
        let mut values = values.iter().map(|v| crate::request::key::trim_ows(v));
        let first = values.next();
        match first {
            Some(first) if values.all(|v| v == first) => Ok(Some(first)),
            Some(_) => Err(SourceError::Key(KeyError::Conflicting)),
            None => Ok(None),
        }
    };
    let pair = one(CE_SOURCE).and_then(|source| Ok((source, one(CE_ID)?)));
    match pair {
        Err(e) => Some(Err(e)),
        Ok((None, None)) => None,
        Ok((Some(source), Some(id))) => Some(cloud_event_key(source, id)),
        Ok(_) => Some(Err(SourceError::CloudEventIncomplete)),
    }
}

/// Structured mode: the event's `source` and `id` members (strings).
fn cloud_event_body(doc: &Value) -> Option<Result<IdempotencyKey, SourceError>> {
    let text = |name: &str| doc.get(name).map(|v| v.as_str().map(str::as_bytes));
    match (text("source"), text("id")) {
        (None, None) => None,
        (Some(Some(source)), Some(Some(id))) => Some(cloud_event_key(source, id)),
        _ => Some(Err(SourceError::CloudEventIncomplete)),
    }
}

/// The key of a CloudEvent: a domain-separated hash of (source, id), so any source URI and any id
/// (the spec allows both to be long and to hold any character) make one valid key, and the same
/// id from two sources makes two.
fn cloud_event_key(source: &[u8], id: &[u8]) -> Result<IdempotencyKey, SourceError> {
    if source.is_empty() || id.is_empty() {
        return Err(SourceError::CloudEventIncomplete);
    }
    let mut hasher = PartsHasher::new(CE_KEY_TAG);
    hasher.part(source).part(id);
    let mut text = String::from("ce:");
    text.push_str(&to_hex(&hasher.finish()));
    IdempotencyKey::parse(text.as_bytes()).map_err(SourceError::from)
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

/// The decoded value of form field `name` in a form body: its first occurrence, `None` if absent
/// (the sequencer reads the resource id and event type this way, [`crate::order`]).
pub(crate) fn form_field(body: &[u8], name: &str) -> Option<Vec<u8>> {
    body.split(|b| *b == b'&').find_map(|pair| {
        let (n, v) = match pair.iter().position(|b| *b == b'=') {
            Some(at) => (&pair[..at], &pair[at + 1..]),
            None => (pair, &pair[pair.len()..]),
        };
        (form_decode(n) == name.as_bytes()).then(|| form_decode(v))
    })
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
mod tests;
