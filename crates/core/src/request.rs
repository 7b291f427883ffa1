//! What a request says, and whether a retry is the same request (`docs/semantics.md` §1 and §3):
//! its `Idempotency-Key` ([`key`]) and where a route finds it ([`key_source`]), one spelling of its
//! method and path ([`target`]), and its fingerprint as the body streams past ([`fingerprint`],
//! with the canonical `json` and [`form`] digests a body's [`media_type`] picks), within the VM's
//! hashing [`budget`].

pub mod budget;
pub mod fingerprint;
pub mod form;
pub(crate) mod json;
pub mod key;
// Key rules other than the default are built only from a configuration (`config`).
#[cfg_attr(not(feature = "config"), allow(dead_code))]
pub(crate) mod key_format;
pub mod key_source;
pub mod media_type;
pub(crate) mod path;
pub mod target;
