//! The service's modules stand on floors: each uses only modules on floors below its own, so a
//! file can be read knowing what it stands on, and none imports another in a circle. A new import
//! that goes up a floor, or sideways on one, fails here with the import named; a new module fails
//! until it is given its floor in [`FLOORS`]. The imports are read as for the core's floors and
//! the filter's (`idemgate-floors`); the binary's root (`main.rs`), which declares and starts
//! every module, stands on them all.
//!
//! And no file is longer than [`MAX_LINES`]: past it a file holds more than one concept, and is
//! split by concept.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

/// The longest a source file of the service may be.
const MAX_LINES: usize = 600;

/// The floors, lowest first: a module uses only modules on floors below its own.
const FLOORS: &[&[&str]] = &[
    // What the rest is built from: settings, payers' desks, fresh versions, counters, TLS.
    &["config", "desk", "entropy", "metrics", "tls"],
    // The engines, and the log lines that name records.
    &["engine", "log"],
    // Carrying one operation to the engine; the operator's view of records.
    &["carry", "records"],
    // The service's faces: the store port, the admin port, the command line.
    &["admin", "cli", "server"],
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn each_module_uses_only_modules_on_floors_below_it() {
    match idemgate_floors::check(&src(), FLOORS, &[("server", "carry"), ("carry", "engine")]) {
        Ok(graph) => println!("{}", idemgate_floors::render(&graph)),
        Err(wrong) => panic!("the service: {wrong}"),
    }
}

#[test]
fn no_file_is_longer_than_the_limit() {
    let long = idemgate_floors::long_files(&src(), MAX_LINES).expect("the service's sources");
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines (split them by concept): {long:?}"
    );
}
