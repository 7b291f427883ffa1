//! What the filter's own code costs per request, counted in wasm operators (wasmtime fuel) on the
//! shipped `.wasm`: deterministic, so an optimisation shows up as a number that does not drift
//! with the load of a shared machine. `make bench` records it in BENCHMARKS.md; run by hand with
//! `cargo run -p idemgate-host-tests --example work` (the `.wasm` from `make build-filter`).
//!
//! Per mode it sends `REQUESTS` keyed POSTs of the benchmark's 1 KB order body with fresh keys
//! (claim, forward, store), then replays each, then sends one key twice while in flight (409), and
//! prints `WORK <figure> <wasm operators per request> <host calls per request>` lines plus the
//! split by callback.

use idemgate_host_tests::envoy::world::Work;
use idemgate_host_tests::scenario::{Envoy, Request, Response};
use std::collections::BTreeMap;

const REQUESTS: u64 = 200;

/// The Envoy benchmark's order body (one definition, shared with the core bench).
#[path = "../../crates/envoy/bench/order_body.rs"]
mod order_body;

fn request(key: &str, body: &str) -> Request {
    Request::post("/orders")
        .key(key)
        .header("authorization", "Bearer bench")
        .header("content-type", "application/json")
        .header("user-agent", "wrk")
        .header("accept", "*/*")
        .body(body.as_bytes())
}

type Ledger = BTreeMap<String, Work>;

fn delta(after: &Ledger, before: &Ledger) -> Ledger {
    after
        .iter()
        .map(|(name, w)| {
            let b = before.get(name).copied().unwrap_or_default();
            let d = Work {
                calls: w.calls - b.calls,
                fuel: w.fuel - b.fuel,
                host_calls: w.host_calls - b.host_calls,
            };
            (name.clone(), d)
        })
        .filter(|(_, w)| w.calls > 0)
        .collect()
}

/// `WORK <figure> <wasm operators per request> <host calls per request>`, then the split.
fn report(figure: &str, work: &Ledger, requests: u64) {
    let fuel: u64 = work.values().map(|w| w.fuel).sum();
    let host: u64 = work.values().map(|w| w.host_calls).sum();
    println!(
        "WORK {figure} {} {:.1}",
        fuel / requests,
        host as f64 / requests as f64
    );
    for (name, w) in work {
        println!(
            "  {name:<28} {:>4.1} calls {:>9} ops {:>5.1} host calls",
            w.calls as f64 / requests as f64,
            w.fuel / requests,
            w.host_calls as f64 / requests as f64
        );
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let body = String::from_utf8(order_body::json_body(1024))?;
    for mode in ["raw", "json"] {
        let config = format!(
            r#"{{"routes":[{{"prefix":"/orders","methods":["POST"],"key":"required"}}],
                "scope":[{{"header":"authorization"}},"peer"],
                "fingerprint":{{"mode":"{mode}","headers":["content-type"]}},
                "capacity":100000}}"#
        );
        // Envoy's default log level (info): the filter formats no debug line.
        let envoy = Envoy::builder()
            .workers(1)
            .log_level(2)
            .config(&config)
            .start()?;
        let worker = envoy.worker(0);
        // Warm-up outside the figures: the first request pays one-time allocations.
        worker
            .send(request("warm", &body))?
            .respond(Response::new(201).json(r#"{"id":"ord_123","status":"created"}"#))?;

        let before = envoy.work();
        for i in 0..REQUESTS {
            let exchange = worker.send(request(&format!("k-{mode}-{i}"), &body))?;
            exchange.respond(Response::new(201).json(r#"{"id":"ord_123","status":"created"}"#))?;
            assert_eq!(exchange.expect_answer()?.status, 201);
        }
        let fresh = envoy.work();
        report(
            &format!("{mode}_fresh_key"),
            &delta(&fresh, &before),
            REQUESTS,
        );

        for i in 0..REQUESTS {
            let answer = worker
                .send(request(&format!("k-{mode}-{i}"), &body))?
                .expect_answer()?;
            assert_eq!(answer.header("idempotent-replayed"), Some("true"));
        }
        let replayed = envoy.work();
        report(
            &format!("{mode}_replay"),
            &delta(&replayed, &fresh),
            REQUESTS,
        );

        let _held = worker.send(request(&format!("held-{mode}"), &body))?;
        for _ in 0..REQUESTS {
            let answer = worker
                .send(request(&format!("held-{mode}"), &body))?
                .expect_answer()?;
            assert_eq!(answer.status, 409);
        }
        report(
            &format!("{mode}_409"),
            &delta(&envoy.work(), &replayed),
            REQUESTS,
        );
        assert!(envoy.anomalies().is_empty(), "{:?}", envoy.anomalies());
    }
    Ok(())
}
