//! The crate's modules import each other without a circle: each module depends only on
//! modules below it, so a file can be read knowing what it stands on. Eight of them once imported
//! each other in one circle (the callout table's entries owned types that registered themselves
//! back, the host calls called up into the dispatcher for the clock); a new edge that closes a
//! circle fails here with the circle named.
//!
//! A module is a file of `src/` (a directory's files count as their parent module); an import is
//! any `crate::name` outside a comment line.
//!
//! And no file is longer than [`MAX_LINES`]: the adapter carries out what the core decides, and a
//! file that grows past it is where a rule is leaking back in (`filter.rs` once held
//! 978 lines of them).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The longest a source file of the adapter may be.
const MAX_LINES: usize = 400;

/// Each source file of `src/` with the module it belongs to (a directory's files count as their
/// parent module).
fn source_files() -> Vec<(String, PathBuf)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for entry in fs::read_dir(&src).expect("src/") {
        let path = entry.expect("an entry of src/").path();
        if path.is_dir() {
            let module = path.file_name().unwrap().to_string_lossy().into_owned();
            for inner in fs::read_dir(&path).expect("a module directory") {
                let inner = inner.expect("an entry").path();
                if inner.extension().is_some_and(|e| e == "rs") {
                    files.push((module.clone(), inner));
                }
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            let module = path.file_stem().unwrap().to_string_lossy().into_owned();
            files.push((module, path));
        }
    }
    files
}

/// Module → the crate modules its code names.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let files = source_files();
    let modules: BTreeSet<String> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, path) in &files {
        let text = fs::read_to_string(path).expect("a source file");
        let deps = graph.entry(module.clone()).or_default();
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for named in names_after(line, "crate::") {
                if modules.contains(&named) && &named != module {
                    deps.insert(named);
                }
            }
            // `use crate::{a, b::C};`
            if let Some(rest) = line.trim_start().strip_prefix("use crate::{") {
                for item in rest.split([',', '}']) {
                    let name: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if modules.contains(&name) && &name != module {
                        deps.insert(name);
                    }
                }
            }
        }
    }
    graph
}

/// The identifiers that follow each `prefix` in `line`.
fn names_after(line: &str, prefix: &str) -> Vec<String> {
    line.match_indices(prefix)
        .map(|(at, _)| {
            line[at + prefix.len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

/// Tarjan's strongly connected components with more than one module: the circles.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

#[test]
fn the_modules_import_each_other_without_a_circle() {
    let graph = imports();
    assert!(
        graph.len() > 10 && graph.contains_key("filter") && graph.contains_key("dispatch"),
        "the crate's modules were not found: {:?}",
        graph.keys().collect::<Vec<_>>()
    );
    assert!(
        graph["dispatch"].contains("filter"),
        "imports were not read: {graph:?}"
    );
    let found = circles(&graph);
    let named: Vec<String> = found
        .iter()
        .map(|circle| {
            circle
                .iter()
                .map(|m| {
                    format!(
                        "{m} -> {:?}",
                        graph[m]
                            .intersection(&circle.iter().cloned().collect())
                            .collect::<Vec<_>>()
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
        .collect();
    assert!(
        found.is_empty(),
        "modules import each other in a circle: {named:#?}"
    );
}

#[test]
fn a_circle_is_found_when_there_is_one() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(m, deps)| (m.to_string(), deps.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(circles(&graph), vec![vec!["a", "b", "c"]]);
}

#[test]
fn no_file_is_longer_than_the_limit() {
    let files = source_files();
    assert!(files.len() > 30, "the sources were not found: {files:?}");
    let long: Vec<(usize, &PathBuf)> = files
        .iter()
        .map(|(_, path)| {
            (
                fs::read_to_string(path)
                    .expect("a source file")
                    .lines()
                    .count(),
                path,
            )
        })
        .filter(|(lines, _)| *lines > MAX_LINES)
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines (split them by concept, or move their rules to the core): {long:?}"
    );
}
