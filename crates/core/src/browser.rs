//! The browser's rules (`docs/semantics.md` §9), sans-IO like the rest: one business [`intent`]
//! (when a submission has settled, and whether its key is kept) and the client's [`retry`] policy.
//! The npm package (`crates/web`) carries them to JavaScript.

pub mod intent;
pub mod retry;
