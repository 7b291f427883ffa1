//! The crate's modules import each other without a circle: each module depends only on
//! modules below it, so a file can be read knowing what it stands on. Eight of them once imported
//! each other in one circle (the callout table's entries owned types that registered themselves
//! back, the host calls called up into the dispatcher for the clock); a new edge that closes a
//! circle fails here with the circle named. The imports are read as for the core's and the store
//! service's floors (`idemgate-floors`).
//!
//! And no file is longer than [`MAX_LINES`]: the adapter carries out what the core decides, and a
//! file that grows past it is where a rule is leaking back in (`filter.rs` once held 978 lines of
//! them).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

/// The longest a source file of the adapter may be.
const MAX_LINES: usize = 400;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn the_modules_import_each_other_without_a_circle() {
    let graph = idemgate_floors::imports(&src()).expect("the filter's sources");
    assert!(
        graph.len() > 10 && graph.contains_key("filter") && graph.contains_key("dispatch"),
        "the crate's modules were not found: {:?}",
        graph.keys().collect::<Vec<_>>()
    );
    assert!(
        graph["dispatch"].contains("filter"),
        "imports were not read: {graph:?}"
    );
    let found = idemgate_floors::circles(&graph);
    assert!(
        found.is_empty(),
        "modules import each other in a circle: {:#?}",
        idemgate_floors::describe_circles(&graph, &found)
    );
}

#[test]
fn no_file_is_longer_than_the_limit() {
    let files = idemgate_floors::source_files(&src()).expect("the filter's sources");
    assert!(files.len() > 30, "the sources were not found: {files:?}");
    let long = idemgate_floors::long_files(&src(), MAX_LINES).expect("the filter's sources");
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines (split them by concept, or move their rules to the core): {long:?}"
    );
}
