//! `docs/conformance.md` stays true: every row of its tables is cited by at least one test (a
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! `conformance: <row>` comment in a test file), every cited row exists, and every file a row
//! names in its Tests column cites that row.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The marker a test writes; split so this file does not cite a row itself.
fn marker() -> String {
    ["conformance", ": "].concat()
}

/// Row id → the files its Tests column names.
fn rows() -> BTreeMap<String, Vec<String>> {
    let path = root().join("docs/conformance.md");
    let text = std::fs::read_to_string(&path).expect("docs/conformance.md");
    let mut rows = BTreeMap::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // `| D1 | … | Tests |`: empty first cell, the id, …, the tests, empty last cell.
        let [_, id, .., tests, _] = cells.as_slice() else {
            continue;
        };
        if !is_row_id(id) {
            continue;
        }
        let files: Vec<String> = tests
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        assert!(!files.is_empty(), "row {id} names no test file");
        assert!(
            rows.insert((*id).to_string(), files).is_none(),
            "row {id} twice"
        );
    }
    rows
}

fn is_row_id(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some('D' | 'S')) && text.len() > 1 && chars.all(|c| c.is_ascii_digit())
}

/// Every test file of the repository (Rust, JavaScript, Python) under the crates, host-tests
/// and examples, with the rows it cites.
fn citations() -> BTreeMap<PathBuf, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    let mut stack: Vec<PathBuf> = ["crates", "host-tests", "examples"]
        .iter()
        .map(|d| root().join(d))
        .collect();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !matches!(name.as_str(), "target" | "node_modules" | "pkg" | ".git") {
                    stack.push(path);
                }
                continue;
            }
            let Some(ext) = path.extension().and_then(|e| e.to_str()) else {
                continue;
            };
            if !matches!(ext, "rs" | "mjs" | "js" | "py") {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            // `conformance: D2, D4, S1 (why)`: the ids, comma-separated, up to the first word
            // that is not one.
            let cited: BTreeSet<String> = text
                .match_indices(&marker())
                .flat_map(|(at, m)| {
                    let rest = text[at + m.len()..].lines().next().unwrap_or("");
                    rest.split(',')
                        .map(|part| {
                            part.trim()
                                .chars()
                                .take_while(char::is_ascii_alphanumeric)
                                .collect::<String>()
                        })
                        .take_while(|id| is_row_id(id))
                        .collect::<Vec<_>>()
                })
                .collect();
            if !cited.is_empty() {
                let relative = path.strip_prefix(root()).unwrap_or(&path).to_path_buf();
                out.insert(relative, cited);
            }
        }
    }
    out
}

#[test]
fn every_row_is_cited_by_the_tests_it_names_and_every_citation_is_a_row() {
    let rows = rows();
    assert!(
        rows.len() >= 10,
        "docs/conformance.md: {} rows read",
        rows.len()
    );
    let citations = citations();
    let normal = |p: &str| p.trim_start_matches("./").to_string();
    for (file, cited) in &citations {
        for id in cited {
            assert!(
                rows.contains_key(id),
                "{} cites row {id:?}, which docs/conformance.md does not have",
                file.display()
            );
        }
    }
    for (id, files) in &rows {
        for file in files {
            let cited = citations
                .iter()
                .find(|(path, _)| path.to_string_lossy() == normal(file))
                .map(|(_, cited)| cited);
            match cited {
                Some(cited) => assert!(
                    cited.contains(id),
                    "docs/conformance.md row {id} names {file}, which does not cite it"
                ),
                None => {
                    assert!(
                        root().join(file).is_file(),
                        "docs/conformance.md row {id} names {file}, which does not exist"
                    );
                    panic!("docs/conformance.md row {id} names {file}, which cites no row");
                }
            }
        }
    }
}
