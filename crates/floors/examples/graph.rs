//! Prints the import graph of a crate's `src/` as the floors tests read it, one module a line:
//! `cargo run -q -p idemgate-floors --example graph -- crates/core/src`. The circles found, if
//! any, follow.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(src) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: graph <a crate's src/ directory>");
        return ExitCode::from(2);
    };
    match idemgate_floors::imports(&src) {
        Ok(graph) => {
            print!("{}", idemgate_floors::render(&graph));
            let circles = idemgate_floors::circles(&graph);
            for circle in idemgate_floors::describe_circles(&graph, &circles) {
                println!("circle: {circle}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cannot read {}: {e}", src.display());
            ExitCode::FAILURE
        }
    }
}
