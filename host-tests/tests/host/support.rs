//! Shared test fixtures.

use idemgate_host_tests::artifacts;
use idemgate_host_tests::runtime::{filter_module, FilterModule};
use idemgate_host_tests::scenario::{Request, Response};
use std::sync::Arc;

/// The shipped filter, compiled (once per process).
pub fn filter() -> Arc<FilterModule> {
    let path = artifacts::filter_wasm().unwrap_or_else(|e| panic!("{e}"));
    filter_module(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// The filter's test build (the shipped code plus the conformance export), compiled.
pub fn filter_test_build() -> Arc<FilterModule> {
    let path = artifacts::filter_test_wasm().unwrap_or_else(|e| panic!("{e}"));
    filter_module(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// A checkout: one order, one key.
pub fn order(key: &str) -> Request {
    Request::post("/orders")
        .key(key)
        .header("authorization", "Bearer alice")
        .json(r#"{"sku":"A1","qty":1}"#)
}

pub fn created() -> Response {
    Response::new(201)
        .json(r#"{"id":7}"#)
        .header("location", "/orders/7")
}
