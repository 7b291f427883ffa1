//! The example as shipped: its filter configuration and TTL, an Envoy and app shaped like it, and
//! the clients of the floods (the flooders' and the others' addresses).

use crate::client::Request;
use crate::harness::{Envoy, Setup};
use crate::upstream::{Seen, Upstream};
use std::net::Ipv4Addr;
use std::path::Path;

pub(crate) const MALLORY: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
pub(crate) const MALLORY_TOO: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);
pub(crate) const ALICE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 4);
pub(crate) const BOB: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 5);
pub(crate) const ANONYMOUS: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 6);

/// The flood: 14,000 requests with fresh keys.
pub(crate) const FLOOD: usize = 14_000;
/// Client threads (each one keep-alive connection) sending a flood.
pub(crate) const THREADS: usize = 4;
/// The path the app does not know: it answers 404 there.
pub(crate) const UNKNOWN: &str = "/unknown";

/// The token secret the example reads from Envoy's environment (its `/payments` route needs one).
const TOKEN_SECRET_ENV: &str = "IDEMGATE_TOKEN_SECRET";

/// The filter configuration (the core's JSON) of `examples/envoy/envoy.yaml`, as shipped: the
/// block under the wasm filter's `configuration: … value: |`.
pub(crate) fn example_filter() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/envoy/envoy.yaml");
    let yaml = std::fs::read_to_string(&path).expect("examples/envoy/envoy.yaml");
    let lines: Vec<&str> = yaml.lines().collect();
    let indent = |line: &str| line.len() - line.trim_start().len();
    let starts: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.trim() == "value: |")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        starts.len(),
        1,
        "examples/envoy/envoy.yaml has one filter configuration"
    );
    let start = starts[0];
    let outer = indent(lines[start]);
    let block: Vec<&str> = lines[start + 1..]
        .iter()
        .take_while(|l| l.trim().is_empty() || indent(l) > outer)
        .copied()
        .collect();
    let inner = block
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| indent(l))
        .min()
        .expect("a non-empty configuration");
    let text: String = block
        .iter()
        .map(|l| format!("{}\n", l.get(inner..).unwrap_or("")))
        .collect();
    let json: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the example's configuration is JSON ({e}):\n{text}"));
    assert!(json["routes"].is_array(), "{text}");
    text
}

/// `"24h"`, `"60s"`, `"10m"`, `"250ms"` in seconds.
fn seconds(duration: &str) -> u64 {
    let split = duration
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(duration.len());
    let (number, unit) = duration.split_at(split);
    let number: u64 = number.parse().expect("a duration's number");
    match unit {
        "ms" => number / 1000,
        "s" => number,
        "m" => number * 60,
        "h" => number * 3600,
        "d" => number * 86_400,
        other => panic!("unit {other:?} in {duration:?}"),
    }
}

/// The example's TTL in seconds (the longest a `Retry-After` for room in the store may be).
pub(crate) fn ttl_seconds(filter: &str) -> u64 {
    let json: serde_json::Value = serde_json::from_str(filter).expect("JSON");
    seconds(json["ttl"].as_str().expect("the example sets `ttl`"))
}

/// The app: 404 on a path it does not know, 201 on `/orders`.
pub(crate) fn app(seen: &Seen) -> String {
    if seen.path.starts_with("/orders") {
        String::new()
    } else {
        "status=404".into()
    }
}

/// An Envoy shaped like the example (its listener settings, re-entry listener and routes are the
/// harness's, which mirror it), with this filter configuration.
pub(crate) fn example_envoy(filter: &str, upstream: &Upstream) -> Envoy {
    let mut setup = Setup::new(filter, upstream.port);
    setup.vm_env = vec![(
        TOKEN_SECRET_ENV.into(),
        "a-flood-test-secret-long-enough".into(),
    )];
    setup.plugin_extra = "failure_policy: FAIL_RELOAD".into();
    Envoy::start(&setup)
}

/// A keyed POST (fresh key `key`) from `from`, with this `Authorization` if any.
pub(crate) fn keyed(path: &str, key: &str, from: Ipv4Addr, authorization: Option<&str>) -> Request {
    let request = Request::post(path, key).from(from);
    match authorization {
        Some(value) => request.header("authorization", value),
        None => request,
    }
}
