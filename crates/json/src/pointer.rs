//! RFC 6901 field selectors and the path matching that runs alongside the streaming parser.

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use sha2::{Digest, Sha256};

use crate::sha;

use crate::lexer::Hash;
use crate::JsonError;

/// One reference token: matched against object keys by bytes, and against array positions only
/// when it is a canonical decimal index (no leading zeros), as RFC 6901 requires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Token {
    pub(super) key: String,
    pub(super) index: Option<u64>,
}

/// A parsed JSON pointer such as `/items/0/sku`; `""` selects the whole document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPointer {
    text: String,
    pub(super) tokens: Vec<Token>,
}

impl JsonPointer {
    pub fn parse(text: &str) -> Result<Self, JsonError> {
        let mut tokens = Vec::new();
        if !text.is_empty() {
            let rest = text.strip_prefix('/').ok_or(JsonError::PointerInvalid)?;
            for raw in rest.split('/') {
                let key = unescape(raw)?;
                let index = canonical_index(&key);
                tokens.push(Token { key, index });
            }
        }
        Ok(JsonPointer {
            text: String::from(text),
            tokens,
        })
    }

    /// The pointer as configured; it is part of the fields digest, so that selecting different
    /// fields can never produce the same digest.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

fn unescape(raw: &str) -> Result<String, JsonError> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => return Err(JsonError::PointerInvalid),
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

fn canonical_index(token: &str) -> Option<u64> {
    let bytes = token.as_bytes();
    let canonical = match bytes {
        [b'0'] => true,
        [b'1'..=b'9', rest @ ..] => rest.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    if canonical {
        token.parse().ok()
    } else {
        None
    }
}

/// The selected pointers, borrowed for one call or shared with a long-lived policy (so a streaming
/// fingerprint can outlive the borrow of the configuration that made it, without copying it).
pub enum Pointers<'p> {
    Borrowed(&'p [JsonPointer]),
    Shared(alloc::sync::Arc<[JsonPointer]>),
}

impl core::ops::Deref for Pointers<'_> {
    type Target = [JsonPointer];

    fn deref(&self) -> &[JsonPointer] {
        match self {
            Pointers::Borrowed(p) => p,
            Pointers::Shared(p) => p,
        }
    }
}

/// No key bytes matched: the current key cannot equal this pointer's token.
const MISMATCH: usize = usize::MAX;

/// Follows the parser's current path against every selector without storing the path: for each
/// pointer it keeps how many leading path levels match, which is enough because a path only ever
/// grows or shrinks at its end. Memory is O(pointers), independent of the body.
pub(super) struct FieldTracker<'p> {
    pointers: Pointers<'p>,
    /// Per pointer: levels of the current path equal to the pointer's first tokens.
    matched: Vec<usize>,
    /// Per pointer: bytes of the key being decoded that equal its token so far, or `MISMATCH`.
    key_pos: Vec<usize>,
    /// Depth of the object whose key is being decoded.
    key_depth: usize,
    found: Vec<Option<Hash>>,
}

impl<'p> FieldTracker<'p> {
    pub(super) fn new(pointers: Pointers<'p>) -> Self {
        let n = pointers.len();
        FieldTracker {
            pointers,
            matched: vec![0; n],
            key_pos: vec![MISMATCH; n],
            key_depth: 0,
            found: vec![None; n],
        }
    }

    /// Whether pointer `p` reaches level `depth` and has matched every level above it.
    fn reaches(&self, p: usize, depth: usize) -> bool {
        depth
            .checked_sub(1)
            .is_some_and(|parent| self.matched.get(p) == Some(&parent))
            && self
                .pointers
                .get(p)
                .is_some_and(|ptr| ptr.tokens.len() >= depth)
    }

    /// A value starts at position `index` of the array at `depth` (>= 1).
    pub(super) fn enter_index(&mut self, depth: usize, index: u64) {
        for p in 0..self.pointers.len() {
            let hit = self.reaches(p, depth)
                && self
                    .pointers
                    .get(p)
                    .and_then(|ptr| ptr.tokens.get(depth.wrapping_sub(1)))
                    .is_some_and(|t| t.index == Some(index));
            if hit {
                if let Some(m) = self.matched.get_mut(p) {
                    *m = depth;
                }
            }
        }
    }

    /// A key of the object at `depth` (>= 1) starts.
    pub(super) fn key_begin(&mut self, depth: usize) {
        self.key_depth = depth;
        for p in 0..self.pointers.len() {
            let pos = if self.reaches(p, depth) { 0 } else { MISMATCH };
            if let Some(slot) = self.key_pos.get_mut(p) {
                *slot = pos;
            }
        }
    }

    /// Decoded key bytes, in order, possibly in many pieces.
    pub(super) fn key_bytes(&mut self, bytes: &[u8]) {
        let level = self.key_depth.wrapping_sub(1);
        for (ptr, pos) in self.pointers.iter().zip(self.key_pos.iter_mut()) {
            if *pos == MISMATCH {
                continue;
            }
            let token = ptr.tokens.get(level).map(|t| t.key.as_bytes());
            let end = pos.saturating_add(bytes.len());
            *pos = if token.and_then(|t| t.get(*pos..end)) == Some(bytes) {
                end
            } else {
                MISMATCH
            };
        }
    }

    /// The key is complete: pointers whose token equals it now point into the member's value.
    pub(super) fn key_end(&mut self) {
        let depth = self.key_depth;
        for p in 0..self.pointers.len() {
            let token_len = self
                .pointers
                .get(p)
                .and_then(|ptr| ptr.tokens.get(depth.wrapping_sub(1)))
                .map(|t| t.key.len());
            if token_len.is_some() && self.key_pos.get(p).copied() == token_len {
                if let Some(m) = self.matched.get_mut(p) {
                    *m = depth;
                }
            }
        }
    }

    /// The value at path length `depth` completed; `hash` gives its value hash, asked for only
    /// when a pointer names exactly this path (and then once). The path steps back to the parent.
    pub(super) fn leave(&mut self, depth: usize, hash: impl FnOnce() -> Hash) {
        let mut hash = Some(hash);
        let mut value = None;
        for p in 0..self.pointers.len() {
            if self.matched.get(p) != Some(&depth) {
                continue;
            }
            if self
                .pointers
                .get(p)
                .is_some_and(|ptr| ptr.tokens.len() == depth)
            {
                if value.is_none() {
                    value = hash.take().map(|f| f());
                }
                if let Some(slot) = self.found.get_mut(p) {
                    *slot = value;
                }
            }
            if depth > 0 {
                if let Some(m) = self.matched.get_mut(p) {
                    *m = depth - 1;
                }
            }
        }
    }

    pub(super) fn digest(&self) -> Hash {
        let mut hasher = Sha256::new();
        sha::update(&mut hasher, b"F");
        for (ptr, found) in self.pointers.iter().zip(&self.found) {
            sha::update(&mut hasher, &(ptr.text.len() as u64).to_be_bytes());
            sha::update(&mut hasher, ptr.text.as_bytes());
            match found {
                None => sha::update(&mut hasher, &[0u8]),
                Some(hash) => {
                    sha::update(&mut hasher, &[1u8]);
                    sha::update(&mut hasher, hash);
                }
            }
        }
        sha::finish(hasher)
    }
}
