//! A callback route's own budget (`routes[].share`) in a real Envoy, with the store under
//! pressure: a route given a share is served up to it and then refused (429
//! `scope_quota_exceeded`, counted as `quota_exceeded.route` and logged with the route's hashed
//! label); a route left at the default has the whole store, so 1,500 deliveries are all
//! acknowledged though an identity's share is 400.

use crate::client::Request;
use crate::floods::{flood, keyed, Tally};
use crate::harness::{Envoy, Setup};
use crate::upstream::Upstream;
use std::net::Ipv4Addr;

/// 4,000 records in cells of 64 (none fills by chance), shares (a tenth: 400) binding from a
/// tenth full; one callback route with a share of 250, one without; an API route to fill the
/// store with.
const CONFIG: &str = r#"{
  "capacity": 4000, "records_per_cell": 64, "shares": { "pressure": "10%" },
  "routes": [
    { "prefix": "/hooks/limited", "kind": "callback", "key_from": [{ "header": "x-delivery" }],
      "share": 250 },
    { "prefix": "/hooks/payments", "kind": "callback", "key_from": [{ "header": "x-delivery" }] },
    { "prefix": "/orders" }
  ]
}"#;

/// The route's share in [`CONFIG`].
const ROUTE_SHARE: usize = 250;
/// Deliveries to the route with the default budget: far past an identity's share (400).
const DELIVERIES: usize = 1_500;

/// The senders of a route's flood (`net` tells the routes' apart): one loopback address per
/// client thread, so that no sender's address group reaches its share (400) and the route's
/// budget is what is measured.
fn sender(net: u8, n: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, net, 7, 1 + (n % crate::floods::THREADS) as u8)
}

/// Puts the store past its pressure (a tenth: 400 records): 500 orders of 5 anonymous clients,
/// each far within its share.
fn fill_past_pressure(envoy: &Envoy) {
    let tallies = flood(&[envoy.port], 500, |n| {
        let from = Ipv4Addr::new(127, 0, 8, 1 + (n % 5) as u8);
        ("filler", keyed("/orders", &format!("fill-{n}"), from, None))
    });
    let tally = &tallies["filler"];
    assert_eq!(tally.count("201"), 500, "{}", tally.summary());
}

fn deliveries(envoy: &Envoy, path: &'static str, net: u8, count: usize) -> Tally {
    let mut tallies = flood(&[envoy.port], count, |n| {
        let delivery = Request::new("POST", path)
            .header("x-delivery", &format!("delivery-{n}"))
            .json("{\"event\":\"paid\"}")
            .from(sender(net, n));
        ("provider", delivery)
    });
    tallies.remove("provider").expect("the provider's answers")
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_callback_route_is_held_at_its_own_share_and_by_default_has_the_store() {
    let upstream = Upstream::start();
    let envoy = Envoy::start(&Setup::new(CONFIG, upstream.port));
    fill_past_pressure(&envoy);

    // The route with a share: its share acknowledged, then refused for it.
    let limited = deliveries(&envoy, "/hooks/limited", 1, 400);
    eprintln!("route with a share of {ROUTE_SHARE}: {}", limited.summary());
    assert_eq!(limited.count("201"), ROUTE_SHARE, "{}", limited.summary());
    assert_eq!(
        limited.count("429 scope_quota_exceeded"),
        400 - ROUTE_SHARE,
        "{}",
        limited.summary()
    );
    assert_eq!(upstream.path_hits("/hooks/limited"), ROUTE_SHARE);
    // Counted by the share that refused, as the core decided it, and logged with the payer's
    // hashed label (never the route or a client's identity in clear).
    envoy.assert_share_refusals("route", 400 - ROUTE_SHARE, "/hooks");

    // The route without one: every delivery acknowledged, the store under the same pressure.
    let payments = deliveries(&envoy, "/hooks/payments", 2, DELIVERIES);
    eprintln!("route with the default budget: {}", payments.summary());
    assert_eq!(payments.count("201"), DELIVERIES, "{}", payments.summary());
    assert_eq!(upstream.path_hits("/hooks/payments"), DELIVERIES);
}
