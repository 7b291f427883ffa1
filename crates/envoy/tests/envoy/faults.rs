//! Faults in a real Envoy. For each: what the client gets, that no duplicate
//! reached the upstream while the claim was held, and that no lease outlives its TTL (a retry takes
//! the claim over within `lease` + one reclaim tick). The plain in-doubt cases (reset before the
//! response, immediate cut, route timeout before any byte, client gone while the upstream works)
//! are in `responses.rs`; these build on them: faults after the response started, a client that
//! goes away half way through its own body, a configuration reload under traffic, and a VM that
//! dies under each failure policy.

use crate::client::{read_response, Request, Response};
use crate::harness::{Envoy, Setup};
use crate::upstream::Upstream;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

const LEASE_MS: u64 = 2000;

/// Retries `request` until it is no longer 409; every 409 must carry a `Retry-After` no longer
/// than the lease. Returns the answer and how long after `since` it came. Fails if the claim is
/// still held `lease + 2 s` after `since`: a lease must never outlive its TTL.
fn until_lease_ends(request: &Request, port: u16, since: Instant) -> (Response, Duration) {
    let limit = Duration::from_millis(LEASE_MS + 2000);
    loop {
        let response = request.send(port);
        if response.status != 409 {
            return (response, since.elapsed());
        }
        let retry_after: u64 = response
            .header("retry-after")
            .and_then(|v| v.parse().ok())
            .expect("409 carries Retry-After");
        assert!(
            (1..=LEASE_MS.div_ceil(1000)).contains(&retry_after),
            "Retry-After {retry_after} s is within the lease"
        );
        assert!(
            since.elapsed() < limit,
            "the claim outlived its {LEASE_MS} ms lease"
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// Reads a response's head only (status line and headers), leaving the body unread.
fn read_head(stream: &mut std::net::TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn faults_after_the_response_started_hold_the_claim_only_for_the_lease() {
    let upstream = Upstream::start();
    let config = format!(r#"{{ "routes": [{{ "prefix": "/" }}], "lease": "{LEASE_MS}ms" }}"#);
    let mut setup = Setup::new(&config, upstream.port);
    setup.route_timeout = "1s";
    let envoy = Envoy::start(&setup);
    let port = envoy.port;

    // 1. The upstream dies mid-response: headers and half the body, a pause, then it closes.
    let died = Request::post("/f", "died").script("body=4000;stall=300;cut");
    let mut stream = died.open(port);
    died.write(&mut stream);
    let seen = read_response(stream);
    let died_at = Instant::now();
    assert!(seen.is_err(), "the client sees the body cut off: {seen:?}");

    // 2. The upstream is slower than the route timeout, after its answer started.
    let slow = Request::post("/f", "slow").script("body=4000;stall=2500");
    let mut stream = slow.open(port);
    slow.write(&mut stream);
    let seen = read_response(stream);
    let slow_at = Instant::now();
    assert!(
        seen.is_err(),
        "the route timeout cuts the answer off: {seen:?}"
    );

    // 3. The client goes away mid-response: it reads the head, then closes while the body stalls.
    let gone = Request::post("/f", "gone").script("body=4000;stall=1500");
    let mut stream = gone.open(port);
    gone.write(&mut stream);
    let head = read_head(&mut stream);
    assert!(head.starts_with("HTTP/1.1 201"), "{head}");
    drop(stream);
    let gone_at = Instant::now();

    // During the lease, every retry is a 409 — none reaches the upstream a second time.
    for key in ["died", "slow", "gone"] {
        let retry = Request::post("/f", key).send(port);
        assert_eq!(retry.status, 409, "{key}: {}", retry.text());
        assert_eq!(retry.problem_code(), "request_in_flight");
        assert_eq!(
            upstream.hits(key),
            1,
            "{key}: no duplicate during the lease"
        );
    }
    upstream.wait_finished(3);
    assert_eq!(envoy.counter("in_doubt"), 3);
    assert_eq!(envoy.counter("stored"), 0);
    assert_eq!(envoy.counter("released"), 0);

    // The leases end on time: a retry takes each claim over (a second execution, by design for
    // an outcome in doubt — the backend's own constraints are the last defence).
    for (key, since) in [("died", died_at), ("slow", slow_at), ("gone", gone_at)] {
        let (taken, after) = until_lease_ends(&Request::post("/f", key), port, since);
        assert_eq!((taken.status, taken.replayed()), (201, false), "{key}");
        eprintln!(
            "{key}: claim taken over {} ms after the fault",
            after.as_millis()
        );
        assert_eq!(upstream.hits(key), 2, "{key}");
        // ...and that take-over completed normally: a replay now.
        assert!(Request::post("/f", key).send(port).replayed(), "{key}");
    }
    assert_eq!(envoy.counter("taken_over"), 3);
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_client_gone_mid_request_leaves_no_claim() {
    let upstream = Upstream::start();
    let config = format!(r#"{{ "routes": [{{ "prefix": "/" }}], "lease": "{LEASE_MS}ms" }}"#);
    let envoy = Envoy::start(&Setup::new(&config, upstream.port));
    let port = envoy.port;

    // Headers and half the body, then the client closes (content-length: 40, 20 bytes sent).
    let mut stream = Request::new("POST", "/f").open(port);
    stream
        .write_all(
            b"POST /f HTTP/1.1\r\nhost: test\r\nidempotency-key: half\r\ncontent-type: application/json\r\ncontent-length: 40\r\n\r\n{\"sku\":\"A1\",\"qty\":",
        )
        .expect("write half a request");
    stream.flush().expect("flush");
    // Wait (bounded) until the filter saw the body start: Envoy's downstream rx byte count grows.
    let deadline = Instant::now() + Duration::from_secs(5);
    while envoy
        .stat("http.ingress.downstream_cx_rx_bytes_total")
        .unwrap_or(0)
        < 100
    {
        assert!(Instant::now() < deadline, "Envoy never read the request");
        thread::sleep(Duration::from_millis(10));
    }
    drop(stream);
    let deadline = Instant::now() + Duration::from_secs(5);
    while envoy.stat("http.ingress.downstream_cx_active").unwrap_or(1) != 0 {
        assert!(Instant::now() < deadline, "Envoy never saw the client go");
        thread::sleep(Duration::from_millis(10));
    }
    // Nothing was forwarded, nothing claimed: the retry runs at once (no 409, no lease to wait).
    assert_eq!(upstream.hits("half"), 0);
    assert_eq!(envoy.counter("claimed"), 0);
    let retry = Request::post("/f", "half").send(port);
    assert_eq!(
        (retry.status, retry.replayed()),
        (201, false),
        "{}",
        retry.text()
    );
    assert_eq!(upstream.hits("half"), 1);
    assert_eq!(envoy.counter("in_doubt"), 0);
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn the_filter_configuration_is_reloaded_under_traffic() {
    let upstream = Upstream::start();
    let free = TcpListener::bind("127.0.0.1:0").expect("bind");
    let listen = free.local_addr().expect("addr").port();
    drop(free);
    let v1 = r#"{ "routes": [{ "prefix": "/" }], "lease": "5s" }"#;
    let v2 = r#"{ "routes": [{ "prefix": "/strict", "key": "required" }, { "prefix": "/" }], "lease": "5s" }"#;
    let mut setup = Setup::new(v1, upstream.port);
    setup.lds_port = Some(listen);
    let envoy = Envoy::start(&setup);
    let port = envoy.port;
    assert_eq!(port, listen);
    let lds = |envoy: &Envoy| {
        envoy
            .stat("listener_manager.lds.update_success")
            .unwrap_or(0)
    };
    let updates_before = lds(&envoy);

    // A stored answer, and a request in flight across the reload.
    let before = Request::post("/o", "before").send(port);
    assert_eq!(before.status, 201);
    let inflight = thread::spawn(move || {
        Request::post("/o", "inflight")
            .script("delay=1500")
            .send(port)
    });
    upstream.wait_hits("inflight", 1);

    // Traffic: a few keys, each sent again and again from several threads, through the reload.
    let stop = Arc::new(AtomicBool::new(false));
    let seen: Arc<Mutex<Vec<(String, u16, bool)>>> = Arc::default();
    let workers: Vec<_> = (0..4)
        .map(|t| {
            let (stop, seen) = (stop.clone(), seen.clone());
            thread::spawn(move || {
                let mut i = 0usize;
                while !stop.load(Ordering::SeqCst) {
                    let key = format!("t-{}", (i * 4 + t) % 24);
                    i += 1;
                    let r = Request::post("/o", &key).script("delay=20").send(port);
                    seen.lock().unwrap().push((key, r.status, r.replayed()));
                }
            })
        })
        .collect();
    while seen.lock().unwrap().len() < 40 {
        thread::sleep(Duration::from_millis(10));
    }

    // Reload: the listener file is rewritten with another filter configuration.
    let mut next = Setup::new(v2, upstream.port);
    next.lds_port = Some(listen);
    envoy.reload_listener(&next);
    let deadline = Instant::now() + Duration::from_secs(20);
    while lds(&envoy) <= updates_before {
        assert!(Instant::now() < deadline, "LDS never applied the new file");
        thread::sleep(Duration::from_millis(20));
    }
    // The new configuration serves new connections (polled: each worker switches on its own).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let probe = Request::new("POST", "/strict").json("{}").send(port);
        if probe.status == 400 {
            assert_eq!(probe.problem_code(), "key_missing");
            break;
        }
        assert_eq!(probe.status, 201, "before the switch, /strict is optional");
        assert!(
            Instant::now() < deadline,
            "the new configuration never served"
        );
        thread::sleep(Duration::from_millis(20));
    }
    let during = seen.lock().unwrap().len();
    while seen.lock().unwrap().len() < during + 40 {
        thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.join().expect("traffic");
    }

    // Every request during the reload got an answer the semantics allow: run, replay or 409.
    let seen = seen.lock().unwrap();
    for (key, status, replayed) in seen.iter() {
        assert!(
            *status == 201 || *status == 409,
            "{key}: {status} during the reload"
        );
        let _ = replayed;
    }
    // Exactly once, across both configurations.
    for t in 0..24 {
        let key = format!("t-{t}");
        assert!(
            upstream.hits(&key) <= 1,
            "{key} ran {} times",
            upstream.hits(&key)
        );
    }
    // The request in flight across the reload completed under the old configuration and is
    // replayed under the new one; so is the answer stored before it.
    let inflight = inflight.join().expect("in flight");
    assert_eq!(inflight.status, 201);
    for key in ["before", "inflight"] {
        let replay = Request::post("/o", key).send(port);
        assert!(
            replay.replayed(),
            "{key}: {} {}",
            replay.status,
            replay.text()
        );
        assert_eq!(upstream.hits(key), 1);
    }
    // No claim was left behind by the reload: every traffic key now replays (or, if never sent
    // to completion, runs once) — none is stuck in flight.
    for t in 0..24 {
        let key = format!("t-{t}");
        let response = Request::post("/o", &key).send(port);
        assert_eq!(response.status, 201, "{key}: {}", response.text());
        assert!(upstream.hits(&key) == 1, "{key}");
    }
    eprintln!(
        "reload: {} requests during the run, {} upstream executions",
        seen.len(),
        upstream.total()
    );
}

/// The test-only build with the `test-panic` feature (the filter panics at response headers
/// carrying `x-idemgate-test-panic`): `IDEMGATE_TEST_PANIC_WASM`, else built once per run (dev
/// profile) into its own target dir, never the shipped artifact's.
fn panic_wasm() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if let Some(path) = std::env::var_os("IDEMGATE_TEST_PANIC_WASM") {
                return PathBuf::from(path);
            }
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"))
                .join("test-panic");
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let status = std::process::Command::new(cargo)
                // The dev profile: a test VM that only has to die; it builds in a fraction of the
                // release profile's LTO time on a fresh machine.
                .args(["build", "-p", "idemgate-envoy"])
                .args(["--target", "wasm32-wasip1", "--features", "test-panic"])
                .arg("--target-dir")
                .arg(&target)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .expect("run cargo build for the test-panic filter");
            assert!(status.success(), "building the test-panic filter failed");
            target.join("wasm32-wasip1/debug/idemgate_envoy.wasm")
        })
        .clone()
}

/// One worker, the test-panic build, and a plugin failure policy.
fn dying_vm(upstream: &Upstream, policy: &str) -> Envoy {
    let config = format!(r#"{{ "routes": [{{ "prefix": "/" }}], "lease": "{LEASE_MS}ms" }}"#);
    let mut setup = Setup::new(&config, upstream.port);
    setup.concurrency = 1;
    setup.wasm = Some(panic_wasm());
    setup.plugin_extra = policy.into();
    Envoy::start(&setup)
}

/// Stores `done`, then kills the VM while it holds the claim of `doomed` (the upstream's answer
/// carries the panic header). Returns what the doomed request's client got.
fn kill_the_vm(envoy: &Envoy, upstream: &Upstream) -> Result<Response, String> {
    assert_eq!(Request::post("/v", "done").send(envoy.port).status, 201);
    let doomed = Request::post("/v", "doomed").script("header=x-idemgate-test-panic:1");
    let mut stream = doomed.open(envoy.port);
    doomed.write(&mut stream);
    let got = read_response(stream);
    assert_eq!(upstream.hits("doomed"), 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !envoy.log_text().contains("test-panic") {
        assert!(Instant::now() < deadline, "the VM did not panic");
        thread::sleep(Duration::from_millis(20));
    }
    got
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_dead_vm_fails_closed_by_default() {
    // The shipped build has no test trigger; the test build has.
    let has_trigger = |path: PathBuf| {
        let bytes = std::fs::read(&path).expect("read wasm");
        bytes.windows(21).any(|w| w == b"x-idemgate-test-panic")
    };
    assert!(
        !has_trigger(crate::harness::filter_wasm()),
        "the shipped filter can be made to panic"
    );
    assert!(has_trigger(panic_wasm()));
    let upstream = Upstream::start();
    let envoy = dying_vm(&upstream, "");
    let got = kill_the_vm(&envoy, &upstream);
    // The request whose VM died mid-response gets Envoy's 503 (its upstream did run: it is the
    // claim's lease, not this answer, that keeps a retry from running it again).
    assert_eq!(got.map(|r| r.status), Ok(503));
    // Every guarded request now gets a 503 from Envoy: nothing reaches the upstream unprotected.
    for key in ["doomed", "done", "fresh"] {
        let response = Request::post("/v", key).send(envoy.port);
        assert_eq!(response.status, 503, "{key}: {}", response.text());
        assert!(!response.replayed());
    }
    assert_eq!(upstream.hits("doomed"), 1);
    assert_eq!(upstream.hits("fresh"), 0);
    assert_eq!(upstream.hits("done"), 1);
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_dead_vm_fails_open_when_configured() {
    let upstream = Upstream::start();
    let envoy = dying_vm(&upstream, "failure_policy: FAIL_OPEN\n");
    let _ = kill_the_vm(&envoy, &upstream);
    // Requests bypass the filter: they run, unprotected — the documented cost of FAIL_OPEN is
    // exactly this duplicate of a completed request.
    let bypass = Request::post("/v", "done").send(envoy.port);
    assert_eq!((bypass.status, bypass.replayed()), (201, false));
    assert_eq!(
        upstream.hits("done"),
        2,
        "FAIL_OPEN lets the duplicate through"
    );
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_dead_vm_is_reloaded_and_its_claims_survive() {
    let upstream = Upstream::start();
    let envoy = dying_vm(&upstream, "failure_policy: FAIL_RELOAD\n");
    let _ = kill_the_vm(&envoy, &upstream);
    let died = Instant::now();
    // Until the new VM is up, requests fail closed (503); then the store, which lives in the
    // process and not in the VM, answers as before: the stored answer replays...
    let deadline = Instant::now() + Duration::from_secs(10);
    let replay = loop {
        let response = Request::post("/v", "done").send(envoy.port);
        if response.status != 503 {
            break response;
        }
        assert!(Instant::now() < deadline, "the VM was never reloaded");
        thread::sleep(Duration::from_millis(50));
    };
    eprintln!(
        "FAIL_RELOAD: serving again {} ms after the panic",
        died.elapsed().as_millis()
    );
    assert!(replay.replayed(), "{} {}", replay.status, replay.text());
    assert_eq!(upstream.hits("done"), 1);
    // ...and the claim the dead VM held stays in flight (409) until its lease ends, no longer.
    let (taken, after) = until_lease_ends(&Request::post("/v", "doomed"), envoy.port, died);
    assert_eq!((taken.status, taken.replayed()), (201, false));
    eprintln!(
        "FAIL_RELOAD: dead VM's claim taken over after {} ms",
        after.as_millis()
    );
    assert_eq!(upstream.hits("doomed"), 2);
}
