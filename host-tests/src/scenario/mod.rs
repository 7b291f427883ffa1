//! Tests that read like stories: "two workers, one key, the first upstream answer is slow".

mod exchange;
mod forwarding;
mod proxy;
mod request;
mod response;
mod services;
mod store_service;
pub mod upstream;

pub use exchange::Exchange;
pub use forwarding::Forwarding;
pub use proxy::{Envoy, EnvoyBuilder, WorkerHandle};
pub use request::{Abort, Request};
pub use response::{Failure, Response};
pub use services::{Orders, Scripted};
pub use store_service::StoreService;
pub use upstream::Upstream;
