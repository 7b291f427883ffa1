//! Link options for the filter `.wasm` only: strip the name section and symbols (≈128 KB of the
//! artifact; Envoy needs neither, and the `idemgate_conformance` export is kept like every export).
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo:rustc-link-arg-cdylib=--strip-all");
    }
}
