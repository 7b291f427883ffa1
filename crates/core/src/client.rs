//! Who is asking, and what it must show (`docs/semantics.md` §2, §7 and §11): the client's
//! [`identity`] and the [`scope`] its keys live in (no key finds another client's record), the
//! [`payer`]s of its records and what each may hold, the one-time [`token`]s a route can require,
//! and a provider's [`signature`] on a callback delivery. The order a guarded request is checked in
//! before its claim is [`crate::decision::admission`].

pub mod identity;
pub mod payer;
pub mod scope;
pub mod signature;
pub mod token;
