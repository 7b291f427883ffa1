//! The core's benchmark, run natively and as wasm32-wasip1 inside V8 (Node's WASI), by
//! `crates/envoy/bench/bench.py` (`make bench`, `make test-bench`). An example of this crate (it
//! links only `idemgate-core`; the core's own dev-dependencies do not build for wasm32-wasip1), a
//! plain `main` that measures everything and prints `BENCH <name> <value> <unit>` lines. `IDEMGATE_BENCH_SMOKE=1` shrinks every count so
//! the smoke run takes well under a second.
//!
//! Each figure is the best of 40 batches (3 in smoke mode) timed with `Instant`, each sized to last
//! ≈2 ms (≈0.2 ms in smoke mode): on a shared machine the best batch is the one nobody interrupted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod order_body;

use idemgate_core::client::payer::Payers;
use idemgate_core::client::scope::{scope_hash, Scope, StorageKey};
use idemgate_core::client::token::{issue, verify, TokenSecret};
use idemgate_core::decision::ResponseFacts;
use idemgate_core::policy::Policy;
use idemgate_core::record::OwnerToken;
use idemgate_core::request::fingerprint::{FingerprintBuilder, FingerprintMode, FingerprintSpec};
use idemgate_core::request::key::IdempotencyKey;
use idemgate_core::store::MemoryStore;
use idemgate_core::time::{Span, UnixMillis};
use idemgate_core::{ClaimOutcome, FinishOutcome, Protocol};
use std::hint::black_box;
use std::time::Instant;

struct Bench {
    smoke: bool,
}

impl Bench {
    /// Nanoseconds per call of `f` (called with a running counter): the best of many short
    /// batches, so that time slices lost to other processes on a shared machine do not count.
    fn ns_per_op(&self, mut f: impl FnMut(u64)) -> f64 {
        let (batches, target_ns) = if self.smoke { (3, 2e5) } else { (40, 2e6) };
        // Warm up (≈20 ms): V8 compiles hot functions again with its optimising tier.
        let mut counter: u64 = 0;
        if !self.smoke {
            let t = Instant::now();
            while t.elapsed().as_millis() < 20 {
                f(counter);
                counter += 1;
            }
        }
        // Calibrate: double the batch until it lasts a tenth of the target.
        let mut n: u64 = 1;
        loop {
            let t = Instant::now();
            for _ in 0..n {
                f(counter);
                counter += 1;
            }
            let ns = t.elapsed().as_nanos() as f64;
            if ns > target_ns / 10.0 || n > 1 << 26 {
                n = ((n as f64) * target_ns / ns.max(1.0)).max(1.0) as u64;
                break;
            }
            n *= 2;
        }
        (0..batches)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..n {
                    f(counter);
                    counter += 1;
                }
                t.elapsed().as_nanos() as f64 / n as f64
            })
            .fold(f64::INFINITY, f64::min)
    }
}

fn report(name: &str, value: f64, unit: &str) {
    println!("BENCH {name} {value:.3} {unit}");
}

fn fingerprint(spec: &FingerprintSpec, body: &[u8], chunk: usize) -> [u8; 32] {
    let headers = [("content-type", &b"application/json"[..])];
    let mut builder = FingerprintBuilder::new(spec, "POST", "/orders", headers.iter().copied());
    for piece in body.chunks(chunk) {
        builder.update(piece).unwrap();
    }
    builder.finish().unwrap().0
}

fn main() {
    let bench = Bench {
        smoke: std::env::var("IDEMGATE_BENCH_SMOKE").is_ok_and(|v| v == "1"),
    };
    let scope = Scope {
        source: "header:authorization",
        value: b"Bearer 0123456789abcdef0123456789abcdef",
    };

    // Storage-key derivation (key parse included, as the filter does it per request).
    let ns = bench.ns_per_op(|i| {
        let raw = format!("order-{i:016x}");
        let key = IdempotencyKey::parse(raw.as_bytes()).unwrap();
        black_box(StorageKey::derive(scope, "POST", "/orders", &key));
    });
    report("storage_key", ns, "ns/op");

    // Fingerprints per mode and size, fed in 16 KiB chunks (Envoy's usual body slices).
    for size in [1024usize, 65536] {
        let body = order_body::json_body(size);
        for mode in [FingerprintMode::Raw, FingerprintMode::Json] {
            let spec = FingerprintSpec {
                mode: mode.clone(),
                ..FingerprintSpec::default()
            };
            let ns = bench.ns_per_op(|_| {
                black_box(fingerprint(&spec, black_box(&body), 16 * 1024));
            });
            let mb_s = body.len() as f64 / ns * 1e3;
            report(
                &format!("fingerprint_{}_{}k", mode.name(), size / 1024),
                mb_s,
                "MB/s",
            );
        }
    }

    // Decide + complete: claim a fresh key, store a small upstream answer (the filter's path),
    // charged to a client and its address as an unverified header scope is.
    let policy = Policy::from_json(
        r#"{"capacity": 4000000, "max_memory": "32GiB",
            "shares": {"identity": "100%", "peer": "100%"}}"#,
        &|_| None,
    )
    .unwrap();
    let payers = Payers::of(scope, false, Some(&[4, 32, 127, 0, 0, 1]));
    let now = UnixMillis(1_800_000_000_000);
    let mut store = MemoryStore::new();
    let fp = idemgate_core::request::fingerprint::Fingerprint([7; 32]);
    let key_of = |i: u64| {
        let mut k = [0u8; 32];
        k[..8].copy_from_slice(&i.to_le_bytes());
        k[8..16].copy_from_slice(&i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes());
        StorageKey::from_stored(k)
    };
    let answer = || ResponseFacts::Upstream {
        status: 201,
        headers: vec![("content-type".into(), "application/json".into())],
        body: Some(br#"{"id":"ord_123","status":"created"}"#.to_vec()),
    };
    let mut base = 0u64;
    let ns = bench.ns_per_op(|i| {
        let mut protocol = Protocol {
            store: &mut store,
            policy: &policy,
        };
        let key = key_of(i);
        let owner = OwnerToken([i as u8; 16]);
        match protocol.claim(key, fp, owner, payers, now).unwrap() {
            ClaimOutcome::Forward { owner, .. } => {
                let done = protocol.finish(key, owner, Some(answer()), now).unwrap();
                assert_eq!(done, FinishOutcome::Stored);
            }
            _ => panic!("fresh key not claimed"),
        }
        base = base.max(i + 1);
    });
    report("claim_complete", ns, "ns/op");

    // Replay: claim a completed key again (the stored answer comes back).
    let completed = base.min(1 << 16);
    let ns = bench.ns_per_op(|i| {
        let mut protocol = Protocol {
            store: &mut store,
            policy: &policy,
        };
        let outcome = protocol
            .claim(key_of(i % completed), fp, OwnerToken([1; 16]), payers, now)
            .unwrap();
        assert!(matches!(outcome, ClaimOutcome::Replay(_)));
        black_box(outcome);
    });
    report("claim_replay", ns, "ns/op");

    // Tokens.
    let secret = TokenSecret::new(b"0123456789abcdef0123456789abcdef").unwrap();
    let scope_h = scope_hash(scope);
    let ttl = Span(600_000);
    let ns = bench.ns_per_op(|i| {
        let mut nonce = [0u8; 16];
        nonce[..8].copy_from_slice(&i.to_le_bytes());
        black_box(issue(&secret, &scope_h, now, ttl, nonce));
    });
    report("token_issue", ns, "ns/op");
    let token = issue(&secret, &scope_h, now, ttl, [9; 16]).text;
    let ns = bench.ns_per_op(|_| {
        black_box(verify(&secret, black_box(&token), &scope_h, now).unwrap());
    });
    report("token_verify", ns, "ns/op");
}
