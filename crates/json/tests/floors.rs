//! The JSON crate in floors, like the core (`crates/core/tests/floors.rs`): each module uses only
//! the modules on the floors below it, so the modules never import each other in a circle. The
//! ground is what the rest writes with (error texts, the sort, the string writer, SHA-256); then a
//! number's exact value, the events a consumer is told (`sink`), the string lexer and the
//! tokenizer that emit them, the pointers, an object's members in key order, the canonical
//! hasher (with the enum of the tokenizer's two consumers) and, on top, the document reader.
//!
//! `cargo test -p idemgate-json --test floors -- --nocapture` prints the graph.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

/// The floors, from the ground up.
const FLOORS: &[&[&str]] = &[
    &["text", "sort", "write", "sha"],
    &["number"],
    &["sink"],
    &["lexer"],
    &["tokenizer", "pointer", "members"],
    &["hasher"],
    &["document"],
];

#[test]
fn each_module_uses_only_the_floors_below_it() {
    match idemgate_floors::check(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        FLOORS,
        &[("document", "hasher"), ("tokenizer", "lexer")],
    ) {
        Ok(graph) => println!("{}", idemgate_floors::render(&graph)),
        Err(wrong) => panic!("the JSON crate: {wrong}"),
    }
}
