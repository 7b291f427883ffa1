//! A flood and the other clients' traffic: keep-alive connections, answers tallied per client, and
//! what must hold of the flooder's answers and of everyone else's.

use super::example::{
    app, example_envoy, keyed, ttl_seconds, ALICE, ANONYMOUS, BOB, FLOOD, THREADS, UNKNOWN,
};
use crate::client::{read_response, Request, Response};
use crate::upstream::Upstream;
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{Ipv4Addr, TcpStream};
use std::time::Instant;

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
    pub(crate) first: BTreeMap<String, String>,
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
pub(crate) fn flood_then_others(
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
