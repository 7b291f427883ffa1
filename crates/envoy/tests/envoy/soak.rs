//! Soak: unique keys at full speed through Envoy with a small store, for
//! `SOAK_SECONDS`. Run by `make soak` (default 180 s) only: `make test-envoy` skips it by name, and
//! without `SOAK_SECONDS` it fails instead of passing having checked nothing. Every `SOAK_SAMPLE_SECONDS` (default 10) it samples the
//! time, Envoy's RSS (`/proc/PID/status` VmRSS) and the filter's counters, prints a table (also
//! written to `SOAK_OUT`, default `target/soak.csv`), and asserts: no answer other than 201 and
//! the configured store-full 503; Envoy's memory flat once the store is at capacity. The live
//! record count is estimated as the answers stored within the last TTL (no gauge exists).

use crate::client::Request;
use crate::harness::{Envoy, Setup};
use crate::upstream::Upstream;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const CAPACITY: u64 = 512;
/// Records live `TTL_S` seconds, so the store fills, is reclaimed, and fills again all along.
const TTL_S: u64 = 20;

struct Sample {
    t: u64,
    rss_kib: u64,
    requests: u64,
    claimed: u64,
    stored: u64,
    store_full: u64,
    live: u64,
}

#[test]
#[ignore = "a soak: `make soak` (SOAK_SECONDS, default 180)"]
fn soak_unique_keys_at_full_speed() {
    let seconds = std::env::var("SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .expect("the soak needs SOAK_SECONDS (a whole number of seconds): run it with `make soak`");
    let every = std::env::var("SOAK_SAMPLE_SECONDS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(10)
        .max(1);
    let threads: usize = std::env::var("SOAK_THREADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let upstream = Upstream::start();
    let config = format!(
        r#"{{ "routes": [{{ "prefix": "/" }}], "capacity": {CAPACITY}, "records_per_cell": 8,
             "shares": {{ "peer": "100%" }}, "ttl": "{TTL_S}s", "lease": "5s", "max_response_body": "8KiB" }}"#
    );
    let envoy = Envoy::start(&Setup::new(&config, upstream.port));
    let port = envoy.port;

    let stop = Arc::new(AtomicBool::new(false));
    let requests = Arc::new(AtomicU64::new(0));
    let errors: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (stop, requests, errors) = (stop.clone(), requests.clone(), errors.clone());
            thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("soak-{t}-{i}");
                    i += 1;
                    let request = Request::post("/s", &key).script("body=2000");
                    let mut stream = request.open(port);
                    request.write(&mut stream);
                    let outcome = match crate::client::read_response(stream) {
                        Ok(r) if r.status == 201 && !r.replayed() => None,
                        Ok(r)
                            if r.status == 503
                                && r.header("content-type") == Some("application/problem+json")
                                && r.json()["code"] == "store_full" =>
                        {
                            None
                        }
                        Ok(r) => Some(format!("{} {}", r.status, r.text())),
                        Err(e) => Some(format!("transport: {e}")),
                    };
                    if let Some(error) = outcome {
                        *errors.lock().unwrap().entry(error).or_default() += 1;
                    }
                    requests.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();

    let start = Instant::now();
    let mut samples: Vec<Sample> = Vec::new();
    let mut stored_at: Vec<(u64, u64)> = Vec::new();
    loop {
        let t = start.elapsed().as_secs();
        let stored = envoy.counter("stored");
        stored_at.push((t, stored));
        // Records alive now ≈ answers stored within the last TTL (each lives TTL_S seconds).
        let ttl_ago = stored_at
            .iter()
            .rev()
            .find(|(at, _)| *at + TTL_S <= t)
            .map_or(0, |(_, s)| *s);
        samples.push(Sample {
            t,
            rss_kib: envoy.rss_kib(),
            requests: requests.load(Ordering::Relaxed),
            claimed: envoy.counter("claimed"),
            stored,
            store_full: envoy.counter("store_full"),
            live: stored - ttl_ago,
        });
        if t >= seconds {
            break;
        }
        thread::sleep(Duration::from_secs(every).min(Duration::from_secs(seconds - t)));
    }
    stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.join().expect("soak worker");
    }

    let mut table =
        String::from("t_s,rss_kib,requests,claimed,stored,store_full,live_records_approx\n");
    for s in &samples {
        table.push_str(&format!(
            "{},{},{},{},{},{},{}\n",
            s.t, s.rss_kib, s.requests, s.claimed, s.stored, s.store_full, s.live
        ));
    }
    eprintln!("soak: capacity {CAPACITY}, ttl {TTL_S} s, {threads} client threads\n{table}");
    let out = std::env::var("SOAK_OUT")
        .unwrap_or_else(|_| format!("{}/../../target/soak.csv", env!("CARGO_MANIFEST_DIR")));
    let _ = std::fs::write(&out, &table);

    let errors = errors.lock().unwrap();
    assert!(
        errors.is_empty(),
        "answers other than 201 / store_full: {errors:?}"
    );
    assert_eq!(envoy.counter("store_error"), 0);
    assert_eq!(envoy.counter("in_doubt"), 0);
    let last = samples.last().expect("samples");
    assert!(last.store_full > 0, "the store never reached capacity");
    // Flat once at capacity: from the first sample after one full TTL (the store has been full
    // and reclaimed at least once), RSS varies by less than 8 MiB and does not trend up.
    let steady: Vec<&Sample> = samples.iter().filter(|s| s.t >= TTL_S + every).collect();
    if steady.len() >= 2 {
        let min = steady.iter().map(|s| s.rss_kib).min().unwrap_or(0);
        let max = steady.iter().map(|s| s.rss_kib).max().unwrap_or(0);
        let (first, last) = (steady[0].rss_kib, steady[steady.len() - 1].rss_kib);
        eprintln!("soak: steady RSS {min}..{max} KiB, first {first}, last {last}");
        assert!(max - min < 8 * 1024, "RSS not flat: {min}..{max} KiB");
        assert!(last < first + 4 * 1024, "RSS grows: {first} -> {last} KiB");
    }
}
