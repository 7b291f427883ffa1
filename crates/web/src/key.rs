//! Idempotency keys: a fresh UUID v4 per business intent, and the edge's parsing rules (§1).

use crate::error::{CodedError, JsResult, INVALID_ARGUMENT};
use alloc::string::{String, ToString};
use idemgate_core::request::key::IdempotencyKey;
use wasm_bindgen::prelude::*;

/// A fresh key from 16 random bytes the caller drew from `crypto.getRandomValues` (entropy is
/// I/O, so JS draws it; the key's format is decided here): a version 4 UUID (RFC 9562) in
/// lowercase hex. 122 random bits, so two intents never share a key by chance. Any other length
/// is `invalid_argument`.
#[wasm_bindgen(js_name = newKey)]
pub fn new_key(random: &[u8]) -> JsResult<String> {
    let bytes: [u8; 16] = random
        .try_into()
        .map_err(|_| CodedError::new(INVALID_ARGUMENT, "newKey needs 16 random bytes"))?;
    Ok(uuid_v4(bytes))
}

/// Formats 16 random bytes as a version 4, variant 10 UUID.
pub fn uuid_v4(mut bytes: [u8; 16]) -> String {
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex = idemgate_core::hash::to_hex(&bytes);
    let mut out = String::with_capacity(36);
    for (i, c) in hex.chars().enumerate() {
        if matches!(i, 8 | 12 | 16 | 20) {
            out.push('-');
        }
        out.push(c);
    }
    out
}

/// Parses every occurrence of the header in one request exactly as the edge does (each bare or a
/// structured-field string): `joined` holds the values back to back, `lengths` their byte lengths.
/// No value → `undefined`; a broken rule throws its code (`key_empty`, …; two different keys →
/// `key_conflicting`). One value is the single-header case, so there is one export for both.
#[wasm_bindgen(js_name = parseKeyValues)]
pub fn parse_key_values(joined: &[u8], lengths: &[u32]) -> JsResult<Option<String>> {
    Ok(key_values(joined, lengths)?)
}

fn key_values(joined: &[u8], lengths: &[u32]) -> Result<Option<String>, CodedError> {
    let values = crate::parts::split(joined, lengths)?;
    IdempotencyKey::parse_all(values)
        .map(|key| key.map(|k| k.as_str().to_string()))
        .map_err(|e| CodedError::new(e.code(), e.message()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_v4_sets_version_and_variant() {
        assert_eq!(uuid_v4([0xff; 16]), "ffffffff-ffff-4fff-bfff-ffffffffffff");
        assert_eq!(uuid_v4([0; 16]), "00000000-0000-4000-8000-000000000000");
        assert!(IdempotencyKey::parse(uuid_v4([7; 16]).as_bytes()).is_ok());
        assert_eq!(new_key(&[0; 16]).ok(), Some(uuid_v4([0; 16])));
    }

    #[test]
    fn several_values() {
        assert_eq!(key_values(b"abc\"abc\"", &[3, 5]), Ok(Some("abc".into())));
        assert_eq!(key_values(b"", &[]), Ok(None));
        let conflict = key_values(b"abcabd", &[3, 3]).map_err(|e| e.code);
        assert_eq!(conflict, Err("key_conflicting"));
        let empty = key_values(b"abc", &[3, 0]).map_err(|e| e.code);
        assert_eq!(empty, Err("key_empty"));
        for (joined, lengths) in [(&b"abc"[..], &[4u32][..]), (b"abc", &[2])] {
            let bad = key_values(joined, lengths).map_err(|e| e.code);
            assert_eq!(bad, Err(INVALID_ARGUMENT));
        }
    }
}
