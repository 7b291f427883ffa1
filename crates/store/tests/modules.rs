//! The service's modules stand on floors: each uses only modules on floors below its own, so a
//! file can be read knowing what it stands on, and none imports another in a circle. A new import
//! that goes up a floor, or sideways on one, fails here with the import named; a new module fails
//! until it is given its floor in [`FLOORS`].
//!
//! A module is a top-level file or directory of `src/` (a directory's files, at any depth, count
//! as their module); an import is any `crate::name`, `use crate::{name, …}` or `super::…name`
//! that reaches the crate root, outside a comment line. In `main.rs`, the crate root, a bare
//! `name::` path names its child module.
//!
//! And no file is longer than [`MAX_LINES`]: past it a file holds more than one concept, and is
//! split by concept.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The longest a source file of the service may be.
const MAX_LINES: usize = 600;

/// The floors, lowest first: a module uses only modules on floors below its own.
const FLOORS: [&[&str]; 5] = [
    // What the rest is built from: settings, payers' desks, fresh versions, counters, TLS.
    &["config", "desk", "entropy", "metrics", "tls"],
    // The engines, and the log lines that name records.
    &["engine", "log"],
    // Carrying one operation to the engine; the operator's view of records.
    &["carry", "records"],
    // The service's faces: the store port, the admin port, the command line.
    &["admin", "cli", "server"],
    // The binary, which declares and starts them all.
    &["main"],
];

type Graph = BTreeMap<String, BTreeSet<String>>;

/// A source file of `src/`: its module, and how many module levels below the crate root its own
/// code is (`main.rs`: 0; `cli.rs`, `engine/mod.rs`: 1; `engine/redis.rs`: 2).
struct Source {
    module: String,
    depth: usize,
    path: PathBuf,
}

fn source_files() -> Vec<Source> {
    fn walk(dir: &Path, module: Option<&str>, depth: usize, out: &mut Vec<Source>) {
        for entry in fs::read_dir(dir).expect("a source directory") {
            let path = entry.expect("an entry").path();
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            let owner = module.unwrap_or(&stem).to_string();
            if path.is_dir() {
                walk(&path, Some(&owner), depth + 1, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let depth = match (module, stem.as_str()) {
                    (None, "main") => 0,
                    // `dir/mod.rs` is the directory's own module, one level down like `dir.rs`.
                    (Some(_), "mod") => depth,
                    _ => depth + 1,
                };
                out.push(Source {
                    module: owner,
                    depth,
                    path,
                });
            }
        }
    }
    let mut files = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        None,
        0,
        &mut files,
    );
    files
}

/// Module → the crate modules its code names.
fn imports() -> Graph {
    let files = source_files();
    let modules: BTreeSet<String> = files.iter().map(|f| f.module.clone()).collect();
    let mut graph = Graph::new();
    for file in &files {
        let text = fs::read_to_string(&file.path).expect("a source file");
        let deps = graph.entry(file.module.clone()).or_default();
        for named in names_used(&text, file.depth) {
            if modules.contains(&named) && named != file.module {
                deps.insert(named);
            }
        }
    }
    graph
}

/// The crate-root names `text` uses, for code `depth` module levels below the root.
fn names_used(text: &str, depth: usize) -> Vec<String> {
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut roots = vec!["crate::".to_string()];
    if depth > 0 {
        roots.push("super::".repeat(depth));
    }
    let mut names = Vec::new();
    for root in &roots {
        for (at, _) in code.match_indices(root.as_str()) {
            // `super::super::x` read from one level down is not the crate root's `super::x`.
            if root.starts_with("super") && code[..at].ends_with("super::") {
                continue;
            }
            let rest = &code[at + root.len()..];
            match rest.strip_prefix('{') {
                // `use crate::{a, b::C, d::{e, f}};`: each item's first name.
                Some(group) => names.extend(group_items(group)),
                None => names.push(identifier(rest)),
            }
        }
    }
    if depth == 0 {
        // The crate root names its child modules without a prefix: `cli::run`, `use config::X`.
        for (at, _) in code.match_indices("::") {
            let before = &code[..at];
            let name: String = identifier_ending(before);
            let start = before.len() - name.len();
            let boundary = code[..start]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'));
            if !name.is_empty() && boundary {
                names.push(name);
            }
        }
    }
    names
}

fn identifier(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

fn identifier_ending(text: &str) -> String {
    let reversed: String = text
        .chars()
        .rev()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    reversed.chars().rev().collect()
}

/// The first name of each item of a `{…}` group whose opening brace is already read.
fn group_items(group: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut depth = 0;
    let mut item_start = true;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => item_start = true,
            c if item_start && !c.is_whitespace() => {
                names.push(identifier(&group[i..]));
                item_start = false;
            }
            _ => {}
        }
    }
    names
}

/// Tarjan's strongly connected components with more than one module: the circles.
fn circles(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g Graph,
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

/// The imports that do not go down a floor (`module -> import`), and the modules with no floor
/// or more than one.
fn floor_breaches(graph: &Graph, floors: &[&[&str]]) -> (Vec<String>, Vec<String>) {
    let mut level: BTreeMap<&str, usize> = BTreeMap::new();
    let mut misplaced = Vec::new();
    for (i, floor) in floors.iter().enumerate() {
        for &module in floor.iter() {
            if level.insert(module, i).is_some() {
                misplaced.push(format!("{module} is on two floors"));
            }
        }
    }
    for module in graph.keys() {
        if !level.contains_key(module.as_str()) {
            misplaced.push(format!("{module} has no floor"));
        }
    }
    for module in level.keys() {
        if !graph.contains_key(*module) {
            misplaced.push(format!("{module} is on a floor but not in src/"));
        }
    }
    let mut breaches = Vec::new();
    for (module, deps) in graph {
        let Some(&own) = level.get(module.as_str()) else {
            continue;
        };
        for dep in deps {
            match level.get(dep.as_str()) {
                Some(&below) if below < own => {}
                Some(&other) => {
                    breaches.push(format!("{module} (floor {own}) -> {dep} (floor {other})"))
                }
                None => breaches.push(format!("{module} -> {dep} (no floor)")),
            }
        }
    }
    (breaches, misplaced)
}

fn planted(edges: &[(&str, &[&str])]) -> Graph {
    edges
        .iter()
        .map(|(m, deps)| (m.to_string(), deps.iter().map(|d| d.to_string()).collect()))
        .collect()
}

#[test]
fn the_imports_are_read() {
    let graph = imports();
    assert!(
        graph.len() > 10 && graph.contains_key("main") && graph.contains_key("engine"),
        "the crate's modules were not found: {:?}",
        graph.keys().collect::<Vec<_>>()
    );
    for (module, import) in [
        ("server", "carry"),
        ("records", "engine"),
        ("engine", "config"),
        ("main", "server"),
        ("main", "cli"),
    ] {
        assert!(
            graph[module].contains(import),
            "{module} -> {import} was not read: {graph:?}"
        );
    }
}

#[test]
fn imports_are_read_in_every_form() {
    let text = "\
use crate::a::X;
// crate::commented
use crate::{b, c::Y, d::{E, F}};
use crate::{
    g::H,
    i,
};
fn f() { super::j::k(); crate::n::o(); }
";
    let mut one_level_down = names_used(text, 1);
    one_level_down.sort();
    assert_eq!(
        one_level_down,
        ["a", "b", "c", "d", "g", "i", "j", "n"],
        "one level down, super:: is the crate root"
    );
    let two_levels_down = names_used("use super::x; use super::super::l::M;", 2);
    assert_eq!(two_levels_down, ["l"]);
    let root = names_used(
        "mod cli;\nuse config::X;\nfn main() { cli::run(); x::log::y(); }",
        0,
    );
    assert!(root.contains(&"cli".to_string()) && root.contains(&"config".to_string()));
    assert!(!root.contains(&"log".to_string()), "{root:?}");
}

#[test]
fn the_modules_import_each_other_without_a_circle() {
    let graph = imports();
    let found = circles(&graph);
    assert!(
        found.is_empty(),
        "modules import each other in a circle: {found:#?}"
    );
}

#[test]
fn a_circle_is_found_when_there_is_one() {
    let graph = planted(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &["a"])]);
    assert_eq!(circles(&graph), vec![vec!["a", "b", "c"]]);
}

#[test]
fn each_module_uses_only_modules_on_floors_below_it() {
    let graph = imports();
    let (breaches, misplaced) = floor_breaches(&graph, &FLOORS);
    assert!(
        misplaced.is_empty(),
        "give each module of src/ one floor in FLOORS: {misplaced:#?}"
    );
    assert!(
        breaches.is_empty(),
        "imports that do not go down a floor (move the code that needs them, or the module): \
         {breaches:#?}"
    );
}

#[test]
fn an_import_up_or_sideways_is_found() {
    let floors: [&[&str]; 3] = [&["a", "b"], &["c"], &["d"]];
    let sound = planted(&[
        ("a", &[]),
        ("b", &[]),
        ("c", &["a", "b"]),
        ("d", &["c", "a"]),
    ]);
    assert_eq!(floor_breaches(&sound, &floors), (vec![], vec![]));
    let up = planted(&[("a", &["c"]), ("b", &[]), ("c", &["a"]), ("d", &[])]);
    assert_eq!(
        floor_breaches(&up, &floors).0,
        ["a (floor 0) -> c (floor 1)"]
    );
    let sideways = planted(&[("a", &["b"]), ("b", &[]), ("c", &[]), ("d", &[])]);
    assert_eq!(
        floor_breaches(&sideways, &floors).0,
        ["a (floor 0) -> b (floor 0)"]
    );
    let unplaced = planted(&[("a", &[]), ("b", &[]), ("c", &[]), ("d", &[]), ("e", &[])]);
    assert_eq!(floor_breaches(&unplaced, &floors).1, ["e has no floor"]);
}

#[test]
fn no_file_is_longer_than_the_limit() {
    let files = source_files();
    assert!(files.len() > 15, "the sources were not found");
    let long: Vec<(usize, &PathBuf)> = files
        .iter()
        .map(|file| {
            let text = fs::read_to_string(&file.path).expect("a source file");
            (text.lines().count(), &file.path)
        })
        .filter(|(lines, _)| *lines > MAX_LINES)
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines (split them by concept): {long:?}"
    );
}
