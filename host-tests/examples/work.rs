//! What the filter's own code costs per request, counted in wasm operators (wasmtime fuel) on the
//! shipped `.wasm`: deterministic, so an optimisation shows up as a number that does not drift
//! with the load of a shared machine. `make bench` records it in BENCHMARKS.md; run by hand with
//! `cargo run -p idemgate-host-tests --example work` (the `.wasm` from `make build-filter`).
//!
//! Per mode it sends `REQUESTS` keyed POSTs of the benchmark's 1 KB order body with fresh keys
//! (claim, forward, store) — in the raw mode also from a new client each —, then replays each, then sends one key twice while in flight (409), and
//! prints `WORK <figure> <wasm operators per request> <host calls per request>` lines plus the
//! split by callback and an `imports:` line naming the host calls (calls per request by import).
//! Modes: `raw` and `json` answer on Envoy's router path; `detached` is the shipped example's
//! setup (`upstream.reentry` set, json fingerprints): the filter sends the request itself with an
//! HTTP callout back into Envoy through the re-entry listener, and answers from the callout's
//! (marked) response.
//!
//! `--profile [N]` runs a profiling copy instead (`idemgate_host_tests::profile`: each function
//! counts the operators it executes itself) of the `.wasm` `IDEMGATE_FILTER_WASM` names — one built
//! with its name section kept, so the table names functions — and prints, per figure,
//! `PROFILE <figure> <operators per request>` and the N (default 15) functions that executed the
//! most, in operators per request, share and calls per request; on the same code the total is
//! within 1 % of the WORK figure. Then `ALLOCS <figure> <allocations per request>` and the N call
//! sites that allocated the most (the profiling copy's allocation hook, `idemgate_host_tests::profile`).

use idemgate_host_tests::envoy::world::Work;
use idemgate_host_tests::scenario::Envoy as Proxy;
use idemgate_host_tests::scenario::{Envoy, Forwarding, Orders, Request, Response};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

const REQUESTS: u64 = 200;

/// The Envoy benchmark's order body (one definition, shared with the core bench).
#[path = "../../crates/envoy/bench/order_body.rs"]
mod order_body;

fn request(key: &str, body: &str) -> Request {
    request_from("Bearer bench", key, body)
}

/// A request from the client `authorization` names.
fn request_from(authorization: &str, key: &str, body: &str) -> Request {
    Request::post("/orders")
        .key(key)
        .header("authorization", authorization)
        .header("content-type", "application/json")
        .header("user-agent", "wrk")
        .header("accept", "*/*")
        .body(body.as_bytes())
}

type Ledger = BTreeMap<String, Work>;
type Imports = BTreeMap<(String, String), u64>;
type Profile = BTreeMap<(String, usize), u64>;
type Allocs = BTreeMap<Vec<String>, u64>;

/// The ledgers at one moment.
struct Snapshot {
    work: Ledger,
    imports: Imports,
    profile: Profile,
    allocs: Allocs,
}

fn snapshot(envoy: &Proxy) -> Snapshot {
    Snapshot {
        work: envoy.work(),
        imports: envoy.import_work(),
        profile: envoy.world().profile(),
        allocs: envoy.world().alloc_sites(),
    }
}

/// What `--profile` needs: the instrumented copy and its functions' names.
struct Profiling {
    wasm: PathBuf,
    names: Vec<String>,
    top: usize,
}

fn profiling() -> Result<Option<Profiling>, Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() != Some("--profile") {
        return Ok(None);
    }
    let top = args.next().map(|n| n.parse()).transpose()?.unwrap_or(15);
    let source = idemgate_host_tests::artifacts::filter_wasm()?;
    let instrumented = idemgate_host_tests::profile::instrument(&std::fs::read(&source)?)?;
    let wasm = source.with_extension("profile.wasm");
    std::fs::write(&wasm, &instrumented.wasm)?;
    Ok(Some(Profiling {
        wasm,
        names: instrumented.names,
        top,
    }))
}

/// `PROFILE <figure> <operators per request>`, then the top functions by their own operators.
fn report_profile(figure: &str, after: &Profile, before: &Profile, p: &Profiling, requests: u64) {
    // Counters past the functions count calls (`idemgate_host_tests::profile`).
    let functions = p.names.len();
    let mut by_function: BTreeMap<usize, u64> = BTreeMap::new();
    let mut calls: BTreeMap<usize, u64> = BTreeMap::new();
    for (key, count) in after {
        let earlier = before.get(key).copied().unwrap_or(0);
        match key.1.checked_sub(functions) {
            Some(function) => *calls.entry(function).or_default() += count - earlier,
            None => *by_function.entry(key.1).or_default() += count - earlier,
        }
    }
    let total: u64 = by_function.values().sum();
    println!("PROFILE {figure} {}", total / requests);
    let mut ranked: Vec<(u64, usize)> = by_function.iter().map(|(f, ops)| (*ops, *f)).collect();
    ranked.sort_unstable_by(|a, b| b.cmp(a));
    for (ops, function) in ranked.into_iter().take(p.top) {
        let name = p.names.get(function).map_or("?", String::as_str);
        let name: String = name.chars().take(110).collect();
        let called = calls.get(&function).copied().unwrap_or(0);
        println!(
            "  {:>9} {:>5.1}% {:>7.1} calls  {name}",
            ops / requests,
            100.0 * ops as f64 / total.max(1) as f64,
            called as f64 / requests as f64
        );
    }
}

/// Frames of the allocator and the standard library, skipped to find who asked for the memory.
fn library_frame(name: &str) -> bool {
    let name = name.trim_start_matches('<');
    [
        "__rust",
        "alloc::",
        "core::",
        "std::",
        "hashbrown::",
        "dlmalloc::",
    ]
    .iter()
    .any(|prefix| name.starts_with(prefix))
}

/// `ALLOCS <figure> <allocations per request>`, then the call sites that allocate: the first
/// frame outside the standard library, its caller, and the library function that allocated.
fn report_allocs(figure: &str, after: &Allocs, before: &Allocs, top: usize, requests: u64) {
    let mut sites: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    for (stack, count) in after {
        let count = count - before.get(stack).copied().unwrap_or(0);
        if count == 0 {
            continue;
        }
        let own = stack.iter().position(|f| !library_frame(f));
        let name = |i: Option<usize>| {
            i.and_then(|i| stack.get(i))
                .map_or(String::from("-"), |f| f.chars().take(90).collect())
        };
        let via = name(own.and_then(|i| i.checked_sub(1)));
        let key = (name(own), name(own.map(|i| i + 1)), via);
        *sites.entry(key).or_default() += count;
    }
    let total: u64 = sites.values().sum();
    println!(
        "ALLOCS {figure} {:.1} per request",
        total as f64 / requests as f64
    );
    let mut ranked: Vec<_> = sites.into_iter().map(|(k, n)| (n, k)).collect();
    ranked.sort_unstable_by(|a, b| b.cmp(a));
    for (n, (site, caller, via)) in ranked.into_iter().take(top) {
        println!(
            "  {:>6.2}  {site}  <- {caller}  [{via}]",
            n as f64 / requests as f64
        );
    }
}

/// The figure's report: the WORK lines, or with `--profile` the profile table.
fn report_figure(
    figure: &str,
    after: &Snapshot,
    before: &Snapshot,
    profiling: Option<&Profiling>,
    requests: u64,
) {
    match profiling {
        Some(p) => {
            report_profile(figure, &after.profile, &before.profile, p, requests);
            report_allocs(figure, &after.allocs, &before.allocs, p.top, requests);
        }
        None => report(
            figure,
            &delta(&after.work, &before.work),
            &import_delta(&after.imports, &before.imports),
            requests,
        ),
    }
}

/// Host calls per (callback, import) between two readings of the import ledger.
fn import_delta(after: &Imports, before: &Imports) -> Imports {
    after
        .iter()
        .map(|(key, calls)| (key.clone(), calls - before.get(key).copied().unwrap_or(0)))
        .filter(|(_, calls)| *calls > 0)
        .collect()
}

/// `name calls, …` per request, for the imports `keep` selects.
fn imports_line(imports: &Imports, requests: u64, keep: impl Fn(&str) -> bool) -> String {
    let mut by_import: BTreeMap<&str, u64> = BTreeMap::new();
    for ((callback, import), calls) in imports {
        if keep(callback) {
            *by_import.entry(import).or_default() += calls;
        }
    }
    let parts: Vec<String> = by_import
        .iter()
        .map(|(name, calls)| format!("{name} {}", *calls as f64 / requests as f64))
        .collect();
    parts.join(", ")
}

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
fn report(figure: &str, work: &Ledger, imports: &Imports, requests: u64) {
    let fuel: u64 = work.values().map(|w| w.fuel).sum();
    let host: u64 = work.values().map(|w| w.host_calls).sum();
    println!(
        "WORK {figure} {} {:.1}",
        fuel / requests,
        host as f64 / requests as f64
    );
    for (name, w) in work {
        println!(
            "  {name:<28} {:>4.1} calls {:>9} ops {:>5.1} host calls  [{}]",
            w.calls as f64 / requests as f64,
            w.fuel / requests,
            w.host_calls as f64 / requests as f64,
            imports_line(imports, requests, |c| c == name)
        );
    }
    println!("  imports: {}", imports_line(imports, requests, |_| true));
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let profiling = profiling()?;
    let body = String::from_utf8(order_body::json_body(1024))?;
    for mode in ["raw", "json", "detached"] {
        let reentry = Forwarding::Reentry;
        let (fingerprint, upstream) = match mode {
            "raw" => ("raw", String::new()),
            "json" => ("json", String::new()),
            _ => ("json", format!(",{}", reentry.upstream("3s"))),
        };
        let config = format!(
            r#"{{"routes":[{{"prefix":"/orders","methods":["POST"],"key":"required"}}],
                "scope":[{{"header":"authorization"}},"peer"],
                "fingerprint":{{"mode":"{fingerprint}","headers":["content-type"]}},
                "capacity":100000{upstream}}}"#
        );
        // Envoy's default log level (info): the filter formats no debug line.
        let mut builder = Envoy::builder()
            .workers(1)
            .log_level(2)
            .config(&config)
            .forwarding(reentry, Arc::new(Orders::new()));
        if let Some(p) = &profiling {
            builder = builder.wasm(p.wasm.clone());
        }
        let envoy = builder.start()?;
        let report = |figure: &str, after: &Snapshot, before: &Snapshot| {
            report_figure(figure, after, before, profiling.as_ref(), REQUESTS)
        };
        let worker = envoy.worker(0);
        let detached = mode == "detached";
        // A fresh key: claim, then the upstream (Envoy's router, or the filter's callout).
        let fresh = |request: Request| -> Result<u16, Box<dyn std::error::Error>> {
            let exchange = worker.send(request)?;
            if detached {
                worker.answer_callouts()?;
            } else {
                exchange
                    .respond(Response::new(201).json(r#"{"id":"ord_123","status":"created"}"#))?;
            }
            Ok(exchange.expect_answer()?.status)
        };
        // Warm-up outside the figures: the first request pays one-time allocations.
        fresh(request("warm", &body))?;

        let before = snapshot(&envoy);
        for i in 0..REQUESTS {
            assert_eq!(fresh(request(&format!("k-{mode}-{i}"), &body))?, 201);
        }
        let after = snapshot(&envoy);
        report(&format!("{mode}_fresh_key"), &after, &before);

        // Fresh keys, each from a client the worker has not seen (the scope hashes it keeps
        // never hit): the raw mode only, the others add the same.
        let mut before = after;
        if mode == "raw" {
            for i in 0..REQUESTS {
                let client = format!("Bearer client-{i}");
                let fresh_client = request_from(&client, &format!("c-{i}"), &body);
                assert_eq!(fresh(fresh_client)?, 201);
            }
            let after = snapshot(&envoy);
            report("raw_fresh_key_new_client", &after, &before);
            before = after;
        }

        for i in 0..REQUESTS {
            let answer = worker
                .send(request(&format!("k-{mode}-{i}"), &body))?
                .expect_answer()?;
            assert_eq!(answer.header("idempotent-replayed"), Some("true"));
        }
        report(&format!("{mode}_replay"), &snapshot(&envoy), &before);

        // The 409s only: the held request (claimed, never answered) is not counted.
        let _held = worker.send(request(&format!("held-{mode}"), &body))?;
        let held = snapshot(&envoy);
        for _ in 0..REQUESTS {
            let answer = worker
                .send(request(&format!("held-{mode}"), &body))?
                .expect_answer()?;
            assert_eq!(answer.status, 409);
        }
        report(&format!("{mode}_409"), &snapshot(&envoy), &held);
        assert!(envoy.anomalies().is_empty(), "{:?}", envoy.anomalies());
    }
    Ok(())
}
