//! Runs every conformance vector in `vectors/*.json` through the core's evaluator. The same files
//! feed the wasmtime harness and the JS tests; here they pin the native core.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use idemgate_core::conformance::{evaluate, evaluate_json, GROUPS};
use idemgate_json::Value as Doc;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;

fn vector_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../vectors");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

// conformance: S5 (vectors/decision.json: a record past its 24 h expiry is claimed again)
#[test]
fn every_vector_gives_its_expected_answer() {
    let mut failures = Vec::new();
    let mut total = 0;
    for file in vector_files() {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap())
            .unwrap_or_else(|e| panic!("{}: not JSON: {e}", file.display()));
        let group = doc["group"].as_str().expect("group");
        assert!(
            GROUPS.contains(&group),
            "{}: unknown group {group}",
            file.display()
        );
        let mut names = BTreeSet::new();
        for case in doc["cases"].as_array().expect("cases") {
            total += 1;
            let name = case["name"].as_str().expect("name");
            assert!(
                names.insert(name.to_owned()),
                "{group}: duplicate case name {name}"
            );
            // The evaluator reads the core's own document type; serde_json (an independent
            // reader) compares the answers, so member order does not matter.
            let input = Doc::parse(&case["input"].to_string()).unwrap();
            let got = match evaluate(group, &input) {
                Ok(value) => {
                    serde_json::json!({ "ok": serde_json::from_str::<Value>(&value.to_string()).unwrap() })
                }
                Err(code) => serde_json::json!({ "error": code }),
            };
            // The text form the `.wasm` exports wrap gives the same answer.
            let request = serde_json::json!({ "group": group, "input": case["input"] }).to_string();
            let via_text: Value = serde_json::from_str(&evaluate_json(&request)).unwrap();
            assert_eq!(via_text, got, "{group} / {name}: evaluate_json differs");
            if got != case["expect"] {
                failures.push(format!(
                    "{group} / {name}\n  expected {}\n  got      {got}",
                    case["expect"]
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {total} vectors failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        total >= 150,
        "only {total} vectors; the suite promises at least 150"
    );
}

#[test]
fn evaluator_refuses_malformed_cases_with_codes() {
    assert_eq!(
        evaluate("nope", &Doc::Null),
        Err("vector_unknown_group:nope".into())
    );
    assert_eq!(evaluate_json("not json"), r#"{"error":"vector_not_json"}"#);
    assert_eq!(
        evaluate_json(r#"{"input": {}}"#),
        r#"{"error":"vector_missing_group"}"#
    );
    assert!(evaluate("key", &Doc::Object(Vec::new())).is_err());
}
