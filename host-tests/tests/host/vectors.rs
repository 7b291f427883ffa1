//! The shared vectors on the native core, the filter's test build (the shipped code plus the
//! `idemgate_conformance` export; `builds.rs` proves it decides as the shipped file does) and the
//! browser module's `.wasm`.

use crate::support::filter_test_build;
use idemgate_host_tests::artifacts;
use idemgate_host_tests::conformance::filter::FilterVectors;
use idemgate_host_tests::conformance::web::{WebVectors, EXPOSED_GROUPS};
use idemgate_host_tests::conformance::{native, shipped, Case};
use std::collections::BTreeMap;

fn report(failures: &[String], total: usize, what: &str) {
    assert!(
        failures.is_empty(),
        "{} of {total} vectors: {what}:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn cases() -> Vec<Case> {
    let cases = shipped().unwrap();
    assert!(cases.len() > 100, "the vectors directory looks empty");
    cases
}

#[test]
fn native_core_answers_every_vector_as_expected() {
    let cases = cases();
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let got = native(case).unwrap_or_else(|e| panic!("{}: {e}", case.label()));
            (got != case.expect).then(|| {
                format!(
                    "{}: expected {}, core says {got}",
                    case.label(),
                    case.expect
                )
            })
        })
        .collect();
    report(
        &failures,
        cases.len(),
        "the native core disagrees with `expect`",
    );
}

#[test]
fn filter_wasm_answers_every_vector_like_the_native_core() {
    let cases = cases();
    let mut vectors = FilterVectors::start(&filter_test_build()).unwrap();
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let wasm = vectors
                .answer(case)
                .unwrap_or_else(|e| panic!("{}: {e}", case.label()));
            let core = native(case).unwrap_or_else(|e| panic!("{}: {e}", case.label()));
            (wasm != core).then(|| format!("{}: core {core}, filter .wasm {wasm}", case.label()))
        })
        .collect();
    report(
        &failures,
        cases.len(),
        "the filter .wasm differs from the native core",
    );
}

#[test]
fn browser_wasm_answers_its_groups_like_the_native_core() {
    let path = artifacts::web_wasm().unwrap_or_else(|e| panic!("{e}"));
    let mut vectors = WebVectors::start(&path).unwrap();
    let cases = cases();
    let mut failures = Vec::new();
    let mut checked: BTreeMap<&str, usize> = BTreeMap::new();
    for case in &cases {
        let Some(wasm) = vectors
            .answer(case)
            .unwrap_or_else(|e| panic!("{}: {e}", case.label()))
        else {
            continue;
        };
        *checked.entry(case.group.as_str()).or_default() += 1;
        let core = native(case).unwrap_or_else(|e| panic!("{}: {e}", case.label()));
        if wasm != core {
            failures.push(format!(
                "{}: core {core}, browser .wasm {wasm}",
                case.label()
            ));
        }
    }
    println!("browser module checked per group: {checked:?}");
    // Every state-table case reaches the browser (tables given as data, `arrival`, `declare`):
    // only `if_match` (the origin compares) and `version` are not the browser's to answer.
    let tables = cases.iter().filter(|c| {
        let op = c.input.get("op").and_then(|op| op.as_str());
        c.group == "transition" && !matches!(op, Some("if_match" | "version"))
    });
    assert_eq!(checked.get("transition").copied(), Some(tables.count()));
    for group in EXPOSED_GROUPS {
        if cases.iter().any(|c| c.group == *group) {
            assert!(
                checked.get(group).copied().unwrap_or(0) > 0,
                "no `{group}` vector reached the browser module"
            );
        }
    }
    report(
        &failures,
        checked.values().sum(),
        "the browser .wasm differs from the native core",
    );
}

#[test]
fn browser_wasm_makes_keys_the_edge_accepts() {
    use idemgate_host_tests::wasm_bindgen::WebModule;
    let path = artifacts::web_wasm().unwrap_or_else(|e| panic!("{e}"));
    let mut web = WebModule::load(&path, 42).unwrap();
    // The JS layer draws the 16 random bytes (crypto.getRandomValues); the module formats them.
    use idemgate_host_tests::wasm_bindgen::Arg;
    let first = web
        .string("newKey", &[Arg::Bytes(vec![0x5a; 16])])
        .unwrap()
        .unwrap();
    let second = web
        .string("newKey", &[Arg::Bytes((0..16).collect())])
        .unwrap()
        .unwrap();
    let short = web.string("newKey", &[Arg::Bytes(vec![1; 15])]).unwrap();
    assert_eq!(
        short.map_err(|e| e.code),
        Err("invalid_argument".to_string())
    );
    assert_ne!(first, second);
    for key in [&first, &second] {
        assert_eq!(key.len(), 36);
        assert_eq!(&key[14..15], "4", "a version 4 UUID: {key}");
        let parsed = idemgate_core::request::key::IdempotencyKey::parse(key.as_bytes()).unwrap();
        assert_eq!(parsed.as_str(), key.as_str());
    }
}
