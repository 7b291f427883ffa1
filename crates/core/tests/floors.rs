//! The core in floors: each top-level module uses only the modules on the floors below it, so a
//! module can be read — and reasoned about — knowing only what it stands on, and the floors can
//! never import each other in a circle. The ground holds what every rule uses (time, text,
//! hashing, encodings, the events hosts count); then what a request is, who the client is, what a
//! record holds, the ordering rules, the configured policy, the pure decisions, the stores that
//! apply them, the one mapping of every outcome to HTTP, and the guard — the request's life as
//! events in and actions out — on top. The hosts' entry points (`browser`, `config`) and the
//! vectors' evaluator (`conformance`) stand above.
//!
//! A new import that points up fails here, named; a new module fails until it is given a floor.
//! `cargo test -p idemgate-core --test floors -- --nocapture` prints the graph.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

/// The floors, from the ground up.
const FLOORS: &[&[&str]] = &[
    &[
        "time", "text", "hash", "base64", "codec", "events", "headers",
    ],
    &["request"],
    &["client"],
    &["record"],
    &["order"],
    &["policy"],
    &["decision"],
    &["store"],
    &["answer"],
    &["guard"],
    &["browser", "config"],
    &["conformance"],
];

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn each_module_uses_only_the_floors_below_it() {
    match idemgate_floors::check(&src(), FLOORS, &[("guard", "store"), ("store", "record")]) {
        Ok(graph) => println!("{}", idemgate_floors::render(&graph)),
        Err(wrong) => panic!("the core: {wrong}"),
    }
}
