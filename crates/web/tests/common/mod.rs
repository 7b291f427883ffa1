//! The wasm-bindgen tests shared by the Node (`tests/node.rs`) and browser (`tests/browser.rs`)
//! targets: the exports, called as JavaScript calls them, give the native core's answers, and
//! errors arrive as JS `Error`s with the core's code.
// `#[wasm_bindgen_test]` functions are tests, but clippy's test allowances only know `#[test]`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use idemgate_core::request::fingerprint::{FingerprintBuilder, FingerprintMode, FingerprintSpec};
use idemgate_json::{JsonLimits, JsonPointer, Value};
use idemgate_web::fingerprint::Fingerprinter;
use idemgate_web::transition::StateTable;
use idemgate_web::{intent, key, outline, retry, target};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::wasm_bindgen_test;

/// The `code` and `name` of a thrown JS value.
fn code_of(error: JsValue) -> (String, String) {
    let get = |name: &str| {
        js_sys::Reflect::get(&error, &JsValue::from_str(name))
            .ok()
            .and_then(|v| v.as_string())
            .unwrap_or_default()
    };
    assert!(
        error.is_instance_of::<js_sys::Error>(),
        "not an Error: {error:?}"
    );
    (get("code"), get("name"))
}

/// `StateTable.declare` as `js/table.js` calls it: the declaration parsed, then its outline.
fn declare(json: &str) -> Result<StateTable, JsValue> {
    let (mut text, mut shape) = (Vec::new(), Vec::new());
    outline::write(&Value::parse(json).unwrap(), &mut text, &mut shape);
    StateTable::declare(&text, &shape)
}

/// One header value through the export that parses every occurrence.
fn parse_key(value: &[u8]) -> Result<Option<String>, JsValue> {
    key::parse_key_values(value, &[value.len() as u32])
}

#[wasm_bindgen_test]
fn new_key_is_a_uuid_v4_of_the_given_randomness() {
    let a = key::new_key(&[0xff; 16]).unwrap();
    let b = key::new_key(&[0x00; 16]).unwrap();
    assert_eq!(a, "ffffffff-ffff-4fff-bfff-ffffffffffff");
    assert_eq!(b, "00000000-0000-4000-8000-000000000000");
    for k in [&a, &b] {
        assert_eq!(parse_key(k.as_bytes()).unwrap().as_ref(), Some(k));
    }
    assert_eq!(
        code_of(key::new_key(&[1; 8]).unwrap_err()).0,
        "invalid_argument"
    );
}

#[wasm_bindgen_test]
fn parse_key_errors_are_js_errors_with_the_core_code() {
    assert_eq!(parse_key(b"\"abc\"").unwrap().as_deref(), Some("abc"));
    let cases: [(&[u8], &str); 4] = [
        (b"", "key_empty"),
        (b"a b", "key_invalid_character"),
        (b"\"abc", "key_malformed_quoted_string"),
        ("é".as_bytes(), "key_non_ascii"),
    ];
    for (value, code) in cases {
        let error = parse_key(value).unwrap_err();
        assert_eq!(code_of(error), (code.into(), "IdemgateError".into()));
    }
    let conflict = key::parse_key_values(b"abcabd", &[3, 3]).unwrap_err();
    assert_eq!(code_of(conflict).0, "key_conflicting");
    assert_eq!(key::parse_key_values(b"", &[]).unwrap(), None);
}

fn native(mode: FingerprintMode, body: &[u8]) -> String {
    let spec = FingerprintSpec {
        mode,
        headers: vec!["content-type".into()],
        json_limits: JsonLimits::default(),
    };
    let headers = [("content-type", &b"application/json"[..])];
    let mut builder = FingerprintBuilder::new(&spec, "POST", "/orders?a=1", headers);
    builder.update(body).unwrap();
    idemgate_core::hash::to_hex(&builder.finish().unwrap().0)
}

/// Method, path, fields, header names, then header name/value pairs, joined with their lengths.
fn fingerprinter(mode: &str, fields: &[&str]) -> Result<Fingerprinter, JsValue> {
    let mut parts: Vec<&[u8]> = vec![b"POST", b"/orders?a=1"];
    parts.extend(fields.iter().map(|f| f.as_bytes()));
    parts.push(b"Content-Type");
    parts.extend([
        &b"content-type"[..],
        b"application/json",
        b"x-other",
        b"ignored",
    ]);
    let lengths: Vec<u32> = parts.iter().map(|p| p.len() as u32).collect();
    let fields = fields.len() as u32;
    Fingerprinter::new(
        Some(mode.into()),
        None,
        None,
        None,
        &parts.concat(),
        &lengths,
        fields,
        Some(1),
    )
}

fn exported(mode: &str, fields: &[&str], chunks: &[&[u8]]) -> Result<String, JsValue> {
    let mut fp = fingerprinter(mode, fields)?;
    for chunk in chunks {
        fp.update(chunk)?;
    }
    fp.finish()
}

#[wasm_bindgen_test]
fn fingerprints_match_the_native_core() {
    let body = br#"{"sku":"A1","qty":2,"at":"2024-01-01"}"#;
    let chunks: Vec<&[u8]> = body.chunks(5).collect();
    let modes = [
        ("raw", FingerprintMode::Raw),
        ("json", FingerprintMode::Json),
        ("none", FingerprintMode::None),
    ];
    for (name, mode) in modes {
        assert_eq!(
            exported(name, &[], &chunks).unwrap(),
            native(mode, body),
            "{name}"
        );
    }
    let pointers = vec![
        JsonPointer::parse("/sku").unwrap(),
        JsonPointer::parse("/qty").unwrap(),
    ];
    assert_eq!(
        exported("fields", &["/sku", "/qty"], &chunks).unwrap(),
        native(FingerprintMode::Fields(pointers.into()), body)
    );
    // Member order and whitespace do not matter in json mode.
    let reordered = br#"{ "qty": 2, "at": "2024-01-01", "sku": "A1" }"#;
    assert_eq!(
        exported("json", &[], &[reordered]).unwrap(),
        native(FingerprintMode::Json, body)
    );
}

#[wasm_bindgen_test]
fn fingerprint_errors_carry_codes() {
    let err = exported("json", &[], &[b"{\"a\":1,"]).unwrap_err();
    assert_eq!(code_of(err).0, "json_unexpected_end");
    let err = exported("fields", &["no-slash"], &[]).unwrap_err();
    assert_eq!(code_of(err).0, "json_pointer_invalid");
    let err = fingerprinter("xml", &[]).err().unwrap();
    assert_eq!(code_of(err).0, "invalid_argument");
    let short = Fingerprinter::new(None, None, None, None, b"POST", &[4], 0, None);
    assert_eq!(code_of(short.err().unwrap()).0, "invalid_argument");
    let mut fp = fingerprinter("raw", &[]).unwrap();
    fp.finish().unwrap();
    assert_eq!(code_of(fp.finish().unwrap_err()).0, "fingerprinter_state");
}

/// A member of a plain JS object an export answered (`{retry, delayMs}` …), as JSON text.
fn member(object: &JsValue, name: &str) -> String {
    assert!(object.is_object(), "not an object: {object:?}");
    let value = js_sys::Reflect::get(object, &JsValue::from_str(name)).unwrap();
    js_sys::JSON::stringify(&value)
        .map(String::from)
        .unwrap_or_default()
}

#[wasm_bindgen_test]
fn retry_and_transitions_answer_objects() {
    let next = |outcome: &str, status: u16, retry_after: Option<&str>, attempts: u32| {
        retry::retry_next(
            5,
            250.0,
            10_000.0,
            30_000.0,
            attempts,
            0.0,
            outcome,
            status,
            retry_after.map(String::from),
            784_111_777_000.0,
            1 << 31,
        )
    };
    let delay = |answer: JsValue| (member(&answer, "retry"), member(&answer, "delayMs"));
    let stop = |answer: JsValue| (member(&answer, "retry"), member(&answer, "reason"));
    let yes = |ms: &str| ("true".to_string(), ms.to_string());
    assert_eq!(
        delay(next("network_error", 0, None, 1).unwrap()),
        yes("125")
    );
    assert_eq!(
        delay(next("response", 429, Some("3"), 1).unwrap()),
        yes("3000")
    );
    let date = Some("Sun, 06 Nov 1994 08:49:47 GMT");
    assert_eq!(delay(next("response", 503, date, 1).unwrap()), yes("10000"));
    let no = |why: &str| ("false".to_string(), format!("\"{why}\""));
    assert_eq!(
        stop(next("response", 422, None, 1).unwrap()),
        no("not_retryable")
    );
    assert_eq!(
        stop(next("response", 504, None, 5).unwrap()),
        no("retry_exhausted_attempts")
    );
    assert_eq!(
        code_of(next("sneezed", 0, None, 1).unwrap_err()).0,
        "invalid_argument"
    );
    let negative = retry::retry_next(5, -1.0, 0.0, 0.0, 1, 0.0, "timeout", 0, None, 0.0, 0);
    assert_eq!(code_of(negative.unwrap_err()).0, "invalid_argument");
    assert_eq!(retry::parse_retry_after("7", 0.0).unwrap(), Some(7000.0));
    assert_eq!(retry::parse_retry_after("soon", 0.0).unwrap(), None);
    assert_eq!(retry::classify_status(409), "in_flight");

    let submit = StateTable::submit().unwrap();
    let step = |state: &str, event: &str| {
        let answer = submit.answer(state, event, false).unwrap();
        (member(&answer, "outcome"), member(&answer, "state"))
    };
    let pair = |a: &str, b: &str| (format!("\"{a}\""), format!("\"{b}\""));
    assert_eq!(step("idle", "submit"), pair("apply", "in_flight"));
    assert_eq!(
        step("in_flight", "submit"),
        pair("already_applied", "in_flight")
    );
    // A submit after success is "already applied" (the intent is over; a new one needs `reset`).
    assert_eq!(
        step("succeeded", "submit"),
        pair("already_applied", "succeeded")
    );
    assert!(intent::intent_is_over("succeeded"));
    let illegal = submit.answer("idle", "succeed", false).unwrap_err();
    assert_eq!(code_of(illegal).0, "transition_illegal");

    // A table of the application's own, declared as data (the edge's `order.table` format).
    let order = declare(
        r#"{"initial": "unpaid", "transitions": [["unpaid", "pay", "paid"], ["paid", "ship", "shipped"]]}"#,
    )
    .unwrap();
    let shape = order.describe();
    assert_eq!(member(&shape, "initial"), "\"unpaid\"");
    assert_eq!(member(&shape, "terminal"), "[\"shipped\"]");
    let arrival = order.answer("unpaid", "ship", true).unwrap();
    assert_eq!(member(&arrival, "outcome"), "\"early\"");
    assert_eq!(member(&arrival, "state"), "\"unpaid\"");
    let refused = declare(r#"{"transitions": [["a", "go"]]}"#).err().unwrap();
    assert_eq!(
        code_of(refused),
        ("transition_table_malformed".into(), "IdemgateError".into())
    );

    let settled = intent::settle(503);
    assert_eq!(member(&settled, "event"), "\"fail_retryable\"");
    assert_eq!(member(&settled, "keepsKey"), "true");
}

/// Browser–edge parity: what the page fingerprints is what the edge sees.
#[wasm_bindgen_test]
fn the_browser_spells_a_request_as_the_edge_does() {
    let seen = target::request_target("post", "/Orders//x;v=1?Q=A", None);
    assert_eq!(member(&seen, "method"), "\"POST\"");
    assert_eq!(member(&seen, "path"), "\"/orders/x?Q=A\"");
    let print = |method: &str, path: &str, case_sensitive: Option<bool>| {
        let parts: [&[u8]; 2] = [method.as_bytes(), path.as_bytes()];
        let lengths = [parts[0].len() as u32, parts[1].len() as u32];
        let mut fp = Fingerprinter::new(
            Some("raw".into()),
            None,
            None,
            case_sensitive,
            &parts.concat(),
            &lengths,
            0,
            Some(0),
        )
        .unwrap();
        fp.finish().unwrap()
    };
    assert_eq!(
        print("post", "/Orders", None),
        print("POST", "/orders", None)
    );
    assert_ne!(
        print("post", "/Orders", Some(true)),
        print("POST", "/orders", Some(true))
    );
    assert_ne!(
        print("patch", "/orders", None),
        print("PATCH", "/orders", None)
    );
}
