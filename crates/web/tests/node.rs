//! wasm-bindgen tests in Node (`wasm-bindgen-test-runner`, the default environment).
#![cfg(target_arch = "wasm32")]

mod common;
