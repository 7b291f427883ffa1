//! The body of a detached exchange is kept by Envoy (the callout's request) until the exchange
//! ends: it stays charged to its client's part of the hashing budget until then, so a client
//! cannot hold more bodies in flight through slow exchanges than its part allows.

use crate::client::Request;
use crate::harness::{Envoy, Setup};
use crate::upstream::Upstream;
use std::net::Ipv4Addr;
use std::thread;

const ALICE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const BOB: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);

fn post(key: &str, kib: usize, from: Ipv4Addr) -> Request {
    let mut request = Request::post("/o", key).from(from);
    request.body = format!("{{\"pad\":\"{}\"}}", "p".repeat(kib * 1024 - 10)).into_bytes();
    request
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_detached_exchanges_body_is_charged_until_the_exchange_ends() {
    let upstream = Upstream::start();
    // A detached route keeps two copies while a body is taken in (its hash, the exchange's):
    // a part of 128 KiB is one 64 KiB body's.
    let mut setup = Setup::new(
        r#"{ "routes": [{ "prefix": "/" }], "scope": [{ "header": "x-none" }, "peer"],
             "upstream": { "reentry": "idemgate_reentry", "timeout": "15s" },
             "max_request_body": "64KiB", "hashing_budget": "1MiB",
             "hashing_budget_per_peer": "128KiB" }"#,
        upstream.port,
    );
    setup.concurrency = 1; // one VM, one budget
    let envoy = Envoy::start(&setup);
    let port = envoy.port;
    // Alice's first request: 40 KiB, on an exchange the app answers slowly.
    let first = thread::spawn(move || post("alice-1", 40, ALICE).script("delay=5000").send(port));
    upstream.wait_hits("alice-1", 1);
    // Her next 50 KiB body takes 100 KiB while it is taken in: with the first exchange's 40 KiB
    // still charged, over her part.
    let second = post("alice-2", 50, ALICE).send(port);
    assert_eq!(
        (second.status, second.problem_code().as_str()),
        (503, "hashing_budget_exceeded"),
        "{}",
        second.text()
    );
    assert_eq!(upstream.hits("alice-2"), 0);
    // Bob has his own part.
    let bob = post("bob-1", 50, BOB).send(port);
    assert_eq!(bob.status, 201, "{}", bob.text());
    // The first exchange over, her part is whole again.
    let first = first.join().expect("client");
    assert_eq!(first.status, 201, "{}", first.text());
    let again = post("alice-2", 50, ALICE).send(port);
    assert_eq!(again.status, 201, "{}", again.text());
    assert_eq!(upstream.hits("alice-2"), 1);
}
