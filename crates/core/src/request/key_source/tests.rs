use super::*;
use alloc::vec;

fn sources(list: &[KeySource]) -> Arc<[KeySource]> {
    list.to_vec().into()
}

fn header(name: &str) -> KeySource {
    KeySource::Header(name.into())
}

fn json(pointer: &str) -> KeySource {
    KeySource::Json(JsonPointer::parse(pointer).unwrap())
}

/// Runs a search over `headers` and a body delivered in 2-byte chunks.
fn find(
    list: &[KeySource],
    headers: &[(&str, &str)],
    body: &str,
) -> Result<Option<String>, &'static str> {
    let sources = sources(list);
    let lookup = |name: &str| crate::testing::header_values(headers, name);
    let found = match start(&sources, &lookup).map_err(|e| e.code())? {
        KeyStart::Decided(key) => Ok(key),
        KeyStart::Body(mut search) => {
            for chunk in body.as_bytes().chunks(2) {
                search.update(chunk);
            }
            search.finish()
        }
    };
    found
        .map(|k| k.map(|k| k.as_str().into()))
        .map_err(|e| e.code())
}

#[test]
fn headers_decide_without_the_body() {
    let sources = sources(&[header("idempotency-key")]);
    let start = start(&sources, &|_| vec![b"k1".as_slice()]).unwrap();
    assert!(matches!(start, KeyStart::Decided(Some(_))));
    assert_eq!(find(&[header("idempotency-key")], &[], ""), Ok(None));
    assert_eq!(
        find(
            &[header("x-github-delivery")],
            &[("x-github-delivery", "72d3162e-cc78")],
            ""
        ),
        Ok(Some("72d3162e-cc78".into()))
    );
}

#[test]
fn first_present_source_wins() {
    let list = [json("/id"), header("x-delivery")];
    let hdr = [("x-delivery", "from-header")];
    assert_eq!(
        find(&list, &hdr, r#"{"id":"evt_1"}"#),
        Ok(Some("evt_1".into()))
    );
    assert_eq!(
        find(&list, &hdr, r#"{"other":1}"#),
        Ok(Some("from-header".into()))
    );
    assert_eq!(find(&list, &[], r#"{"other":1}"#), Ok(None));
    let list = [header("x-delivery"), json("/id")];
    let start = start(&sources(&list), &|n| {
        if n == "x-delivery" {
            vec![b"h".as_slice()]
        } else {
            vec![]
        }
    })
    .unwrap();
    assert!(
        matches!(start, KeyStart::Decided(Some(_))),
        "a header first needs no body"
    );
    assert_eq!(
        find(&list, &[], r#"{"id":"evt_1"}"#),
        Ok(Some("evt_1".into()))
    );
}

#[test]
fn json_values() {
    let list = [json("/data/object/id"), json("/n"), json("/items/1")];
    assert_eq!(
        find(&list[..1], &[], r#"{"data":{"object":{"id":"ch_1"}}}"#),
        Ok(Some("ch_1".into()))
    );
    assert_eq!(
        find(&list[1..2], &[], r#"{"n":12345}"#),
        Ok(Some("12345".into()))
    );
    assert_eq!(
        find(&list[2..], &[], r#"{"items":["a","b"]}"#),
        Ok(Some("b".into()))
    );
    assert_eq!(
        find(&list[1..2], &[], r#"{"n":{"x":1}}"#),
        Err("key_not_text")
    );
    assert_eq!(find(&list[1..2], &[], r#"{"n":null}"#), Err("key_not_text"));
    // The same rules as the header: length, characters.
    assert_eq!(
        find(&list[1..2], &[], r#"{"n":"a b"}"#),
        Err("key_invalid_character")
    );
    assert_eq!(find(&list[1..2], &[], r#"{"n":""}"#), Err("key_empty"));
    let long = format!(r#"{{"n":"{}"}}"#, "a".repeat(256));
    assert_eq!(find(&list[1..2], &[], &long), Err("key_too_long"));
    assert_eq!(find(&list[1..2], &[], r#"{"n":"é"}"#), Err("key_non_ascii"));
    // Not JSON: refused, never "no key" — on an optional-key route that would pass the
    // request through unguarded.
    assert_eq!(find(&list[1..2], &[], "n=1"), Err("key_body_unreadable"));
    assert_eq!(find(&list[1..2], &[], ""), Err("key_body_unreadable"));
}

#[test]
fn json_numbers_are_keys_by_value() {
    let list = [json("/n")];
    for body in [
        r#"{"n":100}"#,
        r#"{"n":1e2}"#,
        r#"{"n":100.0}"#,
        r#"{"n":1.00E+2}"#,
    ] {
        assert_eq!(find(&list, &[], body), Ok(Some("100".into())), "{body}");
    }
    assert_eq!(find(&list, &[], r#"{"n":-0.0}"#), Ok(Some("0".into())));
    assert_eq!(find(&list, &[], r#"{"n":1.5}"#), Ok(Some("15e-1".into())));
    // A string is its spelling: "1e2" is not 100.
    assert_eq!(find(&list, &[], r#"{"n":"1e2"}"#), Ok(Some("1e2".into())));
    assert_eq!(find(&list, &[], r#"{"n":1e300}"#), Ok(Some("1e300".into())));
}

#[test]
fn a_body_one_of_the_sources_reads_is_not_refused() {
    let list = [json("/id"), KeySource::Form("id".into())];
    let form = [("content-type", "application/x-www-form-urlencoded")];
    assert_eq!(find(&list, &form, "id=f-1"), Ok(Some("f-1".into())));
    assert_eq!(find(&list, &[], r#"{"id":"j-1"}"#), Ok(Some("j-1".into())));
    assert_eq!(find(&list, &form, "other=1"), Ok(None));
    assert_eq!(
        find(&list, &[("content-type", "text/plain")], "id=1"),
        Err("key_body_unreadable")
    );
    // A header found before the body sources decides; the body is never looked at.
    let list = [header("x-id"), json("/id")];
    assert_eq!(
        find(&list, &[("x-id", "h")], "not json"),
        Ok(Some("h".into()))
    );
    assert_eq!(find(&list, &[], "not json"), Err("key_body_unreadable"));
}

#[test]
fn cloud_events_binary_and_structured() {
    let list = [KeySource::CloudEvent];
    let binary = find(
        &list,
        &[
            ("ce-source", "/shop"),
            ("ce-id", "A-1"),
            ("content-type", "application/json"),
        ],
        "{}",
    )
    .unwrap()
    .unwrap();
    assert!(binary.starts_with("ce:") && binary.len() == 67, "{binary}");
    let structured = find(
        &list,
        &[(
            "content-type",
            "application/cloudevents+json; charset=utf-8",
        )],
        r#"{"specversion":"1.0","id":"A-1","source":"/shop","type":"t"}"#,
    )
    .unwrap()
    .unwrap();
    assert_eq!(binary, structured, "one event in either mode is one key");
    let other_source = find(&list, &[("ce-source", "/bank"), ("ce-id", "A-1")], "")
        .unwrap()
        .unwrap();
    assert_ne!(
        binary, other_source,
        "the same id from another source is another event"
    );
    // Length-prefixed: ("/a", "bc") and ("/ab", "c") differ.
    assert_ne!(
        find(&list, &[("ce-source", "/a"), ("ce-id", "bc")], ""),
        find(&list, &[("ce-source", "/ab"), ("ce-id", "c")], "")
    );
    assert_eq!(find(&list, &[], ""), Ok(None));
    assert_eq!(
        find(&list, &[("ce-id", "A-1")], ""),
        Err("cloudevent_incomplete")
    );
    assert_eq!(
        find(
            &list,
            &[("ce-source", "/s"), ("ce-id", "1"), ("ce-id", "2")],
            ""
        ),
        Err("key_conflicting")
    );
    let structured = [("content-type", "application/cloudevents+json")];
    assert_eq!(
        find(&list, &structured, r#"{"id":"A-1"}"#),
        Err("cloudevent_incomplete")
    );
    assert_eq!(
        find(&list, &structured, r#"{"id":1,"source":"/s"}"#),
        Err("cloudevent_incomplete")
    );
    assert_eq!(find(&list, &structured, "nope"), Err("key_body_unreadable"));
    assert_eq!(
        find(
            &list,
            &[("content-type", "application/cloudevents-batch+json")],
            "[]"
        ),
        Err("cloudevents_batch_unsupported")
    );
}

#[test]
fn form_fields() {
    let list = [KeySource::Form("client token".into())];
    let form = [(
        "content-type",
        "application/x-www-form-urlencoded; charset=utf-8",
    )];
    assert_eq!(
        find(&list, &form, "amount=5&client+token=abc%40x&z"),
        Ok(Some("abc@x".into()))
    );
    assert_eq!(
        find(&list, &form, "client%20token=a&client+token=a"),
        Ok(Some("a".into()))
    );
    assert_eq!(
        find(&list, &form, "client+token=a&client+token=b"),
        Err("key_conflicting")
    );
    assert_eq!(
        find(&list, &form, "client+token=a%20b"),
        Err("key_invalid_character")
    );
    assert_eq!(
        find(&list, &form, "client+token=50%"),
        Ok(Some("50%".into()))
    );
    assert_eq!(find(&list, &form, "amount=5"), Ok(None));
    // Not a form body: refused, never "no key".
    assert_eq!(
        find(&list, &[("content-type", "text/plain")], "client+token=a"),
        Err("key_body_unreadable")
    );
}

#[test]
fn describes_where_it_looked() {
    let list = [
        header("x-github-delivery"),
        json("/id"),
        KeySource::Form("id".into()),
    ];
    assert_eq!(
        describe_sources(&list),
        "the x-github-delivery header, the JSON body field /id or the form field id"
    );
}
