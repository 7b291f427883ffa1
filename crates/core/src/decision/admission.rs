//! What a guarded request must show before it may be claimed, and in which order — decided here,
//! once, so every host admits alike. A host hands over the route and the request's
//! headers, feeds the body, and gets back the key (or none) or the answer that refuses it.
//!
//! The order: (1) on a route with a signature rule, the signature header must be present, well
//! formed and (Stripe) fresh — an unsigned delivery learns nothing else about the route; (2) the
//! key from the first header source present; if a body source comes first, (3) at the end of the
//! body the signature is verified before the body's key is read, so an unsigned body can neither
//! name a key nor find a record. A delivery signed longer ago than the tolerance allows, whose
//! signature matches, is admitted `Freshness::Late`: it may only be answered by the
//! acknowledgement stored for its key ([`crate::guard`]), so it needs a key — without one it is
//! refused as stale. A key found, from whichever source, is then held to the route's
//! `key_format` (`crate::request::key_format`): refused (`key_format`), or taken for no key
//! where the route ignores mismatches. A route that requires a key refuses a request that has
//! none with an answer naming where it looked. The one-time token is checked after the claim (the
//! idempotency decision comes first, `docs/semantics.md` §7), by the host's token path.

use crate::client::scope::Scope;
use crate::client::signature::{Freshness, SignatureCheck, SignatureError};
use crate::decision::ResponseFacts;
use crate::policy::{KeyRequirement, PassThrough, Route, RouteKind};
use crate::request::key::{IdempotencyKey, KeyError};
use crate::request::key_format::{KeyRules, Screened};
use crate::request::key_source::{self, describe_sources, KeySearch, KeyStart, SourceError};
use crate::time::UnixMillis;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

pub(crate) use crate::client::scope::ROUTE_SCOPE_SOURCE;

/// Why a request is refused before it is claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    InvalidKey(KeyError),
    /// The route requires a key and no source had one; `sources` says where it looked.
    MissingKey {
        sources: String,
    },
    Signature(SignatureError),
    /// The key's source could not be read: a body no body source can read, an incomplete
    /// CloudEvent, a CloudEvents batch (never [`SourceError::Key`]: that is `InvalidKey`).
    Source(SourceError),
    /// A valid key not of the route's `key_format`, on a route that refuses those; `expected`
    /// says the format in words.
    KeyFormat {
        expected: String,
    },
}

impl From<SourceError> for Refusal {
    fn from(e: SourceError) -> Refusal {
        match e {
            SourceError::Key(e) => Refusal::InvalidKey(e),
            e => Refusal::Source(e),
        }
    }
}

impl Refusal {
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::InvalidKey(e) => e.code(),
            Refusal::MissingKey { .. } => "key_missing",
            Refusal::Signature(e) => e.code(),
            Refusal::Source(e) => e.code(),
            Refusal::KeyFormat { .. } => "key_format",
        }
    }
}

/// A request being admitted: what is still to be checked as its body streams past.
#[derive(Debug)]
pub struct Admission {
    key: Key,
    signature: Option<SignatureCheck>,
    /// The refusal a missing key gets, made at [`admit`] while the route is at hand, so that
    /// [`Admission::finish`] needs no route: a host keeps no route reference to look up again
    /// (and so has no "route not found" case) across the body's callbacks. `None`: optional.
    missing: Option<Refusal>,
    /// A pass-through read from the body, decided at [`Admission::finish`], and the body it reads
    /// unless the key search keeps it already.
    pass: Option<(Arc<PassThrough>, Option<Vec<u8>>)>,
    /// The route's key rules where a key from the body is still to be screened by them (kept
    /// only for a route with a `key_format`, so that a plain route's admission copies nothing).
    rules: Option<KeyRules>,
}

/// A request's key, admitted at the end of its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    pub key: IdempotencyKey,
    /// [`Freshness::Late`]: a validly signed redelivery past the tolerance, which only the
    /// key's stored answer may answer.
    pub(crate) freshness: Freshness,
}

#[derive(Debug)]
enum Key {
    Decided(Option<IdempotencyKey>),
    Body(KeySearch),
}

/// The headers arrived: what they settle. `header` gives every value of a lowercase header name.
#[must_use = "the admission says whether and how the request proceeds"]
pub fn admit<'h>(
    route: &Route,
    header: &dyn Fn(&str) -> Vec<&'h [u8]>,
    now: UnixMillis,
) -> Result<Admission, Refusal> {
    let signature = match &route.signature {
        Some(rule) => Some(rule.start(header, now).map_err(Refusal::Signature)?),
        None => None,
    };
    // A control message the route lets through (an SNS subscription confirmation): no key, never
    // stored — but still only with a valid signature where the route checks one.
    if route
        .pass_through
        .as_ref()
        .is_some_and(|pass| pass.matches(header))
    {
        return Ok(Admission {
            key: Key::Decided(None),
            signature,
            missing: None,
            pass: None,
            rules: None,
        });
    }
    let key = match key_source::start(&route.key_from, header).map_err(Refusal::from)? {
        // Screened only on a route with a format: a plain route's key moves straight on.
        KeyStart::Decided(key) if route.keys.format.is_some() => {
            Key::Decided(screen(&route.keys, key)?)
        }
        KeyStart::Decided(key) => Key::Decided(key),
        KeyStart::Body(search) => Key::Body(search),
    };
    let rules = match (&key, &route.keys.format) {
        (Key::Body(_), Some(_)) => Some(route.keys.clone()),
        _ => None,
    };
    // A message type in the body: read at the end, from the key search's copy of the body when
    // there is one, else from a copy of its own.
    let pass = route
        .pass_through
        .as_ref()
        .filter(|pass| pass.reads_body())
        .map(|pass| {
            let body = (!matches!(key, Key::Body(_))).then(Vec::new);
            (Arc::clone(pass), body)
        });
    let required = route.key == KeyRequirement::Required;
    // Nothing in the body can change a missing header key, and nothing is pending: refuse now,
    // before the body is even read.
    if required && signature.is_none() && pass.is_none() {
        if let Key::Decided(None) = key {
            return Err(missing(route));
        }
    }
    // The refusal is described only where the body may still end without a key.
    let waits = matches!(key, Key::Body(_)) || signature.is_some() || pass.is_some();
    let missing = (required && waits).then(|| missing(route));
    Ok(Admission {
        key,
        signature,
        missing,
        pass,
        rules,
    })
}

/// A found key under the route's key rules: kept, taken for no key (`key_mismatch: "ignore"`),
/// or refused (`key_format`). Out of line: only routes with a `key_format` call it.
#[inline(never)]
fn screen(
    rules: &KeyRules,
    key: Option<IdempotencyKey>,
) -> Result<Option<IdempotencyKey>, Refusal> {
    let Some(key) = key else {
        return Ok(None);
    };
    match rules.screen(key.as_str()) {
        Screened::Kept => Ok(Some(key)),
        Screened::Ignored => Ok(None),
        Screened::Refused(expected) => Err(Refusal::KeyFormat { expected }),
    }
}

fn missing(route: &Route) -> Refusal {
    Refusal::MissingKey {
        sources: describe_sources(&route.key_from),
    }
}

impl Admission {
    /// Whether the decision waits for the body (a body key source, or a signature to verify).
    pub fn needs_body(&self) -> bool {
        matches!(self.key, Key::Body(_)) || self.signature.is_some() || self.pass.is_some()
    }

    /// Whether [`Admission::update`] keeps the body (a body key source or a pass-through reads it
    /// at the end), rather than only hashing it for a signature: a copy the host's memory budget
    /// counts.
    pub(crate) fn keeps_body(&self) -> bool {
        matches!(self.key, Key::Body(_)) || self.pass.is_some()
    }

    /// The key when the headers decided it and nothing waits for the body; `None` otherwise.
    pub(crate) fn key_now(&self) -> Option<&IdempotencyKey> {
        match (&self.key, self.needs_body()) {
            (Key::Decided(key), false) => key.as_ref(),
            _ => None,
        }
    }

    /// A piece of the body, in order.
    pub fn update(&mut self, chunk: &[u8]) {
        if let Some(check) = &mut self.signature {
            check.update(chunk);
        }
        if let Key::Body(search) = &mut self.key {
            search.update(chunk);
        }
        if let Some((_, Some(body))) = &mut self.pass {
            body.extend_from_slice(chunk);
        }
    }

    /// The body is complete: the signature is verified first, then the key read. `Ok(None)`: no
    /// key and none required — the request passes through unguarded (never a late delivery: it
    /// is refused as stale instead, since only a stored answer may answer it).
    #[must_use = "the key (or refusal) decides what the request gets"]
    pub fn finish(self) -> Result<Option<Admitted>, Refusal> {
        let freshness = match self.signature {
            Some(check) => check.verify().map_err(Refusal::Signature)?,
            None => Freshness::Fresh,
        };
        let late = || Refusal::Signature(SignatureError::Stale);
        if let Some((pass, own)) = &self.pass {
            let body = match (&self.key, own) {
                (_, Some(body)) => body.as_slice(),
                (Key::Body(search), None) => search.body(),
                (Key::Decided(_), None) => &[],
            };
            if pass.matches_body(body) {
                return match freshness {
                    Freshness::Fresh => Ok(None),
                    Freshness::Late => Err(late()),
                };
            }
        }
        let key = match self.key {
            Key::Decided(key) => key,
            Key::Body(search) => {
                let key = search.finish().map_err(Refusal::from)?;
                match &self.rules {
                    Some(rules) => screen(rules, key)?,
                    None => key,
                }
            }
        };
        match (key, self.missing, freshness) {
            (None, Some(refusal), _) => Err(refusal),
            (None, None, Freshness::Late) => Err(late()),
            (None, None, Freshness::Fresh) => Ok(None),
            (Some(key), _, freshness) => Ok(Some(Admitted { key, freshness })),
        }
    }
}

impl Route {
    /// The scope a callback route's keys live in (the route itself); `None` on API routes, whose
    /// scope is the client (`docs/semantics.md` §2).
    pub fn own_scope(&self) -> Option<Scope<'_>> {
        match self.kind {
            RouteKind::Callback => Some(Scope {
                source: ROUTE_SCOPE_SOURCE,
                value: self.prefix.as_bytes(),
            }),
            RouteKind::Api => None,
        }
    }
}

impl RouteKind {
    /// The response facts as this kind of route counts them: on a callback route only a 2xx is
    /// the delivery's outcome; any other upstream answer releases the claim like a request that
    /// never reached the upstream, so the provider's next delivery runs again.
    #[must_use = "the screened facts are what completion must see"]
    pub(crate) fn screen(self, facts: ResponseFacts) -> ResponseFacts {
        match (self, facts) {
            (RouteKind::Callback, ResponseFacts::Upstream { status, .. })
                if !(200..300).contains(&status) =>
            {
                ResponseFacts::NeverReached
            }
            (_, facts) => facts,
        }
    }
}

#[cfg(test)]
#[cfg(feature = "config")]
mod tests;
