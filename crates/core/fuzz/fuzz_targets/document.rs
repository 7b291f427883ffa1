//! `json::Value::parse` (the configuration and vector reader) on arbitrary UTF-8, with serde_json
//! as an independent oracle.
//!
//! Checks: never panics; error offsets lie inside the text; whatever the core accepts serde_json
//! accepts too (except numbers beyond f64 range, which the core keeps as text) and reads as the
//! same value, integers included; whatever serde_json accepts the core accepts too, except
//! duplicate keys, nesting deeper than `MAX_DEPTH` and numbers beyond the grammar's limits (64
//! bytes, 10^±9999: the hasher's, as the core has one JSON grammar), refused on purpose; and
//! writing a parsed value back out parses to the same value.
#![no_main]

use idemgate_json::document::MAX_DEPTH;
use idemgate_json::{JsonError, Value};
use libfuzzer_sys::fuzz_target;

/// The core's value and serde_json's agree, member order aside.
fn agree(ours: &Value, theirs: &serde_json::Value) -> bool {
    use serde_json::Value as S;
    match (ours, theirs) {
        (Value::Null, S::Null) => true,
        (Value::Bool(a), S::Bool(b)) => a == b,
        (Value::String(a), S::String(b)) => a == b,
        // Integers exactly (how `-0` is stored is serde_json's business), everything as f64 —
        // read from serde_json's text, since its `as_f64` is `None` beyond f64's range (`1e400`),
        // which both readers accept.
        (Value::Number(a), S::Number(b)) => {
            (a.as_u64() == b.as_u64() || a.as_str().starts_with('-'))
                && a.as_str().parse::<f64>().ok() == b.to_string().parse::<f64>().ok()
        }
        (Value::Array(a), S::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| agree(x, y))
        }
        (Value::Object(a), S::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(k, v)| b.get(k).is_some_and(|theirs| agree(v, theirs)))
        }
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let ours = Value::parse(text);
    let theirs = serde_json::from_str::<serde_json::Value>(text);
    match (&ours, &theirs) {
        (Ok(value), Ok(oracle)) => {
            assert!(agree(value, oracle), "{text:?}: {value:?} vs {oracle:?}");
            let written = value.to_string();
            assert_eq!(
                Value::parse(&written).as_ref(),
                Ok(value),
                "round trip through {written:?}"
            );
            let reread: serde_json::Value =
                serde_json::from_str(&written).expect("serde_json reads what the core writes");
            assert_eq!(&reread, oracle, "{written:?}");
        }
        (Ok(_), Err(e)) => assert!(
            e.to_string().contains("number out of range"),
            "core accepts what serde_json refuses ({e}): {text:?}"
        ),
        (Err(e), Ok(_)) => assert!(
            matches!(
                e,
                JsonError::DuplicateKey { .. }
                    | JsonError::TooDeep { .. }
                    | JsonError::NumberTooLong { .. }
                    | JsonError::NumberOutOfRange { .. }
            ),
            "core refuses what serde_json accepts ({e}): {text:?}"
        ),
        (Err(_), Err(_)) => {}
    }
    if let Err(e) = &ours {
        let offset = e.offset().expect("a document error has an offset");
        assert!(
            offset <= text.len() as u64,
            "{e:?} outside {} bytes",
            text.len()
        );
        if let JsonError::TooDeep { offset, .. } = e {
            assert!(*offset >= MAX_DEPTH as u64);
        }
    }
});
