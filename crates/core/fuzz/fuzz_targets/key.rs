//! `IdempotencyKey::parse` / `parse_all` on arbitrary bytes. The input is one header value for
//! `parse`; split at `\n` (which no HTTP header value can hold) it is the list of occurrences for
//! `parse_all`.
#![no_main]

use idemgate_core::request::key::{IdempotencyKey, KeyError, MAX_KEY_LEN};
use libfuzzer_sys::fuzz_target;

/// The sf-string spelling of a key (RFC 8941 §4.1.6).
fn quoted(key: &str) -> Vec<u8> {
    let mut out = vec![b'"'];
    for b in key.bytes() {
        if b == b'"' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
    out
}

fn check_one(raw: &[u8]) -> Result<IdempotencyKey, KeyError> {
    let parsed = IdempotencyKey::parse(raw);
    match &parsed {
        Ok(key) => {
            let text = key.as_str();
            assert!(
                (1..=MAX_KEY_LEN).contains(&text.len()),
                "length rule: {text:?}"
            );
            assert!(
                text.bytes().all(|b| (0x21..=0x7e).contains(&b)),
                "visible ASCII rule: {text:?}"
            );
            // Both spellings of a key parse back to it.
            assert_eq!(IdempotencyKey::parse(&quoted(text)).as_ref(), Ok(key));
            if !text.starts_with('"') {
                assert_eq!(IdempotencyKey::parse(text.as_bytes()).as_ref(), Ok(key));
            }
            // Optional whitespace around the value never matters.
            let mut padded = b" \t".to_vec();
            padded.extend_from_slice(raw);
            padded.extend_from_slice(b"\t ");
            assert_eq!(IdempotencyKey::parse(&padded).as_ref(), Ok(key));
        }
        Err(KeyError::Conflicting) => panic!("parse of one value reported a conflict"),
        Err(e) => {
            // Every error has a stable code and a message.
            assert!(e.code().starts_with("key_"));
            assert!(!e.to_string().is_empty());
        }
    }
    parsed
}

fuzz_target!(|data: &[u8]| {
    let _ = check_one(data);

    let values: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    let each: Vec<_> = values.iter().map(|v| check_one(v)).collect();
    let all = IdempotencyKey::parse_all(values.iter().copied());
    // parse_all walks the values in order: the first value that fails decides, unless a value
    // that differs from the first key comes before it (then the values conflict).
    let mut expected = Ok(None);
    for result in &each {
        match (result, &expected) {
            (Err(e), _) => {
                expected = Err(e.clone());
                break;
            }
            (Ok(key), Ok(None)) => expected = Ok(Some(key.clone())),
            (Ok(key), Ok(Some(first))) if key != first => {
                expected = Err(KeyError::Conflicting);
                break;
            }
            _ => {}
        }
    }
    assert_eq!(all, expected);
    assert_eq!(IdempotencyKey::parse_all(std::iter::empty()), Ok(None));
});
