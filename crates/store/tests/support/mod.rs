//! Real parts for the service's tests: `redis-server` processes (single, or three cluster
//! primaries) on free ports in temporary directories, the built `idemgate-store` binary with
//! certificates made for it by `openssl` (mutual TLS), and an HTTP/2 client that
//! presents a client certificate. Every process is killed by PID when its handle drops, also when
//! a test fails.
#![allow(dead_code)]

pub mod pki;
pub mod postgres;
pub mod tls;

mod client;
mod redis_server;
mod requests;
mod service;

// Each test binary uses a part of the support (see the `dead_code` allowance above).
#[allow(unused_imports)]
pub use client::{tls_client_config, Client};
#[allow(unused_imports)]
pub use redis_server::{free_port, Cluster, Redis};
#[allow(unused_imports)]
pub use requests::{
    claim, concurrent_claims, once_recovered, owner, skey, stored_response, SLOW_OK,
};
#[allow(unused_imports)]
pub use service::{service_binary, Service};
