//! The crate's SHA-256 calls, each a function of its own. `sha2`'s hashing is generic code,
//! instantiated in every crate that calls it; inlined into each caller here it cost the filter's
//! `.wasm` about 1.4 KB over the same code in one crate with the core's SHA-256 (which shared one
//! copy). Called through these, the crate holds one copy of each.

use sha2::{Digest, Sha256};

/// `bytes` appended to the stream.
#[inline(never)]
pub(crate) fn update(stream: &mut Sha256, bytes: &[u8]) {
    stream.update(bytes);
}

/// The stream's digest.
#[inline(never)]
pub(crate) fn finish(stream: Sha256) -> [u8; 32] {
    stream.finalize().into()
}

/// The digest of `bytes` alone.
#[inline(never)]
pub(crate) fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}
