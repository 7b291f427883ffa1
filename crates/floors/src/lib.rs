//! Test support for the house rule "each module uses only the modules below it": reads which
//! top-level modules of a crate's `src/` name which, and checks the graph against the crate's
//! floors and for circles. Used by the floors tests of the core, the filter and the store service,
//! so all three read imports the same way.
//!
//! A module is a top-level file or directory of `src/` (`store.rs` and everything under
//! `store/`); an import is any `crate::name` path outside a comment line, including the items of
//! `use crate::{a, b::C}`. Test code is left out: files named `tests.rs` or under a `tests/`
//! directory, a `testing` or top-level `tests` module, and a file's `#[cfg(test)] mod tests` block — a test may reach
//! anywhere to set up what it checks.
//!
//! Reading text rather than a compiler's resolution is enough here: the crates name their own
//! modules with `crate::` paths (`super::` only within a module), and a test below checks that
//! the reader finds edges it must find.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Each module and the modules its code names (never itself).
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// Every `.rs` file under `src`, with the top-level module it belongs to; `lib.rs` and `main.rs`
/// belong to the crate's root, named `""`.
pub fn source_files(src: &Path) -> io::Result<Vec<(String, PathBuf)>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(src)? {
        let path = entry?.path();
        let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
            continue;
        };
        if path.is_dir() {
            let mut inner = Vec::new();
            walk(&path, &mut inner)?;
            files.extend(inner.into_iter().map(|p| (name.clone(), p)));
        } else if let Some(stem) = name.strip_suffix(".rs") {
            let module = if stem == "lib" || stem == "main" {
                ""
            } else {
                stem
            };
            files.push((module.to_owned(), path));
        }
    }
    files.sort();
    Ok(files)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// Whether `path` holds only tests.
fn is_test_file(module: &str, path: &Path) -> bool {
    module == "testing"
        || module == "tests"
        || path.file_name().is_some_and(|n| n == "tests.rs")
        || path.components().any(|c| c.as_os_str() == "tests")
}

/// The text of a source file without its `#[cfg(test)] mod tests { … }` block (the block runs to
/// the end of the file, as every file of these crates writes it) and without comment lines.
pub fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            // Attributes between `#[cfg(test)]` and the item (`#[cfg(feature = "…")]`).
            while lines
                .peek()
                .is_some_and(|l| l.trim_start().starts_with("#["))
            {
                lines.next();
            }
            if lines
                .peek()
                .is_some_and(|l| l.trim_start().starts_with("mod tests"))
            {
                break;
            }
            continue;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// The modules `code` names among `modules`.
pub fn names_in(code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::C, d::{e, f}}`: the first name of each top-level item.
            let mut depth = 0usize;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && !c.is_whitespace() => {
                        named.insert(ident(&group[i..]));
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            named.insert(ident(rest));
        }
    }
    named.retain(|m| modules.contains(m));
    named
}

/// The import graph of the crate whose sources are in `src`.
pub fn imports(src: &Path) -> io::Result<Graph> {
    let files = source_files(src)?;
    let modules: BTreeSet<String> = files
        .iter()
        .map(|(m, _)| m.clone())
        .filter(|m| !m.is_empty() && m != "testing" && m != "tests")
        .collect();
    let mut graph = Graph::new();
    for (module, path) in &files {
        // The crate's root, and a module that holds only test support, stand on no floor.
        if module.is_empty() || module == "testing" || module == "tests" {
            continue;
        }
        let deps = graph.entry(module.clone()).or_default();
        if is_test_file(module, path) {
            continue;
        }
        let code = code_of(&fs::read_to_string(path)?);
        deps.extend(
            names_in(&code, &modules)
                .into_iter()
                .filter(|m| m != module),
        );
    }
    Ok(graph)
}

/// The imports that break the floors: a module naming one on its own floor or above, and a
/// module on no floor. `floors` lists the floors from the ground up. Empty when the graph holds.
pub fn breaches(graph: &Graph, floors: &[&[&str]]) -> Vec<String> {
    let floor_of = |m: &str| floors.iter().position(|floor| floor.contains(&m));
    let mut found = Vec::new();
    for (module, deps) in graph {
        let Some(own) = floor_of(module) else {
            found.push(format!("`{module}` is on no floor: place it in the list"));
            continue;
        };
        for dep in deps {
            match floor_of(dep) {
                Some(floor) if floor < own => {}
                Some(floor) => found.push(format!(
                    "`{module}` (floor {own}) imports `{dep}` (floor {floor}): move what it needs down"
                )),
                None => found.push(format!("`{module}` imports `{dep}`, which is on no floor")),
            }
        }
    }
    for floor in floors {
        for module in *floor {
            if !graph.contains_key(*module) {
                found.push(format!(
                    "floor member `{module}` is not a module of the crate"
                ));
            }
        }
    }
    found
}

/// The strongly connected components with more than one module: the circles (Tarjan).
pub fn circles(graph: &Graph) -> Vec<Vec<String>> {
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

/// Everything a floors test checks of the crate whose sources are in `src`: the imports are read
/// (each `(module, import)` of `seen` is found, so a reader that reads nothing cannot pass), no
/// import breaches `floors`, no modules import each other in a circle. Returns the graph, or what
/// is wrong in words a failing test prints.
pub fn check(src: &Path, floors: &[&[&str]], seen: &[(&str, &str)]) -> Result<Graph, String> {
    let graph = imports(src).map_err(|e| format!("cannot read {}: {e}", src.display()))?;
    let unread: Vec<_> = seen
        .iter()
        .filter(|(module, import)| {
            !graph
                .get(*module)
                .is_some_and(|deps| deps.contains(*import))
        })
        .collect();
    if !unread.is_empty() {
        return Err(format!(
            "imports were not read: {unread:?} missing from {graph:?}"
        ));
    }
    let breached = breaches(&graph, floors);
    if !breached.is_empty() {
        return Err(format!("the floors are breached: {breached:#?}"));
    }
    let found = circles(&graph);
    if !found.is_empty() {
        return Err(format!(
            "modules import each other in a circle: {:#?}",
            describe_circles(&graph, &found)
        ));
    }
    Ok(graph)
}

/// Each circle with the edges that close it, for a failure message.
pub fn describe_circles(graph: &Graph, circles: &[Vec<String>]) -> Vec<String> {
    circles
        .iter()
        .map(|circle| {
            let members: BTreeSet<String> = circle.iter().cloned().collect();
            circle
                .iter()
                .map(|m| {
                    let inside: Vec<&String> = graph[m].intersection(&members).collect();
                    format!("{m} -> {inside:?}")
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
        .collect()
}

/// The source files of `src` longer than `max` lines, with their lengths.
pub fn long_files(src: &Path, max: usize) -> io::Result<Vec<(usize, PathBuf)>> {
    let mut long = Vec::new();
    for (_, path) in source_files(src)? {
        let lines = fs::read_to_string(&path)?.lines().count();
        if lines > max {
            long.push((lines, path));
        }
    }
    Ok(long)
}

/// The graph as text, one module a line from the ground up: what a floors test prints.
pub fn render(graph: &Graph) -> String {
    graph
        .iter()
        .map(|(m, deps)| {
            let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
            format!("{m} -> {}\n", deps.join(", "))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &[&str])]) -> Graph {
        edges
            .iter()
            .map(|(m, deps)| (m.to_string(), deps.iter().map(|d| d.to_string()).collect()))
            .collect()
    }

    #[test]
    fn a_circle_is_found_when_there_is_one() {
        let g = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &["a"])]);
        assert_eq!(circles(&g), vec![vec!["a", "b", "c"]]);
        assert!(circles(&graph(&[("a", &["b"]), ("b", &[])])).is_empty());
    }

    #[test]
    fn an_import_on_the_same_floor_or_above_breaches() {
        let g = graph(&[
            ("time", &[]),
            ("request", &["time"]),
            ("guard", &["request"]),
        ]);
        let floors: &[&[&str]] = &[&["time"], &["request"], &["guard"]];
        assert!(breaches(&g, floors).is_empty());
        let up = graph(&[("time", &["guard"]), ("request", &[]), ("guard", &[])]);
        let found = breaches(&up, floors);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("`time` (floor 0) imports `guard` (floor 2)"));
        let side = graph(&[("a", &["b"]), ("b", &[])]);
        assert_eq!(breaches(&side, &[&["a", "b"]]).len(), 1);
        let unplaced = graph(&[("a", &[]), ("new", &[])]);
        assert!(breaches(&unplaced, &[&["a"]])[0].contains("`new` is on no floor"));
        assert!(breaches(&graph(&[("a", &[])]), &[&["a", "gone"]])[0].contains("`gone`"));
    }

    #[test]
    fn imports_are_read_from_paths_groups_and_not_from_comments_or_tests() {
        let modules: BTreeSet<String> = ["a", "b", "c", "d", "e"].map(String::from).into();
        let text = "use crate::a::X;\n\
                    // crate::e in a comment\n\
                    use crate::{b::Y, c, d::{self, Z}};\n\
                    fn f() { crate::a::g(); }\n\
                    #[cfg(test)]\n\
                    #[cfg(feature = \"x\")]\n\
                    mod tests {\n    use crate::e::W;\n}\n";
        let named = names_in(&code_of(text), &modules);
        let expected: BTreeSet<String> = ["a", "b", "c", "d"].map(String::from).into();
        assert_eq!(named, expected);
    }
}
