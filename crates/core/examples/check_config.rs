//! Checks filter configurations with the core's own reader, the one Envoy runs: each argument is a
//! file holding one configuration (JSON), read by `Policy::from_json`. `make docs` runs it over
//! every configuration snippet of the documentation, so a snippet that the filter would refuse
//! fails the docs check rather than a reader who copies it.
//!
//! Prints `file: code at field: message` for the first refusal and exits with 1; 2 when a file
//! cannot be read or no file was named; 0 when every file is a configuration the filter accepts.
//!
//! Every `secret_env` (and `secrets_env`, `record_secret_env`, …) resolves to one fixed test
//! secret: the docs name variables, never values, and the check is about shape, not secrets.

use std::process::ExitCode;

use idemgate_core::config::ConfigError;
use idemgate_core::policy::Policy;

/// What any named environment variable holds here: a Standard Webhooks secret (`whsec_` and
/// base64), which is also long enough for every other secret the reader asks for (token ≥ 16
/// bytes, record seal ≥ 32 bytes, signature secrets ≥ 8 bytes).
const TEST_SECRET: &str = "whsec_ZG9jcy1jaGVjay10ZXN0LXNlY3JldC1ub3QtZm9yLXVzZS0wMTIzNDU2Nzg5";

fn main() -> ExitCode {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        eprintln!("usage: check_config FILE...");
        return ExitCode::from(2);
    }
    let env = |_: &str| Some(String::from(TEST_SECRET));
    for file in &files {
        let text = match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(error) => {
                eprintln!("{file}: cannot read: {error}");
                return ExitCode::from(2);
            }
        };
        if let Err(error) = Policy::from_json(&text, &env) {
            println!("{file}: {}", refusal(&error));
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

/// `code at field: message`, or `code: message` when the reader names no field (not JSON).
fn refusal(error: &ConfigError) -> String {
    match error.field() {
        Some(field) => format!("{} at {field}: {error}", error.code()),
        None => format!("{}: {error}", error.code()),
    }
}
