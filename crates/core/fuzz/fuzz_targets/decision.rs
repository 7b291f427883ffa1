//! The decisions and the protocol on structured input (via `arbitrary`): policy knobs, an
//! arbitrary record (built field by field, or one of `vectors/decision.json` shifted to `now`),
//! a fingerprint, `now` and response facts (arbitrary, or one of `vectors/completion.json`), then
//! a sequence of operations on `protocol::Protocol` over a `MemoryStore`, including claims whose
//! sans-IO transactions interleave with other operations.
//!
//! `decide` / `complete` invariants: a claim's `lease_until <= expires_at` and it is born alive;
//! a live completed record is never turned into a claim; a live in-flight record only by a takeover
//! after its lease; a conflict's `retry_after > 0` (`Retry-After >= 1` on the wire); a stored
//! answer keeps only allowed, safe headers and survives the store (encode -> decode).
//!
//! Protocol invariants: every cell decodes and holds each key at most once and at most
//! `per_cell` records; a claim is granted only when the record it replaces is absent, expired or
//! an in-flight record whose lease ended, and afterwards the new owner alone holds the key;
//! refusals never write; `finish` by anyone but the current owner is `NotOwner` and never writes;
//! the owner's finish does exactly what `complete` says.
#![no_main]

use arbitrary::Arbitrary;
use idemgate_core::answer::{answer, EdgeAnswer};
use idemgate_core::client::payer::Payers;
use idemgate_core::client::scope::{Scope, StorageKey};
use idemgate_core::client::token::CLOCK_SKEW;
use idemgate_core::decision::{complete, decide, Completion, Decision, ResponseFacts};
use idemgate_core::headers::NEVER_REPLAYED;
use idemgate_core::policy::{Capacity, Policy, StoreRule};
use idemgate_core::record::{
    Bucket, Completed, InFlight, OwnerToken, Record, StoredBody, StoredResponse,
};
use idemgate_core::request::fingerprint::Fingerprint;
use idemgate_core::request::key::IdempotencyKey;
use idemgate_core::store::protocol::{
    ClaimOutcome, Claiming, ConsumeOutcome, FinishOutcome, Protocol, ProtocolError, StoreReply,
    StoreRequest, Transaction, TransactionStep,
};
use idemgate_core::store::{Layout, MemoryStore, Store, WriteOutcome};
use idemgate_core::time::{Span, UnixMillis};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use std::sync::OnceLock;

const BASE_NOW: u64 = 1_700_000_000_000;
const NAME_POOL: &[&str] = &[
    "content-type",
    "Location",
    "etag",
    "x-order-id",
    "set-cookie",
    "x-envoy-upstream-service-time",
    "Date",
    "content-length",
    "link",
    "x-a:b",
    "x a",
    "",
    "X-Order-Id",
    "idempotent-replayed",
];
const KEYS: usize = 6;
const MAX_OPS: usize = 64;
const MAX_PENDING: usize = 4;

#[derive(Arbitrary, Debug, Clone)]
enum HeaderName {
    Pool(u8),
    Raw(String),
}

impl HeaderName {
    fn text(&self) -> String {
        match self {
            HeaderName::Pool(i) => NAME_POOL[usize::from(*i) % NAME_POOL.len()].to_string(),
            HeaderName::Raw(s) => s.clone(),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Rule {
    Default,
    Release(Vec<u16>),
    All,
    Success,
}

#[derive(Arbitrary, Debug)]
struct Knobs {
    ttl: u32,
    lease: u32,
    rule: Rule,
    max_response_body: u16,
    replay: Vec<HeaderName>,
    cells: u8,
    per_cell: u8,
}

impl Knobs {
    fn policy(&self) -> Policy {
        let mut p = Policy::defaults();
        p.ttl = Span(u64::from(self.ttl % 120_000) + 1);
        // May exceed the ttl (configuration refuses that, code-built policies may not): the claim
        // must clamp its lease to the record's life.
        p.lease = Span(u64::from(self.lease % 120_000) + 1);
        p.store_rule = match &self.rule {
            Rule::Default => p.store_rule.clone(),
            Rule::Release(list) => StoreRule::ReleaseStatuses(list.clone()),
            Rule::All => StoreRule::StoreAll,
            Rule::Success => StoreRule::SuccessOnly,
        };
        p.max_response_body = u64::from(self.max_response_body);
        if !self.replay.is_empty() {
            p.replay_headers = self.replay.iter().map(HeaderName::text).collect();
        }
        p.capacity = Capacity {
            cells: u32::from(self.cells % 4) + 1,
            per_cell: u16::from(self.per_cell % 4) + 1,
        };
        p
    }
}

/// A time relative to `now` (most interesting) or anywhere.
#[derive(Arbitrary, Debug)]
enum Time {
    Rel(i32),
    Abs(u64),
}

impl Time {
    fn at(&self, now: UnixMillis) -> UnixMillis {
        match self {
            Time::Rel(d) => UnixMillis(
                (i128::from(now.0) + i128::from(*d)).clamp(0, i128::from(u64::MAX)) as u64,
            ),
            Time::Abs(t) => UnixMillis(*t),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum ArbRecord {
    Absent,
    /// A record of `vectors/decision.json`, its times shifted so they relate to `now` as to the
    /// case's `now`.
    Vector(u8),
    InFlight {
        fp: u8,
        owner: u8,
        lease_until: Time,
        expires_at: Time,
    },
    Completed {
        fp: u8,
        status: u16,
        headers: Vec<(HeaderName, String)>,
        body: Option<Vec<u8>>,
        expires_at: Time,
    },
    TokenUsed {
        expires_at: Time,
    },
}

#[derive(Arbitrary, Debug, Clone)]
enum Facts {
    Upstream {
        status: u16,
        headers: Vec<(HeaderName, String)>,
        body: Option<Vec<u8>>,
    },
    NeverReached,
    InDoubt,
    /// The facts of a case of `vectors/completion.json`.
    Vector(u8),
}

impl Facts {
    fn resolve(&self) -> ResponseFacts {
        match self {
            Facts::Upstream {
                status: raw,
                headers,
                body,
            } => ResponseFacts::Upstream {
                status: *raw,
                headers: headers.iter().map(|(n, v)| (n.text(), v.clone())).collect(),
                body: body.clone(),
            },
            Facts::NeverReached => ResponseFacts::NeverReached,
            Facts::InDoubt => ResponseFacts::InDoubt,
            Facts::Vector(i) => {
                let all = &vectors().facts;
                all[usize::from(*i) % all.len()].clone()
            }
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Now {
    Near(u32),
    Any(u64),
}

#[derive(Arbitrary, Debug)]
struct Pure {
    now: Now,
    record: ArbRecord,
    fp: u8,
    owner: u8,
    facts: Facts,
    /// When the response ends, after `now`.
    complete_after: u32,
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// A claim through `Protocol` (the store answers at once).
    Claim {
        key: u8,
        fp: u8,
    },
    /// A claim as a sans-IO transaction, stepped by `Step` between other operations.
    StartClaim {
        key: u8,
        fp: u8,
    },
    Step {
        tx: u8,
    },
    Finish {
        key: u8,
        owner: u8,
        facts: Option<Facts>,
    },
    Consume {
        key: u8,
        ttl: u16,
    },
    Advance(u16),
    AdvancePastLease,
}

#[derive(Arbitrary, Debug)]
struct FuzzInput {
    knobs: Knobs,
    pure: Pure,
    ops: Vec<Op>,
}

/// Fingerprints come from a small set so that equal ones are common.
fn fingerprint(b: u8) -> Fingerprint {
    Fingerprint([b"ABCD"[usize::from(b % 4)]; 32])
}

struct Vectors {
    /// (case now, record)
    records: Vec<(u64, Record)>,
    facts: Vec<ResponseFacts>,
}

fn vectors() -> &'static Vectors {
    static V: OnceLock<Vectors> = OnceLock::new();
    V.get_or_init(|| {
        let decision: Value =
            serde_json::from_str(include_str!("../../../../vectors/decision.json")).unwrap();
        let completion: Value =
            serde_json::from_str(include_str!("../../../../vectors/completion.json")).unwrap();
        let fp = |v: &Value| Fingerprint([v.as_str().unwrap().as_bytes()[0]; 32]);
        let t = |v: &Value| UnixMillis(v.as_u64().unwrap());
        let headers = |v: &Value| -> Vec<(String, String)> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .map(|h| (h[0].as_str().unwrap().into(), h[1].as_str().unwrap().into()))
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut records = Vec::new();
        for case in decision["cases"].as_array().unwrap() {
            let input = &case["input"];
            let r = &input["record"];
            let record = match r["state"].as_str() {
                Some("in_flight") => Record::InFlight(InFlight {
                    fingerprint: fp(&r["fingerprint"]),
                    owner: OwnerToken([1; 16]),
                    lease_until: t(&r["lease_until"]),
                    expires_at: t(&r["expires_at"]),
                    payers: Payers::NONE,
                }),
                Some("completed") => Record::Completed(Completed {
                    fingerprint: fp(&r["fingerprint"]),
                    response: StoredResponse {
                        status: r["status"].as_u64().unwrap() as u16,
                        headers: headers(&r["headers"]),
                        body: match r["body"].as_str() {
                            Some(b) => StoredBody::Kept(b.as_bytes().to_vec()),
                            None => StoredBody::NotKept,
                        },
                        seal: None,
                    },
                    expires_at: t(&r["expires_at"]),
                }),
                _ => continue,
            };
            records.push((input["now"].as_u64().unwrap(), record));
        }
        let mut facts = Vec::new();
        for case in completion["cases"].as_array().unwrap() {
            let f = &case["input"]["facts"];
            facts.push(match f.as_str() {
                Some("never_reached") => ResponseFacts::NeverReached,
                Some("in_doubt") => ResponseFacts::InDoubt,
                _ => ResponseFacts::Upstream {
                    status: f["status"].as_u64().unwrap() as u16,
                    headers: headers(&f["headers"]),
                    body: f["body"].as_str().map(|b| b.as_bytes().to_vec()),
                },
            });
        }
        Vectors { records, facts }
    })
}

fn shift(t: UnixMillis, from: u64, to: UnixMillis) -> UnixMillis {
    UnixMillis(
        (i128::from(to.0) + i128::from(t.0) - i128::from(from)).clamp(0, i128::from(u64::MAX))
            as u64,
    )
}

fn build_record(r: &ArbRecord, now: UnixMillis) -> Option<Record> {
    Some(match r {
        ArbRecord::Absent => return None,
        ArbRecord::Vector(i) => {
            let all = &vectors().records;
            let (case_now, record) = &all[usize::from(*i) % all.len()];
            match record.clone() {
                Record::InFlight(mut f) => {
                    f.lease_until = shift(f.lease_until, *case_now, now);
                    f.expires_at = shift(f.expires_at, *case_now, now);
                    Record::InFlight(f)
                }
                Record::Completed(mut c) => {
                    c.expires_at = shift(c.expires_at, *case_now, now);
                    Record::Completed(c)
                }
                other => other,
            }
        }
        ArbRecord::InFlight {
            fp,
            owner,
            lease_until,
            expires_at,
        } => Record::InFlight(InFlight {
            fingerprint: fingerprint(*fp),
            owner: OwnerToken([*owner; 16]),
            lease_until: lease_until.at(now),
            expires_at: expires_at.at(now),
            payers: Payers::NONE,
        }),
        ArbRecord::Completed {
            fp,
            status,
            headers,
            body,
            expires_at,
        } => Record::Completed(Completed {
            fingerprint: fingerprint(*fp),
            response: StoredResponse {
                status: *status,
                headers: headers.iter().map(|(n, v)| (n.text(), v.clone())).collect(),
                body: body.clone().map_or(StoredBody::NotKept, StoredBody::Kept),
                seal: None,
            },
            expires_at: expires_at.at(now),
        }),
        ArbRecord::TokenUsed { expires_at } => Record::TokenUsed {
            expires_at: expires_at.at(now),
        },
    })
}

fn live(record: Option<&Record>, now: UnixMillis) -> Option<&Record> {
    record.filter(|r| !r.is_expired(now))
}

fn check_decide(
    record: Option<&Record>,
    fp: Fingerprint,
    owner: OwnerToken,
    now: UnixMillis,
    policy: &Policy,
) -> Decision {
    let decision = decide(record, fp, owner, now, policy);
    match (&decision, live(record, now)) {
        (Decision::Claim { claim, takeover }, found) => {
            assert!(
                claim.lease_until <= claim.expires_at,
                "lease outlives the record: {claim:?}"
            );
            assert_eq!(claim.expires_at, now.after(policy.ttl));
            assert_eq!(
                claim.lease_until,
                now.after(policy.lease).min(claim.expires_at)
            );
            assert_eq!((claim.owner, claim.fingerprint), (owner, fp));
            if now.0 < u64::MAX {
                assert!(
                    !Record::InFlight(claim.clone()).is_expired(now),
                    "claim born expired"
                );
            }
            match found {
                None => assert!(!takeover),
                Some(Record::InFlight(f)) => {
                    assert!(
                        *takeover && f.fingerprint == fp && now >= f.lease_until,
                        "took over {f:?} at {now:?}"
                    );
                }
                Some(other) => panic!("live {other:?} turned into a claim at {now:?}"),
            }
        }
        (Decision::Conflict { retry_after }, Some(Record::InFlight(f))) => {
            assert!(retry_after.as_millis() > 0, "Conflict with retry_after 0");
            assert_eq!(now.after(*retry_after), f.lease_until);
            assert_eq!(f.fingerprint, fp);
        }
        (Decision::Replay(response), Some(Record::Completed(done))) => {
            assert_eq!(done.fingerprint, fp);
            assert_eq!(response, &done.response);
        }
        (Decision::Mismatch, Some(Record::InFlight(f))) => assert_ne!(f.fingerprint, fp),
        (Decision::Mismatch, Some(Record::Completed(done))) => assert_ne!(done.fingerprint, fp),
        (Decision::Mismatch, Some(Record::TokenUsed { .. })) => {}
        (d, found) => panic!("decided {d:?} on {found:?} at {now:?}"),
    }
    // The HTTP form.
    let http = match &decision {
        Decision::Conflict { retry_after } => Some(answer(&EdgeAnswer::Conflict {
            retry_after: *retry_after,
        })),
        Decision::Mismatch => Some(answer(&EdgeAnswer::Mismatch)),
        Decision::Replay(r) => Some(answer(&EdgeAnswer::Replay {
            stored: r,
            replay_headers: &policy.replay_headers,
        })),
        Decision::Claim { .. } => None,
    };
    if let (Some(http), Decision::Conflict { .. }) = (&http, &decision) {
        assert_eq!(http.status, 409);
        let secs: u64 = http
            .header("retry-after")
            .expect("409 without Retry-After")
            .parse()
            .unwrap();
        assert!(secs >= 1);
    }
    decision
}

fn safe_header(name: &str, value: &str) -> bool {
    !name.is_empty()
        && name.len() <= 256
        && value.len() <= 8192
        && name.bytes().all(|b| b.is_ascii_graphic() && b != b':')
        && !value.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0))
}

fn check_complete(
    claim: &InFlight,
    facts: ResponseFacts,
    at: UnixMillis,
    policy: &Policy,
) -> Completion {
    let completion = complete(claim, facts.clone(), at, policy);
    match (facts, &completion) {
        (ResponseFacts::NeverReached, Completion::Release)
        | (ResponseFacts::InDoubt, Completion::KeepInFlight) => {}
        // Finding 1: a fix may refuse to store a status the record format cannot hold.
        (
            ResponseFacts::Upstream { status, .. },
            Completion::Release | Completion::KeepInFlight,
        ) if !(100..=999).contains(&status) => {}
        (ResponseFacts::Upstream { status, .. }, Completion::Release) => {
            assert!(!policy.store_rule.stores(status))
        }
        (
            ResponseFacts::Upstream {
                status,
                headers,
                body,
            },
            Completion::Store(done),
        ) => {
            assert!(policy.store_rule.stores(status));
            assert_eq!(done.fingerprint, claim.fingerprint);
            assert_eq!(done.response.status, status);
            assert!(done.expires_at >= claim.expires_at && done.expires_at >= at.after(policy.ttl));
            let expected: Vec<(String, String)> = headers
                .into_iter()
                .filter(|(n, v)| policy.replays_header(n) && safe_header(n, v))
                .map(|(n, v)| (n.to_ascii_lowercase(), v))
                .take(idemgate_core::record::MAX_STORED_HEADERS)
                .collect();
            assert_eq!(done.response.headers, expected);
            for (name, _) in &done.response.headers {
                assert!(
                    !NEVER_REPLAYED.contains(&name.as_str()) && !name.starts_with("x-envoy-"),
                    "stored {name}"
                );
            }
            match (body, &done.response.body) {
                (Some(b), StoredBody::Kept(kept)) => {
                    assert!(b.len() as u64 <= policy.max_response_body && &b == kept)
                }
                (Some(b), StoredBody::NotKept) => {
                    assert!(b.len() as u64 > policy.max_response_body)
                }
                (None, StoredBody::NotKept) => {}
                (None, StoredBody::Kept(_)) => panic!("kept a body that was not there"),
            }
            // What `complete` decides to store must survive the store.
            let mut bucket = Bucket::default();
            bucket.put(
                StorageKey::from_stored([1; 32]),
                Record::Completed(done.clone()),
            );
            assert_eq!(
                Bucket::decode(&bucket.encode()),
                Ok(bucket),
                "a stored answer does not decode"
            );
            if at.0 < u64::MAX {
                let replayed = check_decide(
                    Some(&Record::Completed(done.clone())),
                    claim.fingerprint,
                    OwnerToken([0xee; 16]),
                    at,
                    policy,
                );
                assert!(
                    matches!(replayed, Decision::Replay(_)),
                    "just stored, not replayed: {replayed:?}"
                );
            }
        }
        (facts, c) => panic!("completed {facts:?} as {c:?}"),
    }
    completion
}

// ----------------------------------------------------------------------------------------------
// The protocol over a memory store.

struct Pending<'p> {
    key: usize,
    fp: Fingerprint,
    owner: OwnerToken,
    now: UnixMillis,
    tx: Transaction<Claiming<'p>>,
    request: StoreRequest,
}

struct World<'p> {
    store: MemoryStore,
    policy: &'p Policy,
    now: UnixMillis,
    keys: Vec<StorageKey>,
    /// (key index, owner) for every claim that was granted.
    owners: Vec<(usize, OwnerToken)>,
    next_owner: u64,
    pending: Vec<Pending<'p>>,
}

fn storage_keys() -> &'static Vec<StorageKey> {
    static K: OnceLock<Vec<StorageKey>> = OnceLock::new();
    K.get_or_init(|| {
        (0..KEYS)
            .map(|i| {
                let key = IdempotencyKey::parse(format!("key-{i}").as_bytes()).unwrap();
                StorageKey::derive(
                    Scope {
                        source: "header:authorization",
                        value: b"Bearer t",
                    },
                    "POST",
                    "/orders",
                    &key,
                )
            })
            .collect()
    })
}

impl<'p> World<'p> {
    fn layout(&self) -> Layout {
        Layout {
            capacity: self.policy.capacity,
        }
    }

    fn cell(&self, key: usize) -> String {
        self.layout().cell_name(&self.keys[key])
    }

    /// The bucket of `key`'s cell and its version (0 when absent).
    fn bucket(&mut self, key: usize) -> (Bucket, u64) {
        let cell = self.cell(key);
        match self.store.read(&cell).unwrap() {
            None => (Bucket::default(), 0),
            Some(snap) => (
                Bucket::decode(&snap.bytes).expect("the protocol wrote an undecodable cell"),
                snap.version,
            ),
        }
    }

    fn record(&mut self, key: usize) -> (Option<Record>, u64) {
        let k = self.keys[key];
        let (bucket, version) = self.bucket(key);
        (bucket.get(&k).cloned(), version)
    }

    /// Live records of other keys in `key`'s cell at `now`.
    fn neighbours(&mut self, key: usize, now: UnixMillis) -> usize {
        let k = self.keys[key];
        let (bucket, _) = self.bucket(key);
        bucket
            .entries
            .iter()
            .filter(|(other, r)| *other != k && !r.is_expired(now))
            .count()
    }

    fn fresh_owner(&mut self) -> OwnerToken {
        self.next_owner += 1;
        let mut token = [0u8; 16];
        token[8..].copy_from_slice(&self.next_owner.to_be_bytes());
        OwnerToken(token)
    }

    /// Every cell decodes, holds each key once and at most `per_cell` records.
    fn check_cells(&mut self) {
        for i in 0..self.policy.capacity.cells {
            let Some(snap) = self.store.read(&format!("idemgate/c/{i}")).unwrap() else {
                continue;
            };
            let bucket =
                Bucket::decode(&snap.bytes).expect("the protocol wrote an undecodable cell");
            assert!(
                bucket.entries.len() <= usize::from(self.policy.capacity.per_cell),
                "cell over capacity"
            );
            for (n, (k, _)) in bucket.entries.iter().enumerate() {
                assert!(
                    bucket.entries[n + 1..].iter().all(|(other, _)| other != k),
                    "a key held twice"
                );
            }
        }
        // Record cells, and the ledger cells beside them (payers' usage, the fill shards' counts).
        let layout = self.layout();
        assert!(
            self.store.cell_count() <= (layout.capacity.cells + layout.ledger_cells()) as usize
        );
    }

    /// Checks a claim's outcome against the state it was decided on (`pre`, at decision time
    /// `at`) and the state after (`post`).
    #[allow(clippy::too_many_arguments)]
    fn check_claim(
        &mut self,
        key: usize,
        fp: Fingerprint,
        owner: OwnerToken,
        at: UnixMillis,
        pre: (Option<Record>, u64),
        neighbours: usize,
        outcome: Result<ClaimOutcome, ProtocolError>,
    ) {
        let post = self.record(key);
        let found = live(pre.0.as_ref(), at);
        match outcome {
            Ok(ClaimOutcome::Forward { owner: o, takeover }) => {
                assert_eq!(o, owner);
                match found {
                    None => assert!(!takeover),
                    Some(Record::InFlight(f)) => {
                        assert!(
                            takeover && f.fingerprint == fp && at >= f.lease_until,
                            "second owner while {f:?} holds the lease at {at:?}"
                        );
                    }
                    Some(r) => panic!("claim granted over live {r:?} at {at:?}"),
                }
                let expires_at = at.after(self.policy.ttl);
                let expected = Record::InFlight(InFlight {
                    fingerprint: fp,
                    owner,
                    lease_until: at.after(self.policy.lease).min(expires_at),
                    expires_at,
                    payers: Payers::NONE,
                });
                assert_eq!(
                    post.0.as_ref(),
                    Some(&expected),
                    "the new owner does not hold the key"
                );
                self.owners.push((key, owner));
            }
            Ok(refusal) => {
                assert_eq!(post, pre, "a refused claim wrote");
                match (refusal, found) {
                    (ClaimOutcome::Conflict { retry_after }, Some(Record::InFlight(f))) => {
                        assert!(
                            retry_after.as_millis() > 0
                                && f.fingerprint == fp
                                && at < f.lease_until
                        );
                    }
                    (ClaimOutcome::Replay(r), Some(Record::Completed(done))) => {
                        assert!(done.fingerprint == fp && r == done.response);
                    }
                    (
                        ClaimOutcome::Mismatch,
                        Some(
                            Record::InFlight(InFlight { fingerprint, .. })
                            | Record::Completed(Completed { fingerprint, .. }),
                        ),
                    ) => {
                        assert_ne!(*fingerprint, fp);
                    }
                    (ClaimOutcome::Mismatch, Some(Record::TokenUsed { .. })) => {}
                    (ClaimOutcome::StoreFull { retry_after }, None) => {
                        assert!(retry_after.as_millis() > 0);
                        assert!(
                            neighbours >= usize::from(self.policy.capacity.per_cell),
                            "store full with {neighbours} live records"
                        );
                    }
                    // The key's scope already holds its share of the cell.
                    (ClaimOutcome::QuotaExceeded { retry_after, .. }, None) => {
                        assert!(retry_after.as_millis() > 0);
                    }
                    (o, f) => panic!("claim outcome {o:?} on {f:?} at {at:?}"),
                }
            }
            Err(e) => panic!("claim failed: {e:?}"),
        }
    }

    fn apply(&mut self, op: &Op) {
        let policy = self.policy;
        match *op {
            Op::Claim { key, fp } => {
                let key = usize::from(key) % KEYS;
                let fp = fingerprint(fp);
                let owner = self.fresh_owner();
                let pre = self.record(key);
                let neighbours = self.neighbours(key, self.now);
                let now = self.now;
                let outcome = Protocol {
                    store: &mut self.store,
                    policy,
                }
                .claim(self.keys[key], fp, owner, Payers::NONE, now);
                self.check_claim(key, fp, owner, now, pre, neighbours, outcome);
            }
            Op::StartClaim { key, fp } => {
                if self.pending.len() >= MAX_PENDING {
                    return;
                }
                let key = usize::from(key) % KEYS;
                let fp = fingerprint(fp);
                let owner = self.fresh_owner();
                let claim = Claiming {
                    key: self.keys[key],
                    fingerprint: fp,
                    owner,
                    payers: Payers::NONE,
                    policy,
                };
                let (tx, request) = Transaction::start(self.cell(key), claim, self.now);
                self.pending.push(Pending {
                    key,
                    fp,
                    owner,
                    now: self.now,
                    tx,
                    request,
                });
            }
            Op::Step { tx } => {
                if self.pending.is_empty() {
                    return;
                }
                let i = usize::from(tx) % self.pending.len();
                let (key, at) = (self.pending[i].key, self.pending[i].now);
                let pre = self.record(key);
                let neighbours = self.neighbours(key, at);
                let reply = match &self.pending[i].request {
                    StoreRequest::Read { cell } => StoreReply::Read(self.store.read(cell).unwrap()),
                    StoreRequest::Write {
                        cell,
                        bytes,
                        expect,
                    } => StoreReply::Write(self.store.write(cell, bytes, *expect).unwrap()),
                };
                let wrote = matches!(reply, StoreReply::Write(WriteOutcome::Written));
                match self.pending[i].tx.resume(reply) {
                    TransactionStep::Need(next) => {
                        assert!(!wrote, "wrote and still wants more");
                        self.pending[i].request = next;
                    }
                    TransactionStep::Done(Err(ProtocolError::Contention)) => {
                        self.pending.remove(i);
                    }
                    TransactionStep::Done(outcome) => {
                        let p = self.pending.remove(i);
                        self.check_claim(p.key, p.fp, p.owner, p.now, pre, neighbours, outcome);
                    }
                }
            }
            Op::Finish {
                key,
                owner,
                ref facts,
            } => {
                let key = usize::from(key) % KEYS;
                let owner = match self.owners.len() {
                    0 => self.fresh_owner(),
                    _ if owner == u8::MAX => self.fresh_owner(),
                    n => self.owners[usize::from(owner) % n].1,
                };
                let facts = facts.as_ref().map(Facts::resolve);
                let pre = self.record(key);
                let now = self.now;
                let outcome = Protocol {
                    store: &mut self.store,
                    policy,
                }
                .finish(self.keys[key], owner, facts.clone(), now);
                let post = self.record(key);
                let outcome = outcome.unwrap_or_else(|e| panic!("finish failed: {e:?}"));
                match live(pre.0.as_ref(), now) {
                    Some(Record::InFlight(claim)) if claim.owner == owner => {
                        let completion = complete(
                            claim,
                            facts.unwrap_or(ResponseFacts::NeverReached),
                            now,
                            policy,
                        );
                        match (completion, outcome) {
                            (Completion::Store(done), FinishOutcome::Stored) => {
                                assert_eq!(post.0, Some(Record::Completed(done)));
                            }
                            (Completion::Release, FinishOutcome::Released) => {
                                assert_eq!(post.0, None)
                            }
                            (Completion::KeepInFlight, FinishOutcome::KeptInFlight) => {
                                assert_eq!(post, pre)
                            }
                            (c, o) => panic!("owner's finish: {o:?}, complete says {c:?}"),
                        }
                    }
                    _ => {
                        assert_eq!(outcome, FinishOutcome::NotOwner, "finish by a non-owner");
                        assert_eq!(post, pre, "a non-owner's finish wrote");
                    }
                }
            }
            Op::Consume { key, ttl } => {
                let key = usize::from(key) % KEYS;
                let now = self.now;
                let expires_at = now.after(Span(u64::from(ttl) + 1));
                let pre = self.record(key);
                let neighbours = self.neighbours(key, now);
                let outcome = Protocol {
                    store: &mut self.store,
                    policy,
                }
                .consume(self.keys[key], expires_at, Payers::NONE, now);
                let post = self.record(key);
                match (
                    outcome.unwrap_or_else(|e| panic!("consume failed: {e:?}")),
                    live(pre.0.as_ref(), now),
                ) {
                    (ConsumeOutcome::AlreadyUsed, Some(_)) => assert_eq!(post, pre),
                    (ConsumeOutcome::StoreFull { retry_after }, None) => {
                        assert_eq!(post, pre);
                        assert!(retry_after.as_millis() > 0);
                        assert!(neighbours >= usize::from(policy.capacity.per_cell));
                    }
                    (ConsumeOutcome::QuotaExceeded { .. }, None) => assert_eq!(post, pre),
                    (ConsumeOutcome::Consumed, None) => {
                        // Remembered past the token's expiry by the skew verifiers tolerate.
                        let held = expires_at.after(CLOCK_SKEW).max(now.after(Span(1)));
                        assert_eq!(post.0, Some(Record::TokenUsed { expires_at: held }))
                    }
                    (o, found) => panic!("consume {o:?} on {found:?}"),
                }
            }
            Op::Advance(ms) => self.now = self.now.after(Span(u64::from(ms))),
            Op::AdvancePastLease => self.now = self.now.after(policy.lease),
        }
        self.check_cells();
    }
}

fuzz_target!(|input: FuzzInput| {
    let policy = input.knobs.policy();
    let pure = &input.pure;

    // decide / complete on an arbitrary record.
    let now = match pure.now {
        Now::Near(d) => UnixMillis(BASE_NOW + u64::from(d)),
        Now::Any(t) => UnixMillis(t),
    };
    let record = build_record(&pure.record, now);
    let fp = fingerprint(pure.fp);
    let owner = OwnerToken([pure.owner; 16]);
    let decision = check_decide(record.as_ref(), fp, owner, now, &policy);
    let claim = match (&decision, &record) {
        (Decision::Claim { claim, .. }, _) => Some(claim.clone()),
        (_, Some(Record::InFlight(f))) => Some(f.clone()),
        _ => None,
    };
    if let Some(claim) = claim {
        let at = now.after(Span(u64::from(pure.complete_after)));
        check_complete(&claim, pure.facts.resolve(), at, &policy);
    }

    // The protocol.
    let mut world = World {
        store: MemoryStore::new(),
        policy: &policy,
        now: UnixMillis(BASE_NOW),
        keys: storage_keys().clone(),
        owners: Vec::new(),
        next_owner: 0,
        pending: Vec::new(),
    };
    for op in input.ops.iter().take(MAX_OPS) {
        world.apply(op);
    }
});
