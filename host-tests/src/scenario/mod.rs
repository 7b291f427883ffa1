//! Tests that read like stories: "two workers, one key, the first upstream answer is slow".

mod forwarding;
mod proxy;
mod request;
mod response;
mod roundtrip;
mod services;
mod store_service;
pub mod upstream;

pub use forwarding::Forwarding;
pub use proxy::{Envoy, EnvoyBuilder, WorkerHandle};
pub use request::{Abort, Request};
pub use response::{Failure, Response};
pub use roundtrip::Roundtrip;
pub use services::{Orders, Scripted};
pub use store_service::StoreService;

/// The record secret the remote store's answers are sealed with in host tests (the VM's
/// `IDEMGATE_RECORD_SECRET`, which a remote store requires).
pub const RECORD_SECRET: &str = "host-tests-record-secret-0123456789abcdef";
pub use upstream::Upstream;
