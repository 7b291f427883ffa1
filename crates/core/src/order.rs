//! The sequencer of a callback route (`docs/semantics.md` §8 and §11): each resource a
//! provider's events are about (an order, a subscription) keeps its state by the route's table,
//! so a repeated, stale or illegal event is acknowledged without reaching the upstream, and an
//! early one is sent back to be delivered again later.
//!
//! Sans-IO like the rest of the core: `OrderRule::read` turns a request's headers and body into
//! the resource and the event; [`resource::begin`] and [`resource::settle`] are the rules, pure
//! functions over the resource's record (`Option<&Resource>`) and the time the host passes in;
//! [`crate::store::ordering`] runs them on the local store's cells and [`crate::store::remote`]
//! carries them to the store service, so every store applies the same rules. What the edge does
//! with each outcome is [`crate::guard::sequencer`]; what each answers is [`crate::answer::order`].
//!
//! `precondition: "if-match"` is here too ([`Precondition`]): the edge only checks that an update
//! names a version (`If-Match`, RFC 9110 §13.1.1); the origin compares it and answers 412.

use crate::client::scope::{QuotaTag, Scope, StorageKey};
use crate::order::transition::{check_if_match, DeclaredTable, PreconditionError};
use crate::request::fingerprint::FingerprintBuilder;
use crate::request::json::Value;
use crate::request::key::trim_ows;
use crate::request::key_source::KeySource;
use crate::time::Span;
use alloc::string::String;
use alloc::vec::Vec;

pub mod resource;
pub mod transition;

pub(crate) use crate::record::resource::Resource;
pub(crate) use resource::begin;
pub(crate) use resource::creates;
pub(crate) use resource::settle;
pub(crate) use resource::Begin;
pub(crate) use resource::BeginOutcome;
pub(crate) use resource::SettleOutcome;

/// The header every ordered answer carries: `applied`, `already-applied`, `illegal` or `early`.
pub(crate) const ORDER_HEADER: &str = "idemgate-order";

/// Domain tag of a resource's storage key: never equal to an idempotency key's.
const RESOURCE_KEY_TAG: &str = "idemgate-resource-key-v1";

/// The longest resource id or event type read (longer values are absent: no provider sends them).
pub(crate) const MAX_FIELD_LEN: usize = 255;

/// Defaults of `routes[].order.early` (read by the configuration).
#[cfg(feature = "config")]
pub(crate) mod defaults {
    pub(crate) const RETRY_AFTER: &str = "10s";
}

/// `routes[].order`, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OrderRule {
    /// Where the resource id is (a header, a JSON pointer or a form field).
    pub(crate) resource: KeySource,
    /// Where the event type is.
    pub(crate) event: KeySource,
    pub(crate) table: DeclaredTable,
    /// The `Retry-After` of an early event's 409.
    pub(crate) retry_after: Span,
    /// Forward an early event anyway once this long has passed since the edge first saw it
    /// (`None`: never).
    pub(crate) forward_after: Option<Span>,
}

/// What a request is to the sequencer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OrderFacts {
    /// No event type, or one the table does not name: handled as without `order`.
    NotOrdered,
    /// A tracked event without a resource id: refused (400 `order_resource_missing`).
    ResourceMissing,
    Ordered {
        resource: String,
        event: String,
    },
}

impl OrderRule {
    /// Whether a source is in the body (the host must keep the body for [`OrderRule::read`]).
    pub(crate) fn needs_body(&self) -> bool {
        [&self.resource, &self.event]
            .iter()
            .any(|s| !matches!(s, KeySource::Header(_)))
    }

    /// Whether the table names `event` (an event of any other type is not ordered).
    pub(crate) fn tracks(&self, event: &str) -> bool {
        self.table.table().has_event(event)
    }

    /// Reads the event type and resource id from the request. `header` gives every value of a
    /// lowercase header name; `body` is the whole body (empty when no source needs it).
    pub(crate) fn read<'h>(
        &self,
        header: &dyn Fn(&str) -> Vec<&'h [u8]>,
        body: &[u8],
    ) -> OrderFacts {
        let json = self
            .needs_body()
            .then(|| {
                core::str::from_utf8(body)
                    .ok()
                    .and_then(|t| Value::parse(t).ok())
            })
            .flatten();
        let field = |source: &KeySource| field(source, header, json.as_ref(), body);
        let Some(event) = field(&self.event) else {
            return OrderFacts::NotOrdered;
        };
        if !self.tracks(&event) {
            return OrderFacts::NotOrdered;
        }
        match field(&self.resource) {
            Some(resource) => OrderFacts::Ordered { resource, event },
            None => OrderFacts::ResourceMissing,
        }
    }
}

/// A source's value as text: a header's first value, a JSON string, or a JSON number's decimal
/// text (order 7 → `"7"`), a form field's decoded value. Empty, over [`MAX_FIELD_LEN`], not UTF-8
/// or another JSON type: absent.
fn field<'h>(
    source: &KeySource,
    header: &dyn Fn(&str) -> Vec<&'h [u8]>,
    json: Option<&Value>,
    body: &[u8],
) -> Option<String> {
    let text = match source {
        KeySource::Header(name) => {
            let values = header(name);
            let first = crate::request::key::trim_ows(values.first()?);
            String::from(core::str::from_utf8(first).ok()?)
        }
        KeySource::Json(pointer) => match pointer.resolve(json?)? {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.value_text(MAX_FIELD_LEN)?,
            _ => return None,
        },
        KeySource::Form(name) => {
            String::from_utf8(crate::request::key_source::form_field(body, name)?).ok()?
        }
        _ => return None,
    };
    (!text.is_empty() && text.len() <= MAX_FIELD_LEN).then_some(text)
}

impl StorageKey {
    /// The storage key of a resource's state record: the route's scope (a callback route is its
    /// own scope) and the resource id, under a tag of its own, so no idempotency key can name it.
    pub(crate) fn resource(scope: Scope<'_>, resource: &str) -> StorageKey {
        let mut hasher = crate::hash::PartsHasher::new(RESOURCE_KEY_TAG);
        hasher
            .part(scope.source.as_bytes())
            .part(scope.value)
            .part(resource.as_bytes());
        StorageKey::tagged(hasher.finish(), QuotaTag::of(scope))
    }
}

/// `routes[].precondition`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Precondition {
    /// `"if-match"`: PUT, PATCH and DELETE must carry a well-formed `If-Match` that names the
    /// version they read; `If-Match: *` (any version) is refused, since an update that names none
    /// can overwrite a change it never saw.
    IfMatch,
    /// `"if-match-or-any"`: as [`Precondition::IfMatch`], and `If-Match: *` is accepted too
    /// (the resource exists, whatever its version), for updates that do not depend on it.
    IfMatchOrAny,
}

/// Why a request was refused by a route's precondition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum PreconditionProblem {
    /// 428 `precondition_required` (RFC 6585).
    Required,
    /// 400 `precondition_malformed`.
    Malformed,
    /// 428 `precondition_version_required`: `If-Match: *` on a route that wants a version.
    VersionRequired,
}

impl PreconditionProblem {
    /// What a host counts.
    pub(crate) fn events(&self) -> crate::events::Events {
        use crate::events::{Event, Events};
        match self {
            PreconditionProblem::Required | PreconditionProblem::VersionRequired => {
                Events::of(&[Event::PreconditionRequired])
            }
            PreconditionProblem::Malformed => Events::of(&[Event::PreconditionMalformed]),
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            PreconditionProblem::Required => "precondition_required",
            PreconditionProblem::Malformed => "precondition_malformed",
            PreconditionProblem::VersionRequired => "precondition_version_required",
        }
    }
}

impl Precondition {
    /// Checks a request: `if_match` holds every `If-Match` value. Methods other than PUT, PATCH
    /// and DELETE pass. Several fields are one list (RFC 9110 §5.3), so each must be well formed.
    /// The edge never compares versions: it cannot know the current one.
    pub(crate) fn check(
        &self,
        method: &str,
        if_match: &[&[u8]],
    ) -> Result<(), PreconditionProblem> {
        if !matches!(method, "PUT" | "PATCH" | "DELETE") {
            return Ok(());
        }
        if if_match.is_empty() {
            return Err(PreconditionProblem::Required);
        }
        for value in if_match {
            // The grammar is `check_if_match`'s; any version is "current" for the syntax check,
            // so only a malformed value fails.
            if let Err(PreconditionError::Malformed) = check_if_match(Some(value), "\"\"") {
                return Err(PreconditionProblem::Malformed);
            }
            if *self == Precondition::IfMatch && trim_ows(value) == b"*" {
                return Err(PreconditionProblem::VersionRequired);
            }
        }
        Ok(())
    }

    /// Makes the request's `If-Match` part of its fingerprint (`headers`: every request header,
    /// lowercase names): the same key at another version is another request, so 422.
    pub(crate) fn bind<'h, I>(&self, fingerprint: &mut FingerprintBuilder, headers: I)
    where
        I: IntoIterator<Item = (&'h str, &'h [u8])>,
    {
        let values: Vec<&[u8]> = headers
            .into_iter()
            .filter(|(name, _)| name.eq_ignore_ascii_case("if-match"))
            .map(|(_, value)| value)
            .collect();
        fingerprint.bind_if_match(&values);
    }
}

#[cfg(test)]
mod tests;
