//! Link options for the filter `.wasm` only: strip the name section and symbols (≈128 KB of the
//! artifact; Envoy needs neither, and every export is kept, the test build's `idemgate_conformance` too).
//! `IDEMGATE_KEEP_NAMES=1` keeps the name section, for a size breakdown by function
//! (`crates/envoy/scripts/size.py`); never for a shipped build.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=IDEMGATE_KEEP_NAMES");
    let keep_names = std::env::var_os("IDEMGATE_KEEP_NAMES").is_some_and(|v| v == "1");
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") && !keep_names {
        println!("cargo:rustc-link-arg-cdylib=--strip-all");
    }
}
