//! The sequencer's resource records are charged like claims, in a real Envoy on the local
//! store: one address floods an unsigned ordering route (`order.unsigned: "allow"`) with events
//! for made-up resources — early events, each leaving a record for its patience and TTL, the
//! delivery's own claim released at once — and is held at its address share once the store is
//! under pressure (429 `scope_quota_exceeded`, counted as `quota_exceeded.address`, never a 5xx,
//! nothing forwarded), while another sender is still served; the same requests on an unguarded
//! path all pass through.

use crate::client::Request;
use crate::floods::{flood, Tally};
use crate::harness::{Envoy, Setup};
use crate::order::TABLE;
use crate::upstream::Upstream;
use std::net::Ipv4Addr;

/// 1,000 records (one fill shard), under pressure from a fifth (200); an address group's share
/// is a tenth (100). `/patient` orders its events and keeps an early one's first sight.
fn config() -> String {
    let order = format!(
        r#"{{ "unsigned": "allow", "resource": {{ "json": "/data/order" }}, "event": {{ "json": "/type" }},
             "table": {TABLE}, "early": {{ "retry_after": "1s", "forward_after": "1h" }} }}"#
    );
    format!(
        r#"{{ "capacity": 1000,
  "routes": [
    {{ "prefix": "/patient", "kind": "callback", "key_from": [{{ "header": "webhook-id" }}], "order": {order} }}
  ] }}"#
    )
}

/// Made-up resources the flooder sends events for: past the store's pressure (200).
const FLOOD: usize = 400;
const FLOODER: Ipv4Addr = Ipv4Addr::new(127, 0, 9, 1);
const OTHER: Ipv4Addr = Ipv4Addr::new(127, 0, 9, 2);

/// An early event (shipping an unpaid order) for made-up order `n`, a fresh delivery id each.
fn shipped(path: &str, n: usize, from: Ipv4Addr) -> Request {
    Request::new("POST", path)
        .header("webhook-id", &format!("flood-{n}"))
        .json(&format!(
            r#"{{"type":"order.shipped","data":{{"order":{n}}}}}"#
        ))
        .from(from)
}

fn flooded(envoy: &Envoy, path: &'static str) -> Tally {
    let mut tallies = flood(&[envoy.port], FLOOD, |n| {
        ("flooder", shipped(path, n, FLOODER))
    });
    tallies.remove("flooder").expect("the flooder's answers")
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn made_up_resources_on_an_unsigned_route_are_held_at_the_senders_share() {
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(&config(), upstream.port));

    let tally = flooded(&envoy, "/patient");
    eprintln!("flood of made-up resources: {}", tally.summary());
    let refused = tally.count("429 scope_quota_exceeded");
    assert!(
        refused > 0,
        "held at its share under pressure: {}",
        tally.summary()
    );
    assert_eq!(
        tally.count("409 order_event_early") + refused,
        FLOOD,
        "early (409) until held, then 429; never a 5xx: {}",
        tally.summary()
    );
    // Served past its share only while the store was below its pressure (200 records).
    assert!(
        tally.count("409 order_event_early") <= 220,
        "{}",
        tally.summary()
    );
    assert_eq!(upstream.total(), 0, "no event was forwarded");
    // Each refusal counted by its share and logged with the payer's hashed tag, as a claim's is.
    envoy.assert_share_refusals("address", refused, "127.0.9.1");

    // Another sender, within its share, is served under the same pressure.
    let paid = Request::new("POST", "/patient")
        .header("webhook-id", "other-1")
        .json(r#"{"type":"payment.succeeded","data":{"order":"other"}}"#)
        .from(OTHER)
        .send(envoy.port);
    assert_eq!(paid.status, 201, "{}", paid.text());
    assert_eq!(upstream.path_hits("/patient"), 1);

    // The same requests on a path no route guards: each passes through.
    let unguarded = flooded(&envoy, "/unguarded");
    assert_eq!(unguarded.count("201"), FLOOD, "{}", unguarded.summary());
    assert_eq!(upstream.path_hits("/unguarded"), FLOOD);
}
