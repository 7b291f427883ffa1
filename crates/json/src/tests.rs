use alloc::vec;
use alloc::vec::Vec;
use sha2::{Digest, Sha256};

use super::*;

fn h(parts: &[&[u8]]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize().into()
}

fn digest_with(
    body: &[u8],
    limits: JsonLimits,
    fields: Option<&[JsonPointer]>,
) -> Result<[u8; 32], JsonError> {
    let mut hasher = JsonHasher::new(limits, fields);
    hasher.update(body)?;
    hasher.finish()
}

fn digest(body: &[u8]) -> Result<[u8; 32], JsonError> {
    digest_with(body, JsonLimits::default(), None)
}

/// Same answer whole, split in two everywhere, and byte by byte.
fn digest_split(body: &[u8]) -> Result<[u8; 32], JsonError> {
    let whole = digest(body);
    for cut in 0..=body.len() {
        let mut hasher = JsonHasher::new(JsonLimits::default(), None);
        let split = hasher
            .update(&body[..cut])
            .and_then(|()| hasher.update(&body[cut..]))
            .and_then(|()| hasher.finish());
        assert_eq!(split, whole, "cut at {cut} of {:?}", body);
    }
    let mut hasher = JsonHasher::new(JsonLimits::default(), None);
    let bytewise = body
        .iter()
        .try_for_each(|b| hasher.update(&[*b]))
        .and_then(|()| hasher.finish());
    assert_eq!(bytewise, whole);
    whole
}

/// `E(number)` of a canonical number text.
fn num(canonical: &str) -> Vec<u8> {
    [b"d", canonical.as_bytes(), b";"].concat()
}

/// The canonical text of a non-negative integer: digits without trailing zeros, `e`, their count.
fn int(i: u32) -> Vec<u8> {
    if i == 0 {
        return num("0");
    }
    let text = alloc::format!("{i}");
    let digits = text.trim_end_matches('0');
    num(&alloc::format!("{digits}e{}", text.len() - digits.len()))
}

/// `E(string)` of decoded bytes.
fn s(text: &[u8]) -> Vec<u8> {
    let mut out = vec![b's'];
    for &b in text {
        if b == 0 {
            out.extend_from_slice(&[0, 1]);
        } else {
            out.push(b);
        }
    }
    out.extend_from_slice(&[0, 0]);
    out
}

#[test]
fn scalars_follow_the_encoding() {
    assert_eq!(digest_split(b"null"), Ok(h(&[b"n"])));
    assert_eq!(digest_split(b" true "), Ok(h(&[b"t"])));
    assert_eq!(digest_split(b"false"), Ok(h(&[b"f"])));
    assert_eq!(digest_split(b"\"ab\""), Ok(h(&[&s(b"ab")])));
    assert_eq!(digest_split(b"12.5"), Ok(h(&[b"d125e-1;"])));
    assert_eq!(digest_split(b"-1200"), Ok(h(&[b"d-12e2;"])));
    assert_eq!(digest_split(b"-0.0"), Ok(h(&[b"d0;"])));
    assert_eq!(
        digest_split(b"9007199254740993"),
        Ok(h(&[b"d9007199254740993e0;"]))
    );
    assert_eq!(digest_split(b""), Ok(h(&[b"empty"])));
}

#[test]
fn containers_follow_the_encoding() {
    assert_eq!(digest_split(b"[]"), Ok(h(&[b"a]"])));
    assert_eq!(digest_split(b"{}"), Ok(h(&[b"o}"])));
    assert_eq!(
        digest_split(b"[1,[]]"),
        Ok(h(&[b"a", &num("1e0"), b"a]", b"]"]))
    );
    let expected = h(&[b"o", &s(b"a"), &num("1e0"), &s(b"b"), b"n", b"}"]);
    assert_eq!(digest_split(br#"{"a":1,"b":null}"#), Ok(expected));
    assert_eq!(
        digest_split(b" { \"b\" : null ,\n\"a\"\t:\r1.0 } "),
        Ok(expected)
    );
}

#[test]
fn members_are_reordered_at_every_level() {
    // Keys out of order inside and outside, a key that is a prefix of another, and a `\u0000`
    // key: it sorts before "\u0001" and after "" (the escape keeps the terminator unique).
    let body =
        br#"{"b":{"y":1,"x":[{"d":0,"c":"\u0000"}]},"ab":true,"a":"","\u0001":2,"\u0000":3,"":4}"#;
    let inner = [&b"o"[..], &s(b"c"), &s(b"\0"), &s(b"d"), &num("0"), b"}"].concat();
    let b_value = [
        &b"o"[..],
        &s(b"x"),
        b"a",
        &inner,
        b"]",
        &s(b"y"),
        &num("1e0"),
        b"}",
    ]
    .concat();
    let expected = h(&[
        b"o",
        &s(b""),
        &num("4e0"),
        &s(b"\0"),
        &num("3e0"),
        &s(b"\x01"),
        &num("2e0"),
        &s(b"a"),
        &s(b""),
        &s(b"ab"),
        b"t",
        &s(b"b"),
        &b_value,
        b"}",
    ]);
    assert_eq!(digest_split(body), Ok(expected));
    assert_eq!(
        digest(br#"{"b":1,"a":2,"b":3}"#),
        Err(JsonError::DuplicateKey {
            offset: 18,
            key: None
        })
    );
    assert_eq!(
        digest(br#"{"\u0000":1,"\u0000":2}"#),
        Err(JsonError::DuplicateKey {
            offset: 22,
            key: None
        })
    );
}

#[test]
fn long_arrays_are_hashed_as_they_go() {
    // Far more canonical bytes than are held before hashing: same digest as the encoding built
    // here in one piece, whole, split and byte by byte.
    let mut body = b"[".to_vec();
    let mut encoding = b"a".to_vec();
    for i in 0..600u32 {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(alloc::format!(r#"{{"v":{i},"k":"x{i}"}}"#).as_bytes());
        encoding.push(b'o');
        encoding.extend(s(b"k"));
        encoding.extend(s(alloc::format!("x{i}").as_bytes()));
        encoding.extend(s(b"v"));
        encoding.extend(int(i));
        encoding.push(b'}');
    }
    body.push(b']');
    encoding.push(b']');
    assert!(encoding.len() > 3 * hasher::FLUSH_AT);
    assert_eq!(digest_split(&body), Ok(h(&[&encoding])));
}

#[test]
fn spellings_of_one_value_agree() {
    let zero = digest_split(b"0");
    for spelling in [&b"-0"[..], b"0.0", b"-0e5", b"0E-3", b"-0.000e-99999"] {
        assert_eq!(digest_split(spelling), zero, "{:?}", spelling);
    }
    for spelling in [&b"1.0"[..], b"1e0", b"10e-1", b"0.1E+1", b"1.000"] {
        assert_eq!(digest_split(spelling), digest_split(b"1"), "{:?}", spelling);
    }
    assert_ne!(digest_split(b"1"), digest_split(b"2"));
    assert_ne!(digest_split(b"-1e-400"), zero);
    // Beyond a double's precision, still distinct: exact decimal values.
    assert_ne!(
        digest_split(b"9007199254740993"),
        digest_split(b"9007199254740992")
    );
    assert_ne!(digest_split(b"0.1"), digest_split(b"0.10000000000000001"));
    assert_ne!(digest_split(b"1"), digest_split(b"\"1\""));
    let raw = digest_split("\"é😀/\"".as_bytes());
    assert_eq!(digest_split(br#""\u00e9\uD83D\ude00\/""#), raw);
    assert_eq!(digest_split(br#""\u00E9\ud83d\uDE00/""#), raw);
    assert_eq!(
        digest_split(br#""\"\\\b\f\n\r\t""#),
        Ok(h(&[&s(b"\"\\\x08\x0c\n\r\t")]))
    );
}

#[test]
fn errors_carry_code_and_offset() {
    let cases: Vec<(&[u8], JsonError)> = vec![
        (b"[1,]", JsonError::Syntax { offset: 3 }),
        (b"[1 2]", JsonError::Syntax { offset: 3 }),
        (b"01", JsonError::TrailingData { offset: 1 }),
        (b"{} x", JsonError::TrailingData { offset: 3 }),
        (b"[1", JsonError::UnexpectedEnd { offset: 2 }),
        (b"  ", JsonError::UnexpectedEnd { offset: 2 }),
        (b"tru", JsonError::UnexpectedEnd { offset: 3 }),
        (b"-", JsonError::UnexpectedEnd { offset: 1 }),
        (b"\"\\u12", JsonError::UnexpectedEnd { offset: 5 }),
        (b"trUe", JsonError::Syntax { offset: 2 }),
        (b"1.e3", JsonError::Syntax { offset: 2 }),
        (
            br#"{"a":1,"a":2}"#,
            JsonError::DuplicateKey {
                offset: 12,
                key: None,
            },
        ),
        (
            br#"{"a":1,"\u0061":2}"#,
            JsonError::DuplicateKey {
                offset: 17,
                key: None,
            },
        ),
        (b"\"a\x01\"", JsonError::ControlCharacter { offset: 2 }),
        (b"\"\\x\"", JsonError::InvalidEscape { offset: 2 }),
        (b"\"\\uD800\"", JsonError::InvalidEscape { offset: 7 }),
        (b"\"\\uDC00\"", JsonError::InvalidEscape { offset: 6 }),
        (
            b"\"\\uD800\\u0041\"",
            JsonError::InvalidEscape { offset: 12 },
        ),
        (b"\"\\u00G0\"", JsonError::InvalidEscape { offset: 5 }),
        (b"\"\xc3\"", JsonError::InvalidUtf8 { offset: 2 }),
        (b"\"\xc0\xaf\"", JsonError::InvalidUtf8 { offset: 1 }),
        (b"\"\xed\xa0\x80\"", JsonError::InvalidUtf8 { offset: 2 }),
        (
            b"\"\xf4\x90\x80\x80\"",
            JsonError::InvalidUtf8 { offset: 2 },
        ),
        (b"\"\xe2\x82", JsonError::InvalidUtf8 { offset: 3 }),
        (b"\xff", JsonError::InvalidUtf8 { offset: 0 }),
        (b"1 \x80", JsonError::InvalidUtf8 { offset: 2 }),
        (b"\xc3\xa9", JsonError::Syntax { offset: 0 }),
        (b"1e10000", JsonError::NumberOutOfRange { offset: 0 }),
        (b"[-1e-99999]", JsonError::NumberOutOfRange { offset: 1 }),
    ];
    for (body, expected) in cases {
        assert_eq!(digest_split(body), Err(expected.clone()), "{:?}", body);
        // One grammar: the document reader refuses the same text with the same error (it
        // reports a duplicate where the repetition starts, and names the key).
        let Ok(text) = core::str::from_utf8(body) else {
            continue;
        };
        match (Value::parse(text), &expected) {
            (Err(JsonError::DuplicateKey { key: Some(_), .. }), JsonError::DuplicateKey { .. }) => {
            }
            (got, _) => assert_eq!(got, Err(expected), "{text:?}"),
        }
    }
}

/// Decimal fractions inside a chunk are read whole (their digits borrowed from both sides of the
/// `.`); cut anywhere, byte by byte: both give the same canonical values.
#[test]
fn fractions_read_whole_agree_with_the_byte_steps() {
    let body = b"[0.050,3.00,-0.0,300.00,1.5,-12.340,0.000,10.01,-0.001]";
    let values = [
        num("5e-2"),
        num("3e0"),
        num("0"),
        num("3e2"),
        num("15e-1"),
        num("-1234e-2"),
        num("0"),
        num("1001e-2"),
        num("-1e-3"),
    ];
    let mut parts: Vec<&[u8]> = vec![b"a"];
    parts.extend(values.iter().map(Vec::as_slice));
    parts.push(b"]");
    assert_eq!(digest_split(body), Ok(h(&parts)));
    // The magnitude bound, read whole and byte by byte: the same error at the token's start.
    let long = JsonLimits {
        max_number_len: u16::MAX,
        ..JsonLimits::default()
    };
    for (digits, zeros, want) in [(1usize, 9998usize, true), (1, 9999, false), (2, 9998, true)] {
        let mut body = b"[0.".to_vec();
        body.extend(vec![b'0'; zeros]);
        body.extend(vec![b'7'; digits]);
        body.extend(b"]");
        let whole = digest_with(&body, long, None);
        let mut hasher = JsonHasher::new(long, None);
        let bytewise = body
            .iter()
            .try_for_each(|b| hasher.update(&[*b]))
            .and_then(|()| hasher.finish());
        assert_eq!(whole, bytewise, "{digits} digits after {zeros} zeros");
        assert_eq!(
            whole.is_ok(),
            want,
            "{digits} digits after {zeros} zeros: {whole:?}"
        );
        if !want {
            assert_eq!(whole, Err(JsonError::NumberOutOfRange { offset: 1 }));
        }
    }
}

#[test]
fn numbers_are_bounded() {
    let limit = vec![b'1'; 64];
    assert!(digest_split(&limit).is_ok());
    let mut long = vec![b' ', b'['];
    long.extend(vec![b'1'; 65]);
    assert_eq!(digest(&long), Err(JsonError::NumberTooLong { offset: 2 }));
    let mut huge = vec![b'9'; 1 << 20];
    huge.push(b']');
    assert_eq!(digest(&huge), Err(JsonError::NumberTooLong { offset: 0 }));
    let tight = JsonLimits {
        max_number_len: 3,
        ..JsonLimits::default()
    };
    assert!(digest_with(b"1.5", tight, None).is_ok());
    assert_eq!(
        digest_with(b"-1.5", tight, None),
        Err(JsonError::NumberTooLong { offset: 0 })
    );
}

#[test]
fn depth_is_bounded_without_recursion() {
    let bomb = vec![b'['; 100_000];
    assert_eq!(
        digest(&bomb),
        Err(JsonError::TooDeep {
            offset: 64,
            max: 64
        })
    );
    let objects = b"{\"a\":".repeat(100_000);
    assert!(matches!(
        digest(&objects),
        Err(JsonError::TooDeep { max: 64, .. })
    ));
    let mut ok = vec![b'['; 64];
    ok.extend(vec![b']'; 64]);
    assert!(digest(&ok).is_ok());
    let flat = JsonLimits {
        max_depth: 0,
        ..JsonLimits::default()
    };
    assert_eq!(
        digest_with(b"[]", flat, None),
        Err(JsonError::TooDeep { offset: 0, max: 0 })
    );
    assert!(digest_with(b"1", flat, None).is_ok());
}

#[test]
fn errors_are_sticky() {
    let mut hasher = JsonHasher::new(JsonLimits::default(), None);
    assert_eq!(hasher.update(b"[1,,"), Err(JsonError::Syntax { offset: 3 }));
    assert_eq!(hasher.update(b"2]"), Err(JsonError::Syntax { offset: 3 }));
    assert_eq!(hasher.finish(), Err(JsonError::Syntax { offset: 3 }));
}

#[test]
fn pointers_parse_per_rfc_6901() {
    assert_eq!(JsonPointer::parse("").map(|p| p.tokens.len()), Ok(0));
    assert_eq!(JsonPointer::parse("/").map(|p| p.tokens.len()), Ok(1));
    let p = JsonPointer::parse("/a~1b/~0/01/7").unwrap();
    assert_eq!(p.as_str(), "/a~1b/~0/01/7");
    let keys: Vec<&str> = p.tokens.iter().map(|t| t.key.as_str()).collect();
    assert_eq!(keys, ["a/b", "~", "01", "7"]);
    assert_eq!(p.tokens[2].index, None);
    assert_eq!(p.tokens[3].index, Some(7));
    for bad in ["a", "/~", "/~2", "/a~"] {
        assert_eq!(
            JsonPointer::parse(bad),
            Err(JsonError::PointerInvalid),
            "{bad}"
        );
    }
}

fn fields_digest(body: &[u8], pointers: &[&str]) -> Result<[u8; 32], JsonError> {
    let parsed: Vec<JsonPointer> = pointers
        .iter()
        .map(|p| JsonPointer::parse(p).unwrap())
        .collect();
    let whole = digest_with(body, JsonLimits::default(), Some(&parsed));
    for cut in 0..=body.len() {
        let mut hasher = JsonHasher::new(JsonLimits::default(), Some(&parsed));
        let split = hasher
            .update(&body[..cut])
            .and_then(|()| hasher.update(&body[cut..]))
            .and_then(|()| hasher.finish());
        assert_eq!(split, whole, "cut at {cut}");
    }
    whole
}

fn fields_preimage(entries: &[(&str, Option<[u8; 32]>)]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(b"F");
    for (text, value) in entries {
        hasher.update((text.len() as u64).to_be_bytes());
        hasher.update(text.as_bytes());
        match value {
            None => hasher.update([0u8]),
            Some(v) => {
                hasher.update([1u8]);
                hasher.update(v);
            }
        }
    }
    hasher.finalize().into()
}

#[test]
fn fields_select_values_by_path() {
    let body =
        br#"{"amount":5,"items":[{"sku":"x"},{"sku":"y","n":[1,2]}],"a/b":{"~":true},"t":9}"#;
    let ptrs = [
        "/amount",
        "/items/1/sku",
        "/items/01/sku",
        "/a~1b/~0",
        "/missing",
        "/items/1/n/1",
        "/t/0",
    ];
    let expected = fields_preimage(&[
        ("/amount", Some(h(&[&num("5e0")]))),
        ("/items/1/sku", Some(h(&[&s(b"y")]))),
        ("/items/01/sku", None),
        ("/a~1b/~0", Some(h(&[b"t"]))),
        ("/missing", None),
        ("/items/1/n/1", Some(h(&[&num("2e0")]))),
        ("/t/0", None),
    ]);
    assert_eq!(fields_digest(body, &ptrs), Ok(expected));
    // Volatile fields outside the selection do not matter; order and spelling inside do not either.
    let other = br#"{"t":10,"a/b":{"~":true},"items":[{"sku":"z"},{"n":[1,2.0],"sku":"\u0079"}],"amount":5.0}"#;
    assert_eq!(fields_digest(other, &ptrs), Ok(expected));
    let root = digest(body).unwrap();
    assert_eq!(
        fields_digest(body, &[""]),
        Ok(fields_preimage(&[("", Some(root))]))
    );
    assert_eq!(
        fields_digest(b"", &["/a"]),
        Ok(fields_preimage(&[("/a", None)]))
    );
    assert_eq!(
        fields_digest(br#"{"a":1,"a":1}"#, &["/b"]),
        Err(JsonError::DuplicateKey {
            offset: 12,
            key: None
        })
    );
    // An escaped key matches its decoded token; a key that only starts like the token does not.
    let escaped = fields_digest(br#"{"a\/b":1,"ab":2,"abc":3}"#, &["/a~1b", "/ab"]);
    assert_eq!(
        escaped,
        Ok(fields_preimage(&[
            ("/a~1b", Some(h(&[&num("1e0")]))),
            ("/ab", Some(h(&[&num("2e0")])))
        ]))
    );
    assert_eq!(
        fields_digest(br#"[0,[1]]"#, &["/1/0", "/0"]),
        Ok(fields_preimage(&[
            ("/1/0", Some(h(&[&num("1e0")]))),
            ("/0", Some(h(&[&num("0")])))
        ]))
    );
}

#[test]
fn codes_and_messages_are_stable() {
    let e = JsonError::TooDeep { offset: 7, max: 64 };
    assert_eq!(e.code(), "json_too_deep");
    assert_eq!(
        alloc::format!("{e}"),
        "JSON nesting deeper than 64 levels at byte 7"
    );
    assert_eq!(JsonError::PointerInvalid.code(), "json_pointer_invalid");
    let end = JsonError::UnexpectedEnd { offset: 3 };
    assert_eq!(end.code(), "json_unexpected_end");
    assert_eq!(
        alloc::format!("{end}"),
        "JSON text ended at byte 3 before the value was complete"
    );
    assert_eq!(JsonError::Internal.code(), "json_internal");
}

/// Every variant's text, pinned: the texts are written without `write!` (no `core::fmt`
/// integer formatting in the browser module) and must read as the `write!` versions did, both
/// through `Display` and through `message()`.
#[test]
fn every_message_is_pinned() {
    let key = Some(alloc::string::String::from("a\"b"));
    let cases = [
        (
            JsonError::Syntax { offset: 0 },
            "JSON syntax error at byte 0",
        ),
        (
            JsonError::UnexpectedEnd { offset: 12 },
            "JSON text ended at byte 12 before the value was complete",
        ),
        (
            JsonError::TrailingData { offset: 5 },
            "unexpected data after the JSON value at byte 5",
        ),
        (
            JsonError::TooDeep {
                offset: u64::MAX,
                max: u16::MAX,
            },
            "JSON nesting deeper than 65535 levels at byte 18446744073709551615",
        ),
        (
            JsonError::DuplicateKey {
                offset: 40,
                key: None,
            },
            "duplicate key in the JSON object closed at byte 40",
        ),
        (
            JsonError::DuplicateKey { offset: 9, key },
            "duplicate key `a\"b` at byte 9",
        ),
        (
            JsonError::InvalidUtf8 { offset: 100 },
            "invalid UTF-8 at byte 100",
        ),
        (
            JsonError::InvalidEscape { offset: 1 },
            "invalid string escape or lone surrogate at byte 1",
        ),
        (
            JsonError::ControlCharacter { offset: 10 },
            "unescaped control character in a JSON string at byte 10",
        ),
        (
            JsonError::NumberTooLong { offset: 3 },
            "JSON number at byte 3 exceeds the length limit",
        ),
        (
            JsonError::NumberOutOfRange { offset: 1_000_000 },
            "JSON number at byte 1000000 is beyond 10^±9999 in magnitude",
        ),
        (
            JsonError::PointerInvalid,
            "field selector is not a valid JSON pointer (RFC 6901)",
        ),
        (JsonError::Internal, "internal error in the JSON reader"),
    ];
    for (error, text) in cases {
        assert_eq!(alloc::format!("{error}"), text);
        assert_eq!(error.message(), text);
    }
}
