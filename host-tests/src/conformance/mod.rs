//! The shared conformance vectors (`vectors/*.json`, format in `vectors/README.md`) run three ways:
//! (a) the native core, (b) the filter `.wasm` through its `idemgate_conformance` export, (c) the
//! browser module's `.wasm` through its public exports, for the groups it exposes. Answers are
//! compared as JSON values (`{"ok": ..}` / `{"error": code}`).

pub mod filter;
pub mod web;

use crate::artifacts;
use crate::error::{HarnessError, Result};
use serde_json::{json, Value};
use std::path::Path;

/// One vector case.
#[derive(Debug, Clone)]
pub struct Case {
    pub group: String,
    pub name: String,
    pub input: Value,
    pub expect: Value,
}

impl Case {
    /// The case as the `.wasm` exports take it: `{"group":..,"input":..}`.
    pub fn request(&self) -> String {
        json!({ "group": self.group, "input": self.input }).to_string()
    }

    pub fn label(&self) -> String {
        format!("{}/{}", self.group, self.name)
    }
}

fn bad(path: &Path, what: &str) -> HarnessError {
    HarnessError::Usage(format!("{}: {what}", path.display()))
}

/// Every case of every `*.json` file in `dir`, files in name order.
pub fn load(dir: &Path) -> Result<Vec<Case>> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| bad(dir, &e.to_string()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|e| bad(&file, &e.to_string()))?;
        let doc: Value = serde_json::from_str(&text).map_err(|e| bad(&file, &e.to_string()))?;
        let group = doc
            .get("group")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(&file, "no group"))?;
        let list = doc
            .get("cases")
            .and_then(Value::as_array)
            .ok_or_else(|| bad(&file, "no cases"))?;
        for case in list {
            cases.push(Case {
                group: group.to_string(),
                name: case
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                input: case.get("input").cloned().unwrap_or(Value::Null),
                expect: case.get("expect").cloned().unwrap_or(Value::Null),
            });
        }
    }
    Ok(cases)
}

/// The shipped vectors.
pub fn shipped() -> Result<Vec<Case>> {
    load(&artifacts::vectors_dir())
}

/// The native core's answer, through the same text-in, text-out entry point the `.wasm` exports
/// wrap (the core reads JSON with its own document type, not serde_json).
pub fn native(case: &Case) -> Result<Value> {
    parse_answer(&idemgate_core::conformance::evaluate_json(&case.request()))
}

/// Parses a `.wasm` export's answer text.
pub fn parse_answer(text: &str) -> Result<Value> {
    serde_json::from_str(text)
        .map_err(|e| HarnessError::Interface(format!("answer is not JSON ({e}): {text}")))
}
