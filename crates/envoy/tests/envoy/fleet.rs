//! A fleet: two real Envoys whose filters keep their records in one remote store — the
//! `idemgate-store` service (built by `make build-store`) in front of a real `redis-server`, a real
//! PostgreSQL, or both (`--engine redis`, `postgres`, `redis+postgres`) — each process
//! started on free ports in a temp dir and killed by PID on drop, also when a test fails.
//! A request sent to one Envoy and its retry sent to the other behave as if there were one Envoy.
//! Envoy and the service speak HTTP/2 inside mutual TLS, with certificates made by
//! `openssl` for each store (the store crate's test PKI helper).
//!
//! Every test that is not about Redis itself (its cluster mode) runs once per engine: a module per
//! test, with a test function per engine (`fleet::<file>::<test>::redis`, `::postgres`,
//! `::redis_postgres`).

use std::net::TcpListener;

#[path = "postgres.rs"]
mod postgres;

#[path = "../../../store/tests/support/pki.rs"]
#[allow(dead_code)] // the store's own tests use the rest (the stranger's certificate)
mod pki;

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `on_every_engine!(body)`: the module `body` with a test per engine (`redis`, `postgres`,
/// `redis_postgres`), each running the function `body` on it.
macro_rules! on_every_engine {
    ($body:ident) => {
        mod $body {
            use super::Engine;

            #[test]
            #[ignore = "needs Envoy, the built filter and store, redis-server: make test-envoy"]
            fn redis() {
                super::$body(Engine::Redis);
            }

            #[test]
            #[ignore = "needs Envoy, the built filter and store, PostgreSQL: make test-envoy"]
            fn postgres() {
                super::$body(Engine::Postgres);
            }

            #[test]
            #[ignore = "needs Envoy, the built filter and store, redis-server, PostgreSQL: make test-envoy"]
            fn redis_postgres() {
                super::$body(Engine::RedisPostgres);
            }
        }
    };
}

mod backend;
mod envoys;
mod redis;

mod batching;
mod failures;
mod once;
mod operator;
mod waiting;

pub(crate) use backend::{Backend, Engine, Store, RECORD_SECRET, STORE};
pub(crate) use envoys::{envoy, envoy_with_env, replay, retry_once_released};
pub(crate) use redis::{redis_cluster, Redis};
