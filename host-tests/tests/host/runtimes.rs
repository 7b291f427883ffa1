//! The shipped filter loads on every Wasm runtime Envoy can be built with: V8 (Envoy's release
//! builds), Wasmtime and WAMR. The harness runs it in Wasmtime (every test here); what the other
//! two take is a feature set, checked here on the file itself: the features proxy-wasm-cpp-host
//! builds WAMR with (bulk memory, reference types, with the sign-extension, saturating
//! conversions, multi-value and mutable globals every current runtime has) and nothing newer:
//! no SIMD (WAMR's interpreter is built without it), threads, exceptions, GC or memory64, and no
//! tail calls either (not emitted for this target today; refused so a toolchain change is
//! noticed). A toolchain that starts emitting one of those fails
//! here before an operator's Envoy refuses the filter.

use idemgate_host_tests::artifacts;
use wasmparser::{Validator, WasmFeatures};

/// What every runtime Envoy links takes.
fn every_runtime() -> WasmFeatures {
    WasmFeatures::MUTABLE_GLOBAL
        | WasmFeatures::SATURATING_FLOAT_TO_INT
        | WasmFeatures::SIGN_EXTENSION
        | WasmFeatures::MULTI_VALUE
        | WasmFeatures::BULK_MEMORY
        | WasmFeatures::REFERENCE_TYPES
        | WasmFeatures::FLOATS
        | WasmFeatures::GC_TYPES
}

fn loads_everywhere(bytes: &[u8]) -> Result<(), String> {
    Validator::new_with_features(every_runtime())
        .validate_all(bytes)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[test]
fn the_shipped_filter_uses_only_features_every_envoy_runtime_takes() {
    let path = artifacts::filter_wasm().unwrap_or_else(|e| panic!("{e}"));
    let bytes = std::fs::read(path).unwrap();
    loads_everywhere(&bytes).unwrap();
}

#[test]
fn a_module_with_a_newer_feature_is_refused_by_the_same_check() {
    for (what, text) in [
        (
            "SIMD",
            "(module (func (result v128) (v128.const i64x2 0 0)))",
        ),
        ("tail calls", "(module (func $f (return_call $f)))"),
        (
            "threads",
            "(module (memory 1 1 shared) (func (result i32) (i32.atomic.load (i32.const 0))))",
        ),
    ] {
        let bytes = wat::parse_str(text).unwrap();
        assert!(loads_everywhere(&bytes).is_err(), "{what} was taken");
    }
    let plain = wat::parse_str("(module (func (result i32) (i32.const 1)))").unwrap();
    loads_everywhere(&plain).unwrap();
}
