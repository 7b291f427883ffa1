//! Where the shipped `.wasm` files are: an environment variable when set, else the path the make
//! target builds. A missing file is an error that names the make target to run.

use crate::error::{HarnessError, Result};
use std::path::{Path, PathBuf};

/// The Envoy filter: `IDEMGATE_FILTER_WASM`, else `target/wasm32-wasip1/release/idemgate_envoy.wasm`.
pub const FILTER_ENV: &str = "IDEMGATE_FILTER_WASM";
/// The filter's test build (the shipped code plus the `idemgate_conformance` export):
/// `IDEMGATE_FILTER_TEST_WASM`, else `target/wasm32-wasip1/release-conformance/idemgate_envoy.wasm`.
pub const FILTER_TEST_ENV: &str = "IDEMGATE_FILTER_TEST_WASM";
/// The browser module: `IDEMGATE_WEB_WASM`, else `crates/web/pkg/idemgate_web_bg.wasm`.
pub const WEB_ENV: &str = "IDEMGATE_WEB_WASM";

/// The workspace root (this crate lives in `<root>/host-tests`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn locate(
    env: &str,
    default: &Path,
    what: &'static str,
    make_target: &'static str,
) -> Result<PathBuf> {
    let path = std::env::var_os(env)
        .map(PathBuf::from)
        .unwrap_or_else(|| default.to_path_buf());
    if path.is_file() {
        Ok(path)
    } else {
        Err(HarnessError::Artifact {
            what,
            path,
            make_target,
        })
    }
}

/// The filter `.wasm` (`make build-filter`).
pub fn filter_wasm() -> Result<PathBuf> {
    let default = workspace_root().join("target/wasm32-wasip1/release/idemgate_envoy.wasm");
    locate(
        FILTER_ENV,
        &default,
        "the Envoy filter .wasm",
        "build-filter",
    )
}

/// The filter's test build (`make build-filter` builds it next to the shipped file): only the
/// vectors and the comparison with the shipped build use it.
pub fn filter_test_wasm() -> Result<PathBuf> {
    let default =
        workspace_root().join("target/wasm32-wasip1/release-conformance/idemgate_envoy.wasm");
    locate(
        FILTER_TEST_ENV,
        &default,
        "the Envoy filter's test build (feature `conformance`)",
        "build-filter",
    )
}

/// The browser module's `.wasm` after wasm-bindgen (`make build-web`).
pub fn web_wasm() -> Result<PathBuf> {
    let default = workspace_root().join("crates/web/pkg/idemgate_web_bg.wasm");
    locate(WEB_ENV, &default, "the browser module .wasm", "build-web")
}

/// The conformance vectors directory.
pub fn vectors_dir() -> PathBuf {
    workspace_root().join("vectors")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_artifact_names_its_make_target() {
        let missing = Path::new("/nonexistent/idemgate.wasm");
        let err = locate(
            "IDEMGATE_TEST_UNSET_VARIABLE",
            missing,
            "the Envoy filter .wasm",
            "build-filter",
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("make build-filter") && text.contains("/nonexistent/idemgate.wasm"),
            "{text}"
        );
    }
}
