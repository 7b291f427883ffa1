//! The same wasm-bindgen tests in headless Chromium (`wasm-bindgen-test-runner` with
//! chromedriver), where `crypto.getRandomValues` and `Error` are the browser's own.
#![cfg(target_arch = "wasm32")]

wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

mod common;
