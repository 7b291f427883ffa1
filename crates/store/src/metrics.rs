//! Prometheus text exposition (`GET /metrics`), hand-rolled: a few counters, one gauge and one
//! latency histogram do not need a metrics framework.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of the latency histogram, in seconds.
const BUCKETS: [f64; 12] = [
    0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];

#[derive(Default)]
pub struct Metrics {
    /// (operation, outcome) → count.
    operations: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    cas_conflicts: AtomicU64,
    tls_refused: AtomicU64,
    engine_calls: AtomicU64,
    /// Batches of finishes received (each finish in one is also an operation).
    finish_batches: AtomicU64,
    in_flight: AtomicI64,
    latency_buckets: [AtomicU64; BUCKETS.len()],
    latency_count: AtomicU64,
    latency_sum_micros: AtomicU64,
}

impl Metrics {
    pub fn operation(&self, op: &'static str, outcome: &'static str, took: Duration) {
        if let Ok(mut map) = self.operations.lock() {
            *map.entry((op, outcome)).or_insert(0) += 1;
        }
        let secs = took.as_secs_f64();
        for (bound, bucket) in BUCKETS.iter().zip(&self.latency_buckets) {
            if secs <= *bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.latency_count.fetch_add(1, Ordering::Relaxed);
        self.latency_sum_micros.fetch_add(
            u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    pub fn cas_conflict(&self) {
        self.cas_conflicts.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection that did not complete mutual TLS.
    pub fn tls_refused(&self) {
        self.tls_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// One call to the engine (a read or a compare-and-set: one round trip to Redis).
    pub fn engine_call(&self) {
        self.engine_calls(1);
    }

    /// Engine calls made for an operation elsewhere (a batch of payers' charges).
    pub fn engine_calls(&self, calls: u32) {
        self.engine_calls
            .fetch_add(u64::from(calls), Ordering::Relaxed);
    }

    /// Compare-and-sets of a batch of payers' charges that met another version.
    pub fn cas_conflicts(&self, conflicts: u32) {
        self.cas_conflicts
            .fetch_add(u64::from(conflicts), Ordering::Relaxed);
    }

    /// A batch of finishes received (its finishes are counted as operations each).
    pub fn finish_batch(&self) {
        self.finish_batches.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an operation in flight until the guard drops.
    pub fn enter(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self)
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("# HELP idemgate_store_operations_total Operations answered, by operation and outcome.\n");
        out.push_str("# TYPE idemgate_store_operations_total counter\n");
        if let Ok(map) = self.operations.lock() {
            for ((op, outcome), n) in map.iter() {
                let _ = writeln!(
                    out,
                    "idemgate_store_operations_total{{op=\"{op}\",outcome=\"{outcome}\"}} {n}"
                );
            }
        }
        let single: [(&str, &str, &str, String); 5] = [
            (
                "idemgate_store_cas_conflicts_total",
                "counter",
                "Compare-and-set writes that lost a race and were decided again.",
                self.cas_conflicts.load(Ordering::Relaxed).to_string(),
            ),
            (
                "idemgate_store_tls_refused_total",
                "counter",
                "Connections closed because they did not complete mutual TLS.",
                self.tls_refused.load(Ordering::Relaxed).to_string(),
            ),
            (
                "idemgate_store_engine_calls_total",
                "counter",
                "Engine calls made (reads and compare-and-sets), one round trip each.",
                self.engine_calls.load(Ordering::Relaxed).to_string(),
            ),
            (
                "idemgate_store_finish_batches_total",
                "counter",
                "Requests carrying a batch of finishes (each finish is counted in operations).",
                self.finish_batches.load(Ordering::Relaxed).to_string(),
            ),
            (
                "idemgate_store_in_flight",
                "gauge",
                "Operations being carried out now.",
                self.in_flight.load(Ordering::Relaxed).to_string(),
            ),
        ];
        for (name, kind, help, value) in single {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
        out.push_str("# HELP idemgate_store_operation_seconds Time from request body to answer.\n");
        out.push_str("# TYPE idemgate_store_operation_seconds histogram\n");
        for (bound, bucket) in BUCKETS.iter().zip(&self.latency_buckets) {
            let _ = writeln!(
                out,
                "idemgate_store_operation_seconds_bucket{{le=\"{bound}\"}} {}",
                bucket.load(Ordering::Relaxed)
            );
        }
        let count = self.latency_count.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "idemgate_store_operation_seconds_bucket{{le=\"+Inf\"}} {count}"
        );
        let _ = writeln!(
            out,
            "idemgate_store_operation_seconds_sum {}",
            self.latency_sum_micros.load(Ordering::Relaxed) as f64 / 1e6
        );
        let _ = writeln!(out, "idemgate_store_operation_seconds_count {count}");
        out
    }
}

pub struct InFlight<'a>(&'a Metrics);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}
