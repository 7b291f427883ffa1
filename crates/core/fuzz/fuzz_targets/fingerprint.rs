//! `FingerprintBuilder` in each mode (raw, json, fields, none, auto, form).
//!
//! Input: `mode` (`% 6`: raw, json, fields, none, auto, form), a split spec, then
//! `method \n path \n headers \n body`, where headers are `name:value` entries separated by 0x1f.
//! The spec fingerprints `content-type` and `x-tenant`; fields mode selects `/sku` and `/qty`.
//!
//! Checks: chunking never changes the result; raw never fails; json/fields fail exactly when the
//! JSON hasher does, with its error, form exactly when the form hasher does; auto is the explicit
//! mode its `Content-Type` picks, fingerprint for fingerprint; none ignores method, path, headers
//! and body; header names match case-insensitively and headers outside the spec do not count.
#![no_main]

use idemgate_core::request::fingerprint::{
    FingerprintBuilder, FingerprintError, FingerprintMode, FingerprintSpec,
};
use idemgate_core::request::form::FormHasher;
use idemgate_core::request::media_type::BodyKind;
use idemgate_core_fuzz::{chunks, Input, BYTEWISE_MAX};
use idemgate_json::{JsonHasher, JsonPointer};
use libfuzzer_sys::fuzz_target;

type Headers<'a> = Vec<(&'a str, &'a [u8])>;

fn fingerprint(
    spec: &FingerprintSpec,
    method: &str,
    path: &str,
    headers: &Headers<'_>,
    pieces: &[&[u8]],
) -> Result<[u8; 32], FingerprintError> {
    let mut builder = FingerprintBuilder::new(spec, method, path, headers.iter().copied());
    for piece in pieces {
        // The builder keeps the JSON hasher's sticky error, so feeding on after an error is fine.
        let _ = builder.update(piece);
    }
    builder.finish().map(|f| f.0)
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let mode_byte = input.byte();
    let cuts = input.splits();
    let method = String::from_utf8_lossy(input.until(b'\n')).into_owned();
    let path = String::from_utf8_lossy(input.until(b'\n')).into_owned();
    let header_line = input.until(b'\n');
    let body = input.rest();

    let header_entries: Vec<(String, Vec<u8>)> = header_line
        .split(|&b| b == 0x1f)
        .filter(|e| !e.is_empty())
        .map(|entry| match entry.iter().position(|&b| b == b':') {
            Some(i) => (
                String::from_utf8_lossy(&entry[..i]).into_owned(),
                entry[i + 1..].to_vec(),
            ),
            None => (String::from_utf8_lossy(entry).into_owned(), Vec::new()),
        })
        .collect();
    let headers: Headers<'_> = header_entries
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_slice()))
        .collect();

    let pointers = vec![
        JsonPointer::parse("/sku").unwrap(),
        JsonPointer::parse("/qty").unwrap(),
    ];
    let mode = match mode_byte % 6 {
        0 => FingerprintMode::Raw,
        1 => FingerprintMode::Json,
        2 => FingerprintMode::Fields(pointers.clone().into()),
        3 => FingerprintMode::None,
        4 => FingerprintMode::Auto,
        _ => FingerprintMode::Form,
    };
    let spec = FingerprintSpec {
        mode: mode.clone(),
        headers: vec!["content-type".into(), "x-tenant".into()],
        ..FingerprintSpec::default()
    };

    let whole = fingerprint(&spec, &method, &path, &headers, &[body]);
    assert_eq!(
        whole,
        fingerprint(&spec, &method, &path, &headers, &chunks(body, &cuts)),
        "cut at {cuts:?}"
    );
    if body.len() <= BYTEWISE_MAX {
        let bytewise: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(
            whole,
            fingerprint(&spec, &method, &path, &headers, &bytewise),
            "bytewise"
        );
    }

    // Validity is the JSON hasher's, error for error.
    let json_result = |ptrs: Option<&[JsonPointer]>| {
        let mut hasher = JsonHasher::new(spec.json_limits, ptrs);
        let _ = hasher.update(body);
        hasher.finish().map(|_| ()).map_err(FingerprintError::Json)
    };
    let form_result = || {
        let mut hasher = FormHasher::new();
        let _ = hasher.update(body);
        hasher.finish().map(|_| ()).map_err(FingerprintError::Form)
    };
    // `auto` is exactly the explicit mode it picks.
    let effective = match &mode {
        FingerprintMode::Auto => match BodyKind::of_headers(headers.iter().copied()) {
            BodyKind::Json => FingerprintMode::Json,
            BodyKind::Form => FingerprintMode::Form,
            _ => FingerprintMode::Raw,
        },
        other => other.clone(),
    };
    if mode == FingerprintMode::Auto {
        let explicit = FingerprintSpec {
            mode: effective.clone(),
            ..spec.clone()
        };
        assert_eq!(
            whole,
            fingerprint(&explicit, &method, &path, &headers, &[body]),
            "auto differs from {}",
            effective.name()
        );
    }
    match &effective {
        FingerprintMode::Raw | FingerprintMode::None => {
            assert!(whole.is_ok(), "{} mode failed", mode.name())
        }
        FingerprintMode::Json => assert_eq!(whole.clone().map(|_| ()), json_result(None)),
        FingerprintMode::Fields(p) => assert_eq!(whole.clone().map(|_| ()), json_result(Some(p))),
        FingerprintMode::Form => assert_eq!(whole.clone().map(|_| ()), form_result()),
        other => panic!("unexpected mode {}", other.name()),
    }
    if let Err(e) = &whole {
        assert!(e.code().starts_with("json_") || e.code().starts_with("form_"));
    }

    // none: the key alone decides.
    if mode == FingerprintMode::None {
        assert_eq!(
            whole,
            fingerprint(&spec, "GET", "/", &Vec::new(), &[b"other"])
        );
    }

    // Header names match case-insensitively; unrelated headers do not count.
    let upper: Vec<String> = header_entries
        .iter()
        .map(|(n, _)| n.to_ascii_uppercase())
        .collect();
    let mut shouted: Headers<'_> = upper
        .iter()
        .zip(&header_entries)
        .map(|(n, (_, v))| (n.as_str(), v.as_slice()))
        .collect();
    assert_eq!(
        whole,
        fingerprint(&spec, &method, &path, &shouted, &[body]),
        "header name case mattered"
    );
    shouted.insert(0, ("x-unrelated", b"1"));
    shouted.push(("x-request-id", b"2"));
    assert_eq!(
        whole,
        fingerprint(&spec, &method, &path, &shouted, &[body]),
        "an unlisted header mattered"
    );

    // Everything else the fingerprint covers does matter.
    if let (Ok(a), false) = (&whole, mode == FingerprintMode::None) {
        let other_method = format!("{method}X");
        assert_ne!(
            Ok(*a),
            fingerprint(&spec, &other_method, &path, &headers, &[body]),
            "method ignored"
        );
        let mut more = headers.clone();
        more.push(("x-tenant", b"t"));
        assert_ne!(
            Ok(*a),
            fingerprint(&spec, &method, &path, &more, &[body]),
            "listed header ignored"
        );
    }
});
