//! The streaming canonical JSON hasher on arbitrary bytes, cut at arbitrary points.
//!
//! Input: `opts`, a split spec (see `Input::splits`), [inline limits], [inline pointers], body.
//! - `opts & 3`: limits preset (default 64/64, tight 3/8, minimal 1/1, loose 1024/1024) unless
//!   `opts & 0x40`, then two bytes give `max_depth` and `max_number_len`.
//! - `(opts >> 2) & 7`: one of `POINTER_SETS` for fields mode, unless `opts & 0x80`, then pointers
//!   separated by 0x1f and ended by 0x00 follow.
//!
//! Checks: chunking (seeded cuts, one byte per chunk, empty chunks) never changes the result nor
//! the error; an error sticks; fields mode accepts exactly the documents json mode accepts; and,
//! with default limits, serde_json as an independent oracle: both accept the same documents (up to
//! the hasher's extra rules), re-serialising the document gives the same digest, and each
//! selected field's digest is the json digest of that sub-value.
#![no_main]

use idemgate_core::hash::sha256;
use idemgate_core_fuzz::{chunks, Input, BYTEWISE_MAX};
use idemgate_json::{JsonError, JsonHasher, JsonLimits, JsonPointer};
use libfuzzer_sys::fuzz_target;

/// Pointer sets covering the selectors used by `vectors/json.json` and `vectors/fingerprint.json`.
const POINTER_SETS: [&[&str]; 8] = [
    &["/sku", "/qty"],
    &[""],
    &["/amount", "/items/0/sku"],
    &["/a~1b", "/m~0n", "/-"],
    &["/1/0", "/0", "/-"],
    &["/customer/id", "/items/01/sku", "/items/2"],
    &["/", "/a", "/a/b", "/a/0"],
    &["/amount", "/currency", "/missing", "/amount"],
];

/// serde_json's private key for numbers kept as text (`arbitrary_precision`).
const NUMBER_MARKER: &[u8] = b"$serde_json::private::Number";

fn digest(
    limits: JsonLimits,
    pointers: Option<&[JsonPointer]>,
    pieces: &[&[u8]],
) -> Result<[u8; 32], JsonError> {
    let mut hasher = JsonHasher::new(limits, pointers);
    let mut first_error = None;
    for piece in pieces {
        let result = hasher.update(piece);
        match (&first_error, result) {
            (None, Err(e)) => first_error = Some(e),
            // After an error, every later call returns that same error.
            (Some(e), later) => assert_eq!(later.as_ref(), Err(e), "error did not stick"),
            (None, Ok(())) => {}
        }
    }
    let result = hasher.finish();
    if let Some(e) = first_error {
        assert_eq!(result.as_ref(), Err(&e), "finish forgot the error");
    }
    result
}

fn all_ways(
    limits: JsonLimits,
    pointers: Option<&[JsonPointer]>,
    body: &[u8],
    cuts: &[u8],
) -> Result<[u8; 32], JsonError> {
    let whole = digest(limits, pointers, &[body]);
    let split = digest(limits, pointers, &chunks(body, cuts));
    assert_eq!(whole, split, "cut at {cuts:?} changed the result");
    if body.len() <= BYTEWISE_MAX {
        let bytewise: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(
            whole,
            digest(limits, pointers, &bytewise),
            "bytewise feeding changed the result"
        );
    }
    let with_empty = [&b""[..], body, &b""[..]];
    assert_eq!(
        whole,
        digest(limits, pointers, &with_empty),
        "empty chunks changed the result"
    );
    whole
}

/// Hash of the json digest of a serde value, through its compact serialisation.
fn json_digest_of(value: &serde_json::Value) -> Result<[u8; 32], JsonError> {
    let text = serde_json::to_vec(value).expect("a serde Value always serialises");
    // serde may respell a number longer than it came (the limit is on spelling, not on value).
    let limits = JsonLimits {
        max_number_len: u16::MAX,
        ..JsonLimits::default()
    };
    digest(limits, None, &[&text])
}

/// The fields-mode digest as the module docs spell it, computed from serde's view of the document.
fn expected_fields_digest(value: &serde_json::Value, pointers: &[JsonPointer]) -> [u8; 32] {
    let mut preimage = b"F".to_vec();
    for p in pointers {
        let text = p.as_str();
        preimage.extend_from_slice(&(text.len() as u64).to_be_bytes());
        preimage.extend_from_slice(text.as_bytes());
        match value.pointer(text) {
            None => preimage.push(0),
            Some(sub) => {
                preimage.push(1);
                let sub_digest =
                    json_digest_of(sub).expect("a sub-value of a valid document is valid");
                preimage.extend_from_slice(&sub_digest);
            }
        }
    }
    sha256(&preimage)
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let opts = input.byte();
    let cuts = input.splits();
    let limits = if opts & 0x40 != 0 {
        JsonLimits {
            max_depth: u16::from(input.byte()),
            max_number_len: u16::from(input.byte()),
        }
    } else {
        match opts & 3 {
            0 => JsonLimits::default(),
            1 => JsonLimits {
                max_depth: 3,
                max_number_len: 8,
            },
            2 => JsonLimits {
                max_depth: 1,
                max_number_len: 1,
            },
            _ => JsonLimits {
                max_depth: 1024,
                max_number_len: 1024,
            },
        }
    };
    let pointer_texts: Vec<String> = if opts & 0x80 != 0 {
        input
            .until(0)
            .split(|&b| b == 0x1f)
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect()
    } else {
        POINTER_SETS[usize::from((opts >> 2) & 7)]
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    let body = input.rest();

    let pointers: Option<Vec<JsonPointer>> = pointer_texts
        .iter()
        .map(|t| JsonPointer::parse(t).inspect(|p| assert_eq!(p.as_str(), t)))
        .collect::<Result<_, _>>()
        .ok();

    let json = all_ways(limits, None, body, &cuts);
    if let Some(pointers) = &pointers {
        let fields = all_ways(limits, Some(pointers), body, &cuts);
        // The whole document must be valid in fields mode too, with the same first error.
        assert_eq!(
            json.as_ref().err(),
            fields.as_ref().err(),
            "json and fields modes disagree on validity"
        );
    }

    if body.is_empty() {
        assert_eq!(json, Ok(sha256(b"empty")));
        return;
    }
    if limits != JsonLimits::default() {
        return;
    }
    // serde_json as an independent oracle. With `arbitrary_precision` it reads an object whose
    // one key is its private number marker as a number, so such bodies are left out.
    if body
        .windows(NUMBER_MARKER.len())
        .any(|w| w == NUMBER_MARKER)
    {
        return;
    }
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(value) => match &json {
            Ok(digest) => {
                assert_eq!(
                    json_digest_of(&value).as_ref(),
                    Ok(digest),
                    "re-serialised document hashes differently"
                );
                if let Some(pointers) = &pointers {
                    let fields = all_ways(limits, Some(pointers), body, &[]).expect("valid above");
                    assert_eq!(
                        fields,
                        expected_fields_digest(&value, pointers),
                        "fields digest differs from the spelled-out preimage"
                    );
                }
            }
            // serde_json keeps the last of duplicate keys and allows 128 levels and long numbers
            // of any magnitude (its `arbitrary_precision` keeps them as text).
            Err(
                JsonError::DuplicateKey { .. }
                | JsonError::TooDeep { .. }
                | JsonError::NumberTooLong { .. }
                | JsonError::NumberOutOfRange { .. },
            ) => {}
            Err(e) => panic!("serde_json accepts a document the hasher refuses with {e:?}"),
        },
        Err(e) => assert!(
            json.is_err(),
            "the hasher accepts a document serde_json refuses: {e}"
        ),
    }
});
