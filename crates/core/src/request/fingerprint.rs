//! Is a retry the *same* request? (`docs/semantics.md` §3.) The fingerprint is a SHA-256 over the
//! method, the path with its query, the configured headers and a digest of the body in the
//! configured mode. It is fed body chunks as they arrive: `raw` hashes bytes as they stream and
//! keeps none, `json` and `fields` run the streaming canonical hasher of `crate::request::json`
//! (which holds only the objects still open), `form` the canonical form hasher of
//! [`crate::request::form`] (which holds the decoded pairs until it can sort them). `auto`, the
//! default, picks `json`, `form` or `raw` from the request's `Content-Type`
//! ([`crate::request::media_type`]), so JSON and Stripe-style form APIs both work as they are.
//!
//! # Preimage
//! Parts (length-prefixed, `PartsHasher`): the tag, the mode that hashed the body (`auto`
//! writes the mode it picked, so an `auto` fingerprint equals the explicit mode's), then — except in
//! `none` mode — the method, the path with query, per configured header its name, the count of its
//! occurrences and their values, and the body digest.

use crate::hash::{put_part, KeptStates, PartsHasher};
use crate::request::form::{FormError, FormHasher};
use crate::request::json::{JsonError, JsonHasher, JsonLimits, JsonPointer, Pointers};
use crate::request::media_type::BodyKind;
use crate::text::{self, Text};
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use sha2::{Digest, Sha256};

/// Bytes reserved for a head's preimage: a route's tag, mode, method, path and content type.
const HEAD_CAPACITY: usize = 192;

/// Version tag of the fingerprint preimage.
pub(crate) const FINGERPRINT_TAG: &str = "idemgate-fingerprint-v3";

/// How the body takes part in the fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FingerprintMode {
    /// By the body's `Content-Type`: JSON types as `Json`, form bodies as `Form`, the rest `Raw`.
    Auto,
    /// The body bytes exactly.
    Raw,
    /// Canonical JSON: member order and insignificant whitespace do not matter.
    Json,
    /// Canonical `application/x-www-form-urlencoded`: decoded pairs, order of distinct names
    /// irrelevant.
    Form,
    /// Only these JSON fields, for clients that add volatile fields (timestamps, trace ids).
    /// Shared, so every request's fingerprint uses the policy's pointers without copying them.
    Fields(Arc<[JsonPointer]>),
    /// The key alone decides: any payload under one key is "the same" request.
    None,
}

impl FingerprintMode {
    pub fn name(&self) -> &'static str {
        match self {
            FingerprintMode::Auto => "auto",
            FingerprintMode::Raw => "raw",
            FingerprintMode::Json => "json",
            FingerprintMode::Form => "form",
            FingerprintMode::Fields(_) => "fields",
            FingerprintMode::None => "none",
        }
    }
}

/// What goes into a fingerprint: the mode, the headers that matter (lowercase names, in order) and
/// the JSON limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FingerprintSpec {
    pub mode: FingerprintMode,
    pub headers: Vec<String>,
    pub json_limits: JsonLimits,
}

impl Default for FingerprintSpec {
    fn default() -> Self {
        FingerprintSpec {
            mode: FingerprintMode::Auto,
            headers: alloc::vec![String::from("content-type")],
            json_limits: JsonLimits::default(),
        }
    }
}

/// A request fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

enum BodyDigest {
    Raw(Sha256),
    // Boxed: the JSON hasher's stack is large and only json/fields modes need it.
    Json(alloc::boxed::Box<JsonHasher<'static>>),
    Form(FormHasher),
    Ignored,
}

/// Computes a fingerprint from request facts and body chunks. It owns what it needs (the fields
/// mode's pointers are shared with the spec), so a host can keep it in a request context next to a
/// shared policy.
pub struct FingerprintBuilder {
    head: PartsHasher,
    body: BodyDigest,
}

impl FingerprintBuilder {
    /// Starts a fingerprint. `headers` are all request headers as (lowercase name, value) pairs;
    /// only the configured ones are used, every occurrence in order.
    pub fn new<'h, I>(
        spec: &FingerprintSpec,
        method: &str,
        path_and_query: &str,
        headers: I,
    ) -> FingerprintBuilder
    where
        I: IntoIterator<Item = (&'h str, &'h [u8])> + Clone,
    {
        FingerprintBuilder::kept(spec, method, path_and_query, headers, None)
    }

    /// [`FingerprintBuilder::new`], its head (all but the body's digest and what is bound
    /// later) hashed from the state `kept` holds for its whole blocks: a route's requests share
    /// their tag, mode, method, path and headers, two of the head's three blocks.
    pub(crate) fn kept<'h, I>(
        spec: &FingerprintSpec,
        method: &str,
        path_and_query: &str,
        headers: I,
        kept: Option<&KeptStates>,
    ) -> FingerprintBuilder
    where
        I: IntoIterator<Item = (&'h str, &'h [u8])> + Clone,
    {
        let mode = match &spec.mode {
            FingerprintMode::Auto => match BodyKind::of_headers(headers.clone()) {
                BodyKind::Json => &FingerprintMode::Json,
                BodyKind::Form => &FingerprintMode::Form,
                _ => &FingerprintMode::Raw,
            },
            explicit => explicit,
        };
        let mut preimage = Vec::with_capacity(HEAD_CAPACITY);
        put_part(&mut preimage, FINGERPRINT_TAG.as_bytes());
        put_part(&mut preimage, mode.name().as_bytes());
        if *mode == FingerprintMode::None {
            return FingerprintBuilder {
                head: PartsHasher::resume(&preimage, None),
                body: BodyDigest::Ignored,
            };
        }
        put_part(&mut preimage, method.as_bytes());
        put_part(&mut preimage, path_and_query.as_bytes());
        for wanted in &spec.headers {
            let values: Vec<&[u8]> = headers
                .clone()
                .into_iter()
                .filter(|(name, _)| name.eq_ignore_ascii_case(wanted))
                .map(|(_, value)| value)
                .collect();
            put_part(&mut preimage, wanted.as_bytes());
            put_part(&mut preimage, &(values.len() as u64).to_be_bytes());
            for value in values {
                put_part(&mut preimage, value);
            }
        }
        let head = PartsHasher::resume(&preimage, kept);
        let body = match mode {
            FingerprintMode::Json => BodyDigest::Json(alloc::boxed::Box::new(JsonHasher::new(
                spec.json_limits,
                None,
            ))),
            FingerprintMode::Form => BodyDigest::Form(FormHasher::new()),
            FingerprintMode::Fields(pointers) => {
                BodyDigest::Json(alloc::boxed::Box::new(JsonHasher::with_pointers(
                    spec.json_limits,
                    Some(Pointers::Shared(Arc::clone(pointers))),
                )))
            }
            FingerprintMode::None => BodyDigest::Ignored,
            // `Auto` was resolved above to one of the others.
            FingerprintMode::Raw | FingerprintMode::Auto => BodyDigest::Raw(Sha256::new()),
        };
        FingerprintBuilder { head, body }
    }

    /// Binds the request's `If-Match` fields (every one, in order) into the fingerprint, under a
    /// label of their own: on a route whose updates name the version they read, an update at
    /// another version is another request (`docs/semantics.md` §8), so the same key with another
    /// `If-Match` is refused, never answered with the earlier version's result. In every mode,
    /// `none` included: the version is not part of the payload but of what the request asks.
    pub(crate) fn bind_if_match(&mut self, values: &[&[u8]]) {
        self.head
            .part(b"precondition:if-match")
            .part(&(values.len() as u64).to_be_bytes());
        for value in values {
            self.head.part(value);
        }
    }

    /// Binds the endpoint (method and matched path) into the fingerprint, under a label of its
    /// own, on a route whose keys are the client's across endpoints (`key_scope: "client"`): their
    /// storage key leaves the endpoint out, so the fingerprint must tell the same key on another
    /// endpoint from a retry (a 422, never another endpoint's answer). In every mode, `none`
    /// included, which otherwise hashes no method or path.
    pub(crate) fn bind_endpoint(&mut self, method: &str, path: &str) {
        self.head
            .part(b"key-scope:client")
            .part(method.as_bytes())
            .part(path.as_bytes());
    }

    /// Feeds the next body chunk.
    pub fn update(&mut self, chunk: &[u8]) -> Result<(), FingerprintError> {
        match &mut self.body {
            BodyDigest::Raw(hasher) => hasher.update(chunk),
            BodyDigest::Json(hasher) => hasher.update(chunk).map_err(FingerprintError::Json)?,
            BodyDigest::Form(hasher) => hasher.update(chunk).map_err(FingerprintError::Form)?,
            BodyDigest::Ignored => {}
        }
        Ok(())
    }

    /// Ends the body and returns the fingerprint.
    pub fn finish(self) -> Result<Fingerprint, FingerprintError> {
        let mut head = self.head;
        match self.body {
            BodyDigest::Raw(hasher) => {
                let digest: [u8; 32] = hasher.finalize().into();
                head.part(&digest);
            }
            BodyDigest::Json(hasher) => {
                let digest = hasher.finish().map_err(FingerprintError::Json)?;
                head.part(&digest);
            }
            BodyDigest::Form(hasher) => {
                let digest = hasher.finish().map_err(FingerprintError::Form)?;
                head.part(&digest);
            }
            BodyDigest::Ignored => {}
        }
        Ok(Fingerprint(head.finish()))
    }
}

/// Why a body could not be fingerprinted: a 400 at the edge (the client sent it), except a broken
/// invariant of the reader itself (`FingerprintError::is_internal`), which is idemgate's fault.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FingerprintError {
    /// The body is not acceptable JSON in `json`/`fields` mode (or `auto` with a JSON type).
    Json(JsonError),
    /// The body is not a well-formed form in `form` mode (or `auto` with the form type).
    Form(FormError),
}

impl FingerprintError {
    pub fn code(&self) -> &'static str {
        match self {
            FingerprintError::Json(e) => e.code(),
            FingerprintError::Form(e) => e.code(),
        }
    }

    /// True when the reader refused to hash because one of its own invariants broke (a defect
    /// of idemgate, not of the body): answered 500, so no client is told to change a good body.
    pub(crate) fn is_internal(&self) -> bool {
        matches!(self, FingerprintError::Json(JsonError::Internal))
    }

    /// The same text as `Display`, without `core::fmt` (see `crate::text`); what the browser
    /// module shows.
    pub fn message(&self) -> String {
        text::message(|out| self.write_text(out))
    }

    fn write_text<T: Text>(&self, out: &mut T) -> fmt::Result {
        match self {
            FingerprintError::Json(e) => {
                out.put("the request body is not valid JSON: ")?;
                e.write_text(out)
            }
            FingerprintError::Form(e) => {
                out.put("the request body is not a valid form (urlencoded): ")?;
                e.write_text(out)
            }
        }
    }
}

impl fmt::Display for FingerprintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_text(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_from_kept_states_is_the_fingerprint_new_gives() {
        let kept = KeptStates::default();
        let specs = [
            FingerprintSpec::default(),
            FingerprintSpec {
                mode: FingerprintMode::Raw,
                ..FingerprintSpec::default()
            },
            FingerprintSpec {
                mode: FingerprintMode::None,
                ..FingerprintSpec::default()
            },
        ];
        let long = alloc::format!("/orders?{}", "q".repeat(300));
        let paths = ["/orders", "/orders/7", "/o", long.as_str()];
        let types: [&[u8]; 2] = [b"application/json", b"text/plain"];
        for _ in 0..2 {
            for spec in &specs {
                for path in paths {
                    for content_type in types {
                        let headers = [("content-type", content_type)];
                        let fresh = FingerprintBuilder::new(spec, "POST", path, headers);
                        let mut from_kept =
                            FingerprintBuilder::kept(spec, "POST", path, headers, Some(&kept));
                        let mut fresh = fresh;
                        for builder in [&mut fresh, &mut from_kept] {
                            builder.bind_if_match(&[b"\"v1\""]);
                            builder.update(b"{\"a\":1}").unwrap();
                        }
                        assert_eq!(
                            from_kept.finish().unwrap(),
                            fresh.finish().unwrap(),
                            "{} {path}",
                            spec.mode.name()
                        );
                    }
                }
            }
        }
    }
}
