use super::*;
use alloc::string::ToString;

fn parse(text: &str) -> Result<Value, JsonError> {
    Value::parse(text)
}

#[test]
fn parses_every_kind_and_keeps_member_order() {
    let v = parse(r#" {"b": [1, -2.5e3, true, false, null], "a": "x\ty", "c": {}} "#).unwrap();
    let members = v.as_object().unwrap();
    assert_eq!(members[0].0, "b");
    assert_eq!(members[1].0, "a");
    assert_eq!(v.get("a").and_then(Value::as_str), Some("x\ty"));
    let list = v.get("b").and_then(Value::as_array).unwrap();
    assert_eq!(list[0].as_u64(), Some(1));
    assert_eq!(list[1].as_number().map(Number::as_str), Some("-2.5e3"));
    assert_eq!(list[1].as_u64(), None);
    assert_eq!(list[2], Value::Bool(true));
    assert!(list[4].is_null());
    assert_eq!(
        v.to_string(),
        r#"{"b":[1,-2.5e3,true,false,null],"a":"x\ty","c":{}}"#
    );
}

#[test]
fn integers_are_exact() {
    assert_eq!(
        parse("18446744073709551615").unwrap().as_u64(),
        Some(u64::MAX)
    );
    assert_eq!(parse("18446744073709551616").unwrap().as_u64(), None);
    assert_eq!(
        parse("-9223372036854775808").unwrap().as_i64(),
        Some(i64::MIN)
    );
    assert_eq!(parse("-1").unwrap().as_u64(), None);
    assert_eq!(parse("1.0").unwrap().as_u64(), None);
    assert_eq!(parse("1e2").unwrap().as_i64(), None);
    assert_eq!(parse("65535").unwrap().as_u16(), Some(65535));
    assert_eq!(parse("65536").unwrap().as_u16(), None);
    assert_eq!(parse("65536").unwrap().as_u32(), Some(65536));
    assert_eq!(Value::from(u64::MAX).to_string(), "18446744073709551615");
}

#[test]
fn quoted_text_is_one_json_string_whatever_it_holds() {
    for text in [
        "paid",
        "",
        "a\"b\\c",
        "line\nforged: entry\r\t\u{0}\u{1f}",
        "é ✓",
    ] {
        let quoted = Quoted(text).to_string();
        assert_eq!(quoted, Value::String(text.into()).to_string());
        assert_eq!(parse(&quoted), Ok(Value::String(text.into())), "{quoted}");
        assert!(!quoted.contains(['\n', '\r']), "{quoted}");
    }
}

#[test]
fn strings_decode_escapes_and_surrogate_pairs() {
    let v = parse(r#""\"\\\/\b\f\n\r\t\u0041\u00e9\ud83d\ude00é""#).unwrap();
    assert_eq!(v.as_str(), Some("\"\\/\u{8}\u{c}\n\r\tAé😀é"));
    // Written back the way serde_json writes it.
    assert_eq!(v.to_string(), "\"\\\"\\\\/\\b\\f\\n\\r\\tAé😀é\"");
    assert_eq!(
        Value::from("\u{1}\u{1f}\u{7f}").to_string(),
        "\"\\u0001\\u001f\u{7f}\""
    );
}

#[test]
fn errors_carry_offsets() {
    use JsonError::*;
    let cases: &[(&str, JsonError)] = &[
        ("", UnexpectedEnd { offset: 0 }),
        ("   ", UnexpectedEnd { offset: 3 }),
        ("[1,", UnexpectedEnd { offset: 3 }),
        ("{\"a\"", UnexpectedEnd { offset: 4 }),
        ("tru", UnexpectedEnd { offset: 3 }),
        ("trux", Syntax { offset: 3 }),
        ("{ttl: 1}", Syntax { offset: 1 }),
        ("[1,]", Syntax { offset: 3 }),
        ("{\"a\":1,}", Syntax { offset: 7 }),
        ("01", TrailingData { offset: 1 }),
        ("1.", UnexpectedEnd { offset: 2 }),
        ("1.x", Syntax { offset: 2 }),
        ("-", UnexpectedEnd { offset: 1 }),
        ("+1", Syntax { offset: 0 }),
        ("1 2", TrailingData { offset: 2 }),
        ("\"a\u{1}\"", ControlCharacter { offset: 2 }),
        ("\"\\x\"", InvalidEscape { offset: 2 }),
        ("\"\\u12g4\"", InvalidEscape { offset: 5 }),
        ("\"\\ud800\"", InvalidEscape { offset: 7 }),
        // The tokenizer's offsets (the last hex digit of the offending unit).
        ("\"\\ud800\\u0041\"", InvalidEscape { offset: 12 }),
        ("\"\\udc00\"", InvalidEscape { offset: 6 }),
        ("[1e10000]", NumberOutOfRange { offset: 1 }),
        (
            "{\"a\":1,\"b\":2,\"a\":3}",
            DuplicateKey {
                offset: 13,
                key: Some("a".into()),
            },
        ),
    ];
    for (text, want) in cases {
        assert_eq!(parse(text).as_ref(), Err(want), "{text:?}");
    }
}

/// The hasher's number limits are the grammar's: a document number is at most 64 bytes and
/// within 10^±9999 (this reader used to take any length and any exponent).
#[test]
fn numbers_are_bounded_like_bodies() {
    let long = "1".repeat(64);
    assert_eq!(parse(&long).unwrap().as_number().unwrap().as_str(), long);
    assert_eq!(
        parse(&alloc::format!("[{long}1]")),
        Err(JsonError::NumberTooLong { offset: 1 })
    );
    assert!(parse("[1e9999, -1e-9999, 0e99999, 1e400]").is_ok());
    assert_eq!(
        parse("{\"a\": 1e10000}"),
        Err(JsonError::NumberOutOfRange { offset: 6 })
    );
}

/// Beyond 16 members the small sort switches to heapsort: the first repetition still wins.
#[test]
fn the_first_repeated_key_is_reported_in_large_objects() {
    let mut text = alloc::string::String::from("{");
    for i in (0..40).rev() {
        text.push_str(&alloc::format!("\"k{i:02}\":{i},"));
    }
    let first = text.len();
    text.push_str("\"k07\":0,\"k30\":0,\"k07\":1}");
    assert_eq!(
        parse(&text),
        Err(JsonError::DuplicateKey {
            offset: first as u64,
            key: Some("k07".into())
        })
    );
}

#[test]
fn nesting_is_bounded() {
    let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
    assert!(parse(&ok).is_ok());
    let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
    assert_eq!(
        parse(&deep),
        Err(JsonError::TooDeep {
            offset: MAX_DEPTH as u64,
            max: 64
        })
    );
    // Far deeper than any stack would survive unbounded: refused, not a crash.
    let hostile = "[{\"a\":".repeat(100_000);
    assert!(matches!(parse(&hostile), Err(JsonError::TooDeep { .. })));
}

#[test]
fn builders_write_json() {
    let v = Value::object([
        ("n", Value::from(7u16)),
        ("s", Value::from(Some("x"))),
        ("none", Value::from(None::<u64>)),
        ("pairs", Value::from(alloc::vec![("a", "b")])),
    ]);
    assert_eq!(
        v.to_string(),
        r#"{"n":7,"s":"x","none":null,"pairs":[["a","b"]]}"#
    );
    assert_eq!(parse(&v.to_string()), Ok(v));
}
