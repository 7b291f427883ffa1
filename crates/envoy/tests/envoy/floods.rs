//! Shares: no client can deny the store to others. Each test replays one flood of the threat
//! against the configuration of `examples/envoy/envoy.yaml` as shipped (capacity 10,000, scope
//! `[authorization, peer]`, TTL 24 h), in front of an app that answers 404 on an unknown path (a
//! 404 is the app's answer, so it is stored). What must hold after each flood: the flooding client
//! is refused by its share once the store is under pressure (the flood itself fills it to the
//! example's pressure, a fifth) — 429 `scope_quota_exceeded` with a `Retry-After` within the TTL,
//! never a 503 `store_full` — and every other client (other addresses, their own `Authorization`,
//! or none) still gets its own answer for fresh keys and a replay for a repeated one. The last tests
//! are the opposite failure: a busy client alone on the example's store, and one address under an
//! ordinary load far under any share of a store of 1,000,000, are never refused.
//!
//! These tests were written before the fix; the commit that added them says how each failed then.

use crate::client::{read_response, Request, Response};
use crate::harness::{Envoy, Setup};
use crate::upstream::{Seen, Upstream};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{Ipv4Addr, TcpStream};
use std::path::Path;
use std::time::Instant;

pub(crate) const MALLORY: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
pub(crate) const MALLORY_TOO: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);
const ALICE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 4);
const BOB: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 5);
const ANONYMOUS: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 6);

/// The flood: 14,000 requests with fresh keys.
const FLOOD: usize = 14_000;
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
fn example_envoy(filter: &str, upstream: &Upstream) -> Envoy {
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

/// One keep-alive HTTP/1.1 connection to Envoy (the `client` helper opens and closes one per
/// request; a flood reuses a few, as an attacker would). Reconnects when Envoy closes it, or when the next request is from another
/// address.
struct Connection {
    port: u16,
    from: Option<Ipv4Addr>,
    stream: Option<TcpStream>,
}

impl Connection {
    fn new(port: u16) -> Connection {
        Connection {
            port,
            from: None,
            stream: None,
        }
    }

    fn send(&mut self, request: &Request) -> Response {
        if self.from != request.from {
            self.stream = None;
            self.from = request.from;
        }
        let mut bytes = format!(
            "{} {} HTTP/1.1\r\nhost: test\r\n",
            request.method, request.path
        );
        for (name, value) in &request.headers {
            bytes.push_str(&format!("{name}: {value}\r\n"));
        }
        bytes.push_str(&format!("content-length: {}\r\n\r\n", request.body.len()));
        let mut bytes = bytes.into_bytes();
        bytes.extend_from_slice(&request.body);
        // A reused connection Envoy has just closed fails before anything was read: once more on a
        // fresh one. A fresh connection that fails is a failure.
        let reused = self.stream.is_some();
        for attempt in 0..2 {
            let stream = self.stream.get_or_insert_with(|| request.open(self.port));
            let answer = stream
                .write_all(&bytes)
                .map_err(|e| e.to_string())
                .and_then(|()| read_response(&mut *stream));
            match answer {
                Ok(response) => {
                    if response
                        .header("connection")
                        .is_some_and(|v| v.eq_ignore_ascii_case("close"))
                    {
                        self.stream = None;
                    }
                    return response;
                }
                Err(e) if reused && attempt == 0 => {
                    eprintln!("keep-alive connection lost ({e}); reconnecting");
                    self.stream = None;
                }
                Err(e) => panic!("{} {}: {e}", request.method, request.path),
            }
        }
        unreachable!("the second attempt returns or panics")
    }
}

/// What one client got: answers counted by label (`404`, `201`, `429 scope_quota_exceeded`,
/// `503 store_full`, `… replayed`), and the `Retry-After` of the refusals.
#[derive(Default)]
pub(crate) struct Tally {
    answers: BTreeMap<String, usize>,
    /// Label of a refusal (429, 503) → the `Retry-After` of each (`None`: absent or not an
    /// integer).
    retry_after: BTreeMap<String, Vec<Option<u64>>>,
    /// The first answer of each label, for the message.
    first: BTreeMap<String, String>,
}

pub(crate) fn label(response: &Response) -> String {
    let mut label = response.status.to_string();
    if response.header("content-type") == Some("application/problem+json") {
        let code = serde_json::from_slice::<serde_json::Value>(&response.body)
            .ok()
            .and_then(|j| j["code"].as_str().map(str::to_string))
            .unwrap_or_else(|| "(no code)".into());
        label = format!("{label} {code}");
    }
    if response.replayed() {
        label.push_str(" replayed");
    }
    label
}

impl Tally {
    fn add(&mut self, response: &Response) {
        let label = label(response);
        *self.answers.entry(label.clone()).or_default() += 1;
        if response.status == 429 || response.status == 503 {
            self.retry_after.entry(label.clone()).or_default().push(
                response
                    .header("retry-after")
                    .and_then(|v| v.trim().parse().ok()),
            );
        }
        self.first.entry(label).or_insert_with(|| {
            let text = response.text();
            let cut = text.char_indices().nth(200).map_or(text.len(), |(i, _)| i);
            format!(
                "{} retry-after={:?} {}",
                response.status,
                response.header("retry-after"),
                &text[..cut]
            )
        });
    }

    fn merge(&mut self, other: Tally) {
        for (label, n) in other.answers {
            *self.answers.entry(label).or_default() += n;
        }
        for (label, values) in other.retry_after {
            self.retry_after.entry(label).or_default().extend(values);
        }
        for (label, first) in other.first {
            self.first.entry(label).or_insert(first);
        }
    }

    pub(crate) fn count(&self, label: &str) -> usize {
        self.answers.get(label).copied().unwrap_or(0)
    }

    pub(crate) fn total(&self) -> usize {
        self.answers.values().sum()
    }

    /// `404: 9621, 503 store_full: 4379 (retry-after 86075..86400)`.
    pub(crate) fn summary(&self) -> String {
        self.answers
            .iter()
            .map(|(label, n)| {
                let range = self.retry_after.get(label).map(|values| {
                    let known: Vec<u64> = values.iter().flatten().copied().collect();
                    let missing = values.len() - known.len();
                    match (known.iter().min(), known.iter().max()) {
                        (Some(min), Some(max)) => {
                            format!(" (retry-after {min}..{max}, {missing} without)")
                        }
                        _ => format!(" ({missing} without retry-after)"),
                    }
                });
                format!("{label}: {n}{}", range.unwrap_or_default())
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Sends `count` requests, `request(n)` for n in 0..count, over [`THREADS`] keep-alive connections
/// (spread over `ports`: the Envoys of a fleet); the answers are tallied by the client `request(n)`
/// names (its first item).
pub(crate) fn flood(
    ports: &[u16],
    count: usize,
    request: impl Fn(usize) -> (&'static str, Request) + Sync,
) -> BTreeMap<&'static str, Tally> {
    let request = &request;
    let mut tallies: BTreeMap<&'static str, Tally> = BTreeMap::new();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let port = ports[t % ports.len()];
                scope.spawn(move || {
                    let mut connection = Connection::new(port);
                    let mut tallies: BTreeMap<&'static str, Tally> = BTreeMap::new();
                    for n in (t..count).step_by(THREADS) {
                        let (who, request) = request(n);
                        tallies
                            .entry(who)
                            .or_default()
                            .add(&connection.send(&request));
                    }
                    tallies
                })
            })
            .collect();
        for worker in workers {
            for (who, tally) in worker.join().expect("flood worker") {
                tallies.entry(who).or_default().merge(tally);
            }
        }
    });
    tallies
}

/// What must hold of a flooding client's answers: a fresh execution (the app's 404) until its share
/// is held, then 429 `scope_quota_exceeded` with a `Retry-After` of 1 s up to the TTL; never a 503.
pub(crate) fn flooder_failures(who: &str, tally: &Tally, ttl: u64) -> Vec<String> {
    let mut failures = Vec::new();
    const REFUSED: &str = "429 scope_quota_exceeded";
    if tally.count(REFUSED) == 0 {
        failures.push(format!(
            "{who}: never refused by its share ({REFUSED}) in {} requests",
            tally.total()
        ));
    }
    for label in tally.answers.keys() {
        if label != "404" && label != REFUSED {
            failures.push(format!(
                "{who}: {} answers {label} (only 404 or {REFUSED} expected)",
                tally.count(label)
            ));
        }
    }
    if let Some(values) = tally.retry_after.get(REFUSED) {
        let bad = values
            .iter()
            .filter(|v| !v.is_some_and(|s| (1..=ttl).contains(&s)))
            .count();
        if bad > 0 {
            failures.push(format!(
                "{who}: {bad} refusals without a Retry-After of 1..={ttl} s"
            ));
        }
    }
    failures
}

/// Every other client, after a flood: fresh keys on `/orders` (the app's 201) and on the unknown
/// path (the app's 404), each executed once, then a retry of one of each, replayed — through
/// another of `ports` than the first request, when there are several (a fleet). The failures, and
/// one line per client for the report.
pub(crate) fn others_are_served(
    ports: &[u16],
    upstream: &Upstream,
    clients: &[(&str, Ipv4Addr, Option<&str>)],
) -> (Vec<String>, Vec<String>) {
    const FRESH: usize = 4;
    let mut failures = Vec::new();
    let mut lines = Vec::new();
    for (name, from, authorization) in clients {
        let mut tally = Tally::default();
        let mut first: Vec<(String, String, Response)> = Vec::new();
        for (path, status) in [("/orders", 201), (UNKNOWN, 404)] {
            for n in 0..FRESH {
                let key = format!("{name}-{}-{n}", path.trim_start_matches('/'));
                let response =
                    keyed(path, &key, *from, *authorization).send(ports[n % ports.len()]);
                tally.add(&response);
                if response.status != status || response.replayed() {
                    failures.push(format!(
                        "{name} ({from}, authorization {authorization:?}): fresh key {key} on {path}: {} (retry-after {:?}), not the app's {status}",
                        label(&response),
                        response.header("retry-after"),
                    ));
                } else if upstream.hits(&key) != 1 {
                    failures.push(format!(
                        "{name}: {key} reached the app {} times",
                        upstream.hits(&key)
                    ));
                }
                if n == 0 {
                    first.push((path.to_string(), key, response));
                }
            }
        }
        for (path, key, original) in first {
            let retry = keyed(&path, &key, *from, *authorization).send(ports[1 % ports.len()]);
            tally.add(&retry);
            if !(retry.replayed() && retry.status == original.status && retry.body == original.body)
            {
                failures.push(format!(
                    "{name}: the retry of {key} on {path} is not a replay of its first answer ({}): {}",
                    label(&original),
                    label(&retry),
                ));
            }
        }
        lines.push(format!("{name} ({from}): {}", tally.summary()));
    }
    (failures, lines)
}

/// The other clients of every flood: two identified ones on their own addresses, and one without
/// `Authorization` on its own address.
pub(crate) const OTHERS: &[(&str, Ipv4Addr, Option<&str>)] = &[
    ("alice", ALICE, Some("Bearer alice")),
    ("bob", BOB, Some("Bearer bob")),
    ("anonymous", ANONYMOUS, None),
];

/// Runs a flood of [`FLOOD`] requests against the example (`request(n)`: who sends the n-th, and
/// what), then the [`OTHERS`]; prints the numbers; asserts — and, with `rss_growth_kib`, that Envoy's
/// resident memory grew by at most that much during the flood. The flooders' answers, for more.
fn flood_then_others(
    name: &str,
    filter: &str,
    rss_growth_kib: Option<u64>,
    request: impl Fn(usize) -> (&'static str, Request) + Sync,
) -> BTreeMap<&'static str, Tally> {
    let upstream = Upstream::with_rule(app);
    let ttl = ttl_seconds(filter);
    let envoy = example_envoy(filter, &upstream);
    let rss_before = envoy.rss_kib();
    let started = Instant::now();
    let flooders = flood(&[envoy.port], FLOOD, request);
    let elapsed = started.elapsed();
    let rss_after = envoy.rss_kib();
    let counters = format!(
        "claimed {}, quota_exceeded {}, store_full {}",
        envoy.counter("claimed"),
        envoy.counter("quota_exceeded"),
        envoy.counter("store_full")
    );
    let (others_failed, others) = others_are_served(&[envoy.port], &upstream, OTHERS);
    eprintln!(
        "{name}: {FLOOD} requests in {:.1} s; {counters}; Envoy RSS {rss_before} -> {rss_after} KiB",
        elapsed.as_secs_f64()
    );
    let mut failures = Vec::new();
    for (who, tally) in &flooders {
        eprintln!("{name}: {who} got {}", tally.summary());
        for (label, first) in &tally.first {
            eprintln!("{name}: {who}'s first {label}: {first}");
        }
        failures.extend(flooder_failures(who, tally, ttl));
    }
    for line in &others {
        eprintln!("{name}: then {line}");
    }
    failures.extend(others_failed);
    if let Some(limit) = rss_growth_kib {
        let grown = rss_after.saturating_sub(rss_before);
        if grown > limit {
            failures.push(format!(
                "Envoy's resident memory grew by {grown} KiB during the flood (at most {limit} KiB)"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{name}: {} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    flooders
}

/// The first flood: `Authorization: Bearer mallory` on 14,000 fresh keys to a path the app
/// answers 404. It used to store 9,621, then answer 503 `store_full` — to mallory and to every other
/// client, with a Retry-After of about a day.
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn one_identity_cannot_fill_the_store() {
    flood_then_others("flood 1 (Bearer mallory)", &example_filter(), None, |n| {
        let key = format!("mallory-{n}");
        (
            "mallory",
            keyed(UNKNOWN, &key, MALLORY, Some("Bearer mallory")),
        )
    });
}

/// The second: a made-up `Authorization` on every request, from one address. Each request is
/// another identity, so only the address can carry the charge.
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn made_up_identities_from_one_address_cannot_fill_the_store() {
    flood_then_others(
        "flood 2 (made-up Authorization)",
        &example_filter(),
        None,
        |n| {
            let key = format!("forged-{n}");
            let who = format!("Bearer forged-{n}");
            (
                "127.0.0.2 (forged identities)",
                keyed(UNKNOWN, &key, MALLORY, Some(&who)),
            )
        },
    );
}

/// The third: no `Authorization`, from two addresses (7,000 each, interleaved). Their two peer
/// shares of every cell used to make the whole cell, so a third client was refused.
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn two_anonymous_addresses_cannot_fill_the_store() {
    flood_then_others(
        "flood 3 (two addresses, no Authorization)",
        &example_filter(),
        None,
        |n| {
            let key = format!("anon-{n}");
            if n % 2 == 0 {
                ("127.0.0.2", keyed(UNKNOWN, &key, MALLORY, None))
            } else {
                ("127.0.0.3", keyed(UNKNOWN, &key, MALLORY_TOO, None))
            }
        },
    );
}

/// The size of each answer in [`a_flood_of_large_answers_holds_only_its_share_of_memory`] (under the
/// example's `max_response_body` of 64 KiB, so each is stored).
pub(crate) const LARGE: usize = 60_000;

/// The memory side of the first flood: the same flood, with answers of 60 KB. The store's memory is
/// about `capacity` × answer size (10,000 × 60 KB ≈ 572 MiB here); the flooder used to hold nearly
/// all of it. A client's share counts bytes as well as records: the example gives each address
/// and identity 32 MiB of stored answers, so mallory is refused after about 558 answers of
/// 60 KB (its 1,000 records would be 57 MiB), and the flood may make Envoy grow by at most
/// half of the store.
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_flood_of_large_answers_holds_only_its_share_of_memory() {
    let mut json: serde_json::Value = serde_json::from_str(&example_filter()).expect("JSON");
    let capacity = json["capacity"]
        .as_u64()
        .expect("the example sets `capacity`");
    assert_eq!(
        json["shares"]["identity_bytes"], "32MiB",
        "the example's byte share"
    );
    // What a byte share holds is the question here, so it binds from the first record (at the
    // shipped pressure, the flood would hold up to a fifth of the records first: 2,000 × 60 KB,
    // still under the bound on Envoy's growth below).
    json["shares"]["pressure"] = "0%".into();
    let half_the_store_kib = capacity * LARGE as u64 / 1024 / 2;
    let script = format!("status=404;body={LARGE}");
    let filter = json.to_string();
    let flooders = flood_then_others(
        "flood 1, 60 KB answers",
        &filter,
        Some(half_the_store_kib),
        |n| {
            let key = format!("large-{n}");
            let request = keyed(UNKNOWN, &key, MALLORY, Some("Bearer mallory")).script(&script);
            ("mallory", request)
        },
    );
    let stored = flooders["mallory"].count("404");
    if let Some(failure) = outside_the_byte_share("mallory", stored) {
        panic!("{failure}");
    }
}

/// Whether `stored` answers of [`LARGE`] bytes are what the example's byte share (32 MiB) lets one
/// client hold: `Some(why)` when not. Each answer takes its body, its replayed headers
/// (content-type, location: under 100 bytes) and the record's 160 bytes. Claims are charged before
/// their answers are known, so each of a flood's connections may have one more in flight when the
/// share is reached.
pub(crate) fn outside_the_byte_share(who: &str, stored: usize) -> Option<String> {
    let share = 32u64 << 20;
    let (fewest, most) = (
        share / (LARGE as u64 + 260),
        share / (LARGE as u64 + 160) + 1,
    );
    let stored = stored as u64;
    (!(fewest..=most + THREADS as u64).contains(&stored)).then(|| {
        format!(
            "{who} stored {stored} answers of {LARGE} B: its byte share (32 MiB) allows {fewest}..={most} (+{THREADS} in flight)"
        )
    })
}

/// Fresh keys one busy client sends in [`a_busy_client_is_served_while_the_store_has_room`]: half
/// again its share of the example's store.
const BUSY: usize = 1_500;

/// The other side of the floods: one API client (one `Authorization`, one address) creating
/// 1,500 orders with fresh keys against the example as shipped, nobody else using it. Its share is
/// a tenth of the store (1,000), but shares bind only while the store is under pressure (a fifth
/// full by default), and 1,500 records are far from it: every order is created. It used to get
/// 1,000 × 201, then 500 × 429 `scope_quota_exceeded` with the store a tenth full.
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_busy_client_is_served_while_the_store_has_room() {
    let upstream = Upstream::with_rule(app);
    let envoy = example_envoy(&example_filter(), &upstream);
    let tallies = flood(&[envoy.port], BUSY, |n| {
        let key = format!("order-{n}");
        (
            "merchant",
            keyed("/orders", &key, ALICE, Some("Bearer merchant")),
        )
    });
    let tally = tallies.get("merchant").expect("the client's answers");
    eprintln!(
        "busy client: {BUSY} fresh keys: {}; claimed {}, quota_exceeded {}, store_full {}",
        tally.summary(),
        envoy.counter("claimed"),
        envoy.counter("quota_exceeded"),
        envoy.counter("store_full")
    );
    for (label, first) in &tally.first {
        eprintln!("busy client: first {label}: {first}");
    }
    assert_eq!(
        tally.count("201"),
        BUSY,
        "every order of a client alone on a store far from its pressure is created: {}",
        tally.summary()
    );
    assert_eq!(upstream.total(), BUSY, "each order reached the app once");
}

/// How many fresh keys the ordinary load sends from one address.
const ORDINARY: usize = 50_000;

/// The opposite failure: an ordinary load from one address (scope `["peer"]`, capacity 1,000,000)
/// used to be refused by chance — 12 of 49,213 fresh keys got 429 `scope_quota_exceeded` with the
/// store 5 % full, because the share was counted per cell and some cells drew more than 4 of the
/// address's keys. A client under its share of the whole store is never refused.
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn an_ordinary_load_from_one_address_is_never_refused() {
    let upstream = Upstream::with_rule(app);
    let mut filter: serde_json::Value =
        serde_json::from_str(&example_filter()).expect("the example's JSON");
    filter["scope"] = serde_json::json!(["peer"]);
    filter["capacity"] = serde_json::json!(1_000_000);
    // A store 100 times the example's has 100 times its memory bound: the example's `max_memory`
    // refuses it (as it should), so this load states its own.
    filter["max_memory"] = serde_json::json!("128GiB");
    let envoy = example_envoy(&filter.to_string(), &upstream);
    let started = Instant::now();
    let tallies = flood(&[envoy.port], ORDINARY, |n| {
        (
            "127.0.0.2",
            keyed("/orders", &format!("load-{n}"), MALLORY, None),
        )
    });
    let elapsed = started.elapsed();
    let tally = tallies.get("127.0.0.2").expect("the load's answers");
    eprintln!(
        "ordinary load: {ORDINARY} fresh keys from one address in {:.1} s: {}; claimed {}, quota_exceeded {}, store_full {}",
        elapsed.as_secs_f64(),
        tally.summary(),
        envoy.counter("claimed"),
        envoy.counter("quota_exceeded"),
        envoy.counter("store_full")
    );
    for (label, first) in &tally.first {
        eprintln!("ordinary load: first {label}: {first}");
    }
    assert_eq!(
        tally.count("201"),
        ORDINARY,
        "every fresh key of a client far under its share is executed: {}",
        tally.summary()
    );
}
