//! The remote store protocol: the wire codec round-trips and refuses garbage with typed errors,
//! the read → decide → compare-and-set exchange admits exactly one claim whatever the
//! interleaving, and over a model of the engine (one value per key, expiry on the engine's clock)
//! it gives the same outcomes as the local protocol for any sequence of operations.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use idemgate_core::client::payer::{
    Billed, PayerTag, Payers, Share, ShareReason, ShareRefusal, PEER_GROUP_SOURCE,
};
use idemgate_core::client::scope::Scope;
use idemgate_core::client::scope::StorageKey;
use idemgate_core::decision::ResponseFacts;
use idemgate_core::policy::Policy;
use idemgate_core::record::seal::{RecordSecrets, SealError};
use idemgate_core::record::{OwnerToken, Record, StoredBody, StoredResponse};
use idemgate_core::request::fingerprint::Fingerprint;
use idemgate_core::store::protocol::{
    ClaimOutcome, ConsumeOutcome, FinishOutcome, Protocol, ProtocolError,
};
use idemgate_core::store::remote::client::{self, CalloutReply};
use idemgate_core::store::remote::End;
use idemgate_core::store::remote::Resume;
use idemgate_core::store::remote::{
    Failure, LedgerJob, LedgerOutcome, Need, Operation, OperationStep, Request, Response,
    Settlement, SettlementStep, StoredValue, ValueVersion, WireError, Write, CLOCK_TOLERANCE,
};
use idemgate_core::store::share::{Fill, FillShard};
use idemgate_core::store::{MemoryStore, WriteOutcome};
use idemgate_core::time::{Span, UnixMillis};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// A model of the engine: one value per key, expiring on the engine's clock, compare-and-set on
/// the value's version prefix — what the service's Lua scripts do in Redis.
///
/// With `speculate` on, it also models the service's side of one-round-trip operations: the host
/// clock (the engine's plus `host_skew` ms), the values the host wrote for the claims it
/// forwarded, and a compare-and-set that answers a refusal with the engine's clock and value.
#[derive(Default)]
struct ModelEngine {
    keys: BTreeMap<[u8; 32], (Vec<u8>, UnixMillis)>,
    writes: u64,
    speculate: bool,
    host_skew: i64,
    claimed: BTreeMap<[u8; 32], Vec<u8>>,
    /// Protocol calls made (each is one round trip to Redis).
    calls: u64,
}

impl ModelEngine {
    fn get(&mut self, key: &StorageKey, now: UnixMillis) -> Option<Vec<u8>> {
        match self.keys.get(key.as_bytes()) {
            Some((_, at)) if *at <= now => {
                self.keys.remove(key.as_bytes());
                None
            }
            Some((value, _)) => Some(value.clone()),
            None => None,
        }
    }

    fn cas(
        &mut self,
        key: &StorageKey,
        now: UnixMillis,
        expect: Option<ValueVersion>,
        write: &Write,
    ) -> WriteOutcome {
        let current = self.get(key, now);
        let holds = match (expect, &current) {
            (None, None) => true,
            (Some(v), Some(bytes)) => bytes.starts_with(&v.0),
            _ => false,
        };
        if !holds {
            return WriteOutcome::Conflict;
        }
        match write {
            Write::Set { value, expires_at } => {
                self.keys
                    .insert(*key.as_bytes(), (value.clone(), *expires_at));
            }
            Write::Delete => {
                self.keys.remove(key.as_bytes());
            }
        }
        WriteOutcome::Written
    }

    fn fresh(&mut self) -> ValueVersion {
        self.writes += 1;
        let mut v = [0u8; 16];
        v[..8].copy_from_slice(&self.writes.to_be_bytes());
        ValueVersion(v)
    }

    fn speculative(host_skew: i64) -> ModelEngine {
        ModelEngine {
            speculate: true,
            host_skew,
            ..ModelEngine::default()
        }
    }

    /// The Redis compare-and-set script: a speculative write (`at`) is refused off the engine's
    /// clock; a refusal answers with the engine's clock and the key's value.
    fn cas_found(
        &mut self,
        key: &StorageKey,
        now: UnixMillis,
        expect: Option<ValueVersion>,
        write: &Write,
        at: Option<UnixMillis>,
    ) -> Result<(), (UnixMillis, Option<Vec<u8>>)> {
        let off_clock = at.is_some_and(|at| at.0.abs_diff(now.0) > CLOCK_TOLERANCE.0);
        if off_clock || self.cas(key, now, expect, write) == WriteOutcome::Conflict {
            return Err((now, self.get(key, now)));
        }
        Ok(())
    }

    /// A payer's ledger job settled alone (a service settles the jobs waiting on one key
    /// together; sequential operations never wait on each other). Speculates on an absent key,
    /// as the service does when it knows nothing of the key.
    fn settle(&mut self, job: LedgerJob, now: UnixMillis) -> LedgerOutcome {
        let mut settlement = Settlement::new(job);
        let mut need = if self.speculate {
            let fresh = self.fresh();
            settlement.speculate(self.host_clock(now), None, fresh)
        } else {
            settlement.start()
        };
        loop {
            self.calls += 1;
            let step = match need {
                Need::Read { key } => {
                    let value = self.get(&key, now);
                    let fresh = self.fresh();
                    settlement.read(now, value.as_deref(), fresh)
                }
                Need::Write {
                    key,
                    expect,
                    write,
                    at,
                } => match self.cas_found(&key, now, expect, &write, at) {
                    Ok(()) => settlement.written(WriteOutcome::Written),
                    Err((now, value)) => {
                        let fresh = self.fresh();
                        settlement.conflicted(now, value.as_deref(), fresh)
                    }
                },
                Need::Ledger(_) => panic!("a settlement asks for no ledger"),
            };
            match step {
                SettlementStep::Need(next) => need = next,
                SettlementStep::Done(answers) => {
                    assert_eq!(answers.len(), 1);
                    return answers[0];
                }
            }
        }
    }

    fn host_clock(&self, now: UnixMillis) -> UnixMillis {
        UnixMillis(now.0.saturating_add_signed(self.host_skew))
    }

    /// Runs one operation to its end, uninterrupted; `now` is the engine's clock.
    fn run(&mut self, request: Request, now: UnixMillis) -> Response {
        let key = *request.key();
        let is_claim = matches!(request, Request::Claim { .. });
        let is_finish = matches!(request, Request::Finish { .. });
        let (mut exchange, mut need) = if self.speculate {
            let fresh = self.fresh();
            let claimed = self.claimed.get(key.as_bytes()).cloned();
            Operation::speculate(request, self.host_clock(now), claimed.as_deref(), fresh)
        } else {
            Operation::start(request)
        };
        let mut written = None;
        loop {
            // A ledger job is settled with calls of its own (counted there).
            if !matches!(need, Need::Ledger(_)) {
                self.calls += 1;
            }
            let step = match need {
                Need::Ledger(job) => {
                    let settled = self.settle(job, now);
                    exchange.settled(settled)
                }
                Need::Read { key: on } => {
                    let value = self.get(&on, now);
                    let fresh = self.fresh();
                    exchange.read(now, value.as_deref(), fresh)
                }
                Need::Write {
                    key: on,
                    expect,
                    write,
                    at,
                } if self.speculate => match self.cas_found(&on, now, expect, &write, at) {
                    Ok(()) => {
                        if on == key {
                            written = Some(write);
                        }
                        exchange.written(WriteOutcome::Written)
                    }
                    Err((now, value)) => {
                        let fresh = self.fresh();
                        exchange.conflicted(now, value.as_deref(), fresh)
                    }
                },
                Need::Write {
                    key: on,
                    expect,
                    write,
                    ..
                } => {
                    let outcome = self.cas(&on, now, expect, &write);
                    exchange.written(outcome)
                }
            };
            match step {
                OperationStep::Need(next) => need = next,
                OperationStep::Done(response) => {
                    // What the service remembers: the claims it forwarded, until their finish.
                    if is_finish {
                        self.claimed.remove(key.as_bytes());
                    }
                    if let (true, Some(Write::Set { value, .. })) = (is_claim, written) {
                        if matches!(response, Response::Claim(ClaimOutcome::Forward { .. })) {
                            self.claimed.insert(*key.as_bytes(), value);
                        }
                    }
                    return response;
                }
            }
        }
    }
}

fn skey(n: u8) -> StorageKey {
    StorageKey::from_stored([n; 32])
}

fn response(body: &[u8]) -> StoredResponse {
    StoredResponse {
        status: 201,
        headers: vec![("content-type".into(), "application/json".into())],
        body: StoredBody::Kept(body.to_vec()),
        seal: None,
    }
}

fn claim(key: u8, fp: u8, owner: u8) -> Request {
    Request::Claim {
        key: skey(key),
        fingerprint: Fingerprint([fp; 32]),
        owner: OwnerToken([owner; 16]),
        lease: Span::from_secs(60),
        ttl: Span::from_secs(86_400),
        payers: vec![],
        fill: None,
    }
}

fn samples() -> Vec<Request> {
    vec![
        claim(1, 2, 3),
        Request::Finish {
            key: skey(1),
            owner: OwnerToken([3; 16]),
            ttl: Span(5),
            end: End::Release,
            shard: None,
        },
        Request::Finish {
            key: skey(1),
            owner: OwnerToken([3; 16]),
            ttl: Span::from_secs(86_400),
            end: End::Store(response(b"{\"id\":1}")),
            shard: None,
        },
        Request::Finish {
            key: skey(1),
            owner: OwnerToken([3; 16]),
            ttl: Span(1),
            end: End::Store(StoredResponse {
                status: 500,
                headers: vec![],
                body: StoredBody::NotKept,
                seal: None,
            }),
            shard: None,
        },
        Request::Consume {
            key: skey(9),
            expires_at: UnixMillis(1_700_000_000_000),
            payers: vec![],
            fill: None,
        },
    ]
}

fn sample_responses() -> Vec<Response> {
    vec![
        Response::Claim(ClaimOutcome::Forward {
            owner: OwnerToken([7; 16]),
            takeover: true,
        }),
        Response::Claim(ClaimOutcome::Conflict {
            retry_after: Span(1234),
        }),
        Response::Claim(ClaimOutcome::Replay(response(b"hello"))),
        Response::Claim(ClaimOutcome::Mismatch),
        Response::Claim(ClaimOutcome::StoreFull {
            retry_after: Span(60_000),
        }),
        Response::Finish(FinishOutcome::Stored),
        Response::Finish(FinishOutcome::Released),
        Response::Finish(FinishOutcome::KeptInFlight),
        Response::Finish(FinishOutcome::NotOwner),
        Response::Consume(ConsumeOutcome::Consumed),
        Response::Consume(ConsumeOutcome::AlreadyUsed),
        Response::Consume(ConsumeOutcome::StoreFull {
            retry_after: Span(5000),
        }),
        Response::Claim(ClaimOutcome::QuotaExceeded {
            retry_after: Span(7),
            share: None,
        }),
        Response::Consume(ConsumeOutcome::QuotaExceeded {
            retry_after: Span(8),
            share: None,
        }),
        Response::Claim(ClaimOutcome::QuotaExceeded {
            retry_after: Span(9),
            share: Some(ShareRefusal {
                reason: ShareReason::Address,
                payer: PayerTag([1, 2, 3, 4, 5, 6, 7, 1]),
            }),
        }),
        Response::Claim(ClaimOutcome::QuotaExceeded {
            retry_after: Span(10),
            share: Some(ShareRefusal {
                reason: ShareReason::Route,
                payer: PayerTag([9, 2, 3, 4, 5, 6, 7, 3]),
            }),
        }),
        Response::Consume(ConsumeOutcome::QuotaExceeded {
            retry_after: Span(11),
            share: Some(ShareRefusal {
                reason: ShareReason::Identity,
                payer: PayerTag([8; 8]),
            }),
        }),
        Response::Consume(ConsumeOutcome::QuotaExceeded {
            retry_after: Span(12),
            share: Some(ShareRefusal {
                reason: ShareReason::Bytes,
                payer: PayerTag([7; 8]),
            }),
        }),
        Response::Failed(Failure::Timeout),
        Response::Failed(Failure::Corrupt),
    ]
}

#[test]
fn messages_round_trip() {
    for request in samples() {
        assert_eq!(Request::decode(&request.encode()), Ok(request));
    }
    for response in sample_responses() {
        assert_eq!(Response::decode(&response.encode()), Ok(response));
    }
}

#[test]
fn a_claim_request_is_compact() {
    // magic 2 + version 1 + op 1 + key 32 + fingerprint 32 + owner 16 + lease 8 + ttl 8
    assert_eq!(claim(1, 2, 3).encode().len(), 100);
}

#[test]
fn garbage_gets_typed_errors() {
    let good = claim(1, 2, 3).encode();
    assert_eq!(Request::decode(b""), Err(WireError::Truncated));
    assert_eq!(Request::decode(b"GET / HTTP/1.1"), Err(WireError::BadMagic));
    // Version 1 (before sealed answers), 2 (before shares in bytes), 3 (before sealed resource
    // states), 4 (before fill shards), 5 (before refusals named their share) and a future
    // version are refused alike.
    for version in [1, 2, 3, 4, 5, 7] {
        let mut other = good.clone();
        other[2] = version;
        assert_eq!(
            Request::decode(&other),
            Err(WireError::UnsupportedVersion(version))
        );
    }
    let mut op = good.clone();
    op[3] = 99;
    assert_eq!(Request::decode(&op), Err(WireError::UnknownOp(99)));
    assert_eq!(
        Request::decode(&good[..good.len() - 1]),
        Err(WireError::Truncated)
    );
    // After a claim come its payers (a count of 0 only before a fill shard); after a finish,
    // its shard.
    let mut long = good.clone();
    long.push(0);
    assert_eq!(Request::decode(&long), Err(WireError::OutOfRange));
    let mut long = finish_store(1, 3, b"x").encode();
    long.push(0);
    assert_eq!(Request::decode(&long), Err(WireError::Truncated));
    let billed = |tags: &[u8], fill: Option<Fill>| {
        let payers: Vec<Billed> = tags
            .iter()
            .map(|&t| Billed {
                tag: PayerTag([t; 8]),
                share: Share {
                    records: 5,
                    bytes: 1 << 20,
                },
            })
            .collect();
        match claim(1, 2, 3) {
            Request::Claim {
                key,
                fingerprint,
                owner,
                lease,
                ttl,
                ..
            } => Request::Claim {
                key,
                fingerprint,
                owner,
                lease,
                ttl,
                payers,
                fill,
            },
            other => other,
        }
    };
    let two = billed(&[1, 2], None);
    assert_eq!(Request::decode(&two.encode()), Ok(two));
    let twice = billed(&[1, 1], None).encode();
    assert_eq!(Request::decode(&twice), Err(WireError::OutOfRange));
    let three = billed(&[1, 2, 3], None).encode();
    assert_eq!(Request::decode(&three), Err(WireError::OutOfRange));
    let fill = |capacity, pressure| Fill {
        shard: FillShard {
            tag: PayerTag([7; 8]),
            capacity,
        },
        pressure,
    };
    for payers in [&[][..], &[1], &[1, 2]] {
        let counted = billed(payers, Some(fill(1_024, 20)));
        assert_eq!(Request::decode(&counted.encode()), Ok(counted));
    }
    let overpressed = billed(&[1], Some(fill(1_024, 101))).encode();
    assert_eq!(Request::decode(&overpressed), Err(WireError::OutOfRange));
    let empty_shard = billed(&[], Some(fill(0, 20))).encode();
    assert_eq!(Request::decode(&empty_shard), Err(WireError::OutOfRange));
    let mut finish = finish_store(1, 3, b"x");
    if let Request::Finish { shard, .. } = &mut finish {
        *shard = Some(fill(1_024, 0).shard);
    }
    assert_eq!(Request::decode(&finish.encode()), Ok(finish));
    let mut zero_ttl = good.clone();
    let n = zero_ttl.len();
    zero_ttl[n - 8..].fill(0);
    assert_eq!(Request::decode(&zero_ttl), Err(WireError::ZeroTtl));
    let mut huge_ttl = good.clone();
    huge_ttl[n - 8..].fill(0xff);
    assert_eq!(Request::decode(&huge_ttl), Err(WireError::OutOfRange));
    let far = Request::Consume {
        key: skey(1),
        expires_at: UnixMillis(u64::MAX / 2),
        payers: vec![],
        fill: None,
    };
    assert_eq!(Request::decode(&far.encode()), Err(WireError::OutOfRange));
    // A response is not a request, and the other way round.
    assert_eq!(
        Request::decode(&Response::Failed(Failure::Timeout).encode()),
        Err(WireError::BadMagic)
    );
    assert_eq!(Response::decode(&good), Err(WireError::BadMagic));
}

#[test]
fn a_replay_cannot_smuggle_a_header() {
    let bad = Response::Claim(ClaimOutcome::Replay(StoredResponse {
        status: 200,
        headers: vec![("set-cookie".into(), "session=stolen".into())],
        body: StoredBody::NotKept,
        seal: None,
    }));
    assert_eq!(
        Response::decode(&bad.encode()),
        Err(WireError::InvalidHeader)
    );
    let split = Response::Claim(ClaimOutcome::Replay(StoredResponse {
        status: 200,
        headers: vec![("location".into(), "/a\r\nx-evil: 1".into())],
        body: StoredBody::NotKept,
        seal: None,
    }));
    assert_eq!(
        Response::decode(&split.encode()),
        Err(WireError::InvalidHeader)
    );
    let status = Response::Claim(ClaimOutcome::Replay(StoredResponse {
        status: 42,
        headers: vec![],
        body: StoredBody::NotKept,
        seal: None,
    }));
    assert_eq!(
        Response::decode(&status.encode()),
        Err(WireError::InvalidStatus(42))
    );
}

#[test]
fn a_failure_is_an_error_for_the_failure_mode() {
    let err = Response::Failed(Failure::Timeout).into_claim().unwrap_err();
    assert_eq!(err.code(), "store_unavailable");
    assert!(err.to_string().contains("remote_timeout"));
    let confused = Response::Finish(FinishOutcome::Stored).into_claim();
    assert_eq!(confused.unwrap_err().code(), "store_unexpected_reply");
}

#[test]
fn a_stored_value_belongs_to_its_key() {
    let value = StoredValue {
        version: ValueVersion([5; 16]),
        record: Record::TokenUsed {
            expires_at: UnixMillis(10),
        },
    };
    let bytes = value.encode(&skey(1));
    assert_eq!(StoredValue::decode(&skey(1), &bytes), Ok(value));
    assert_eq!(
        StoredValue::decode(&skey(2), &bytes),
        Err(WireError::KeyMismatch)
    );
    assert_eq!(
        StoredValue::decode(&skey(1), &bytes[..10]),
        Err(WireError::Truncated)
    );
}

#[test]
fn an_unreadable_value_is_never_overwritten() {
    let mut engine = ModelEngine::default();
    let now = UnixMillis(1000);
    engine.keys.insert(
        *skey(1).as_bytes(),
        (b"not a record at all".to_vec(), UnixMillis(5000)),
    );
    assert_eq!(
        engine.run(claim(1, 1, 1), now),
        Response::Failed(Failure::Corrupt)
    );
    assert_eq!(engine.keys[skey(1).as_bytes()].0, b"not a record at all");
}

/// Every interleaving of N claims' reads and writes: exactly one Forward; the others see the
/// winner's claim (409) after re-reading — whether they start with a read or speculate.
#[test]
fn concurrent_claims_admit_one() {
    for speculate in [false, true] {
        for n in 2..6u8 {
            concurrent_claims(n, speculate);
        }
    }
}

fn concurrent_claims(n: u8, speculate: bool) {
    let mut engine = ModelEngine::speculative(0);
    let now = UnixMillis(1_000_000);
    let mut exchanges: Vec<(Operation, Need)> = (0..n)
        .map(|i| {
            if speculate {
                Operation::speculate(claim(1, 7, i), now, None, engine.fresh())
            } else {
                Operation::start(claim(1, 7, i))
            }
        })
        .collect();
    let mut results = vec![None; usize::from(n)];
    // Round-robin: every exchange makes one engine call per round, so all reads happen before
    // any write in the first round — the worst case for a check-then-set.
    while results.iter().any(Option::is_none) {
        for (i, (exchange, need)) in exchanges.iter_mut().enumerate() {
            if results[i].is_some() {
                continue;
            }
            let step = match need.clone() {
                Need::Read { .. } => {
                    let value = engine.get(&skey(1), now);
                    let fresh = engine.fresh();
                    exchange.read(now, value.as_deref(), fresh)
                }
                Need::Write {
                    expect, write, at, ..
                } => match engine.cas_found(&skey(1), now, expect, &write, at) {
                    Ok(()) => exchange.written(WriteOutcome::Written),
                    Err((now, value)) => {
                        let fresh = engine.fresh();
                        exchange.conflicted(now, value.as_deref(), fresh)
                    }
                },
                Need::Ledger(_) => panic!("no payers, no ledger"),
            };
            match step {
                OperationStep::Need(next) => *need = next,
                OperationStep::Done(response) => results[i] = Some(response),
            }
        }
    }
    let forwards = results
        .iter()
        .filter(|r| matches!(r, Some(Response::Claim(ClaimOutcome::Forward { .. }))))
        .count();
    let conflicts = results
        .iter()
        .filter(|r| matches!(r, Some(Response::Claim(ClaimOutcome::Conflict { .. }))))
        .count();
    assert_eq!(
        (forwards, conflicts),
        (1, usize::from(n) - 1),
        "{speculate}"
    );
}

fn finish_store(key: u8, owner: u8, body: &[u8]) -> Request {
    Request::Finish {
        key: skey(key),
        owner: OwnerToken([owner; 16]),
        ttl: Span::from_secs(86_400),
        end: End::Store(response(body)),
        shard: None,
    }
}

/// The common cases take one engine call each: a fresh claim and a token's first use assume
/// the key absent, the owner's finish assumes the claim the service wrote; the compare-and-set
/// proves each assumption.
#[test]
fn a_fresh_claim_the_owners_finish_and_a_token_use_take_one_engine_call() {
    let mut engine = ModelEngine::speculative(0);
    let now = UnixMillis(1_000_000);
    let forward = engine.run(claim(1, 7, 3), now);
    assert!(matches!(
        forward,
        Response::Claim(ClaimOutcome::Forward {
            takeover: false,
            ..
        })
    ));
    assert_eq!(engine.calls, 1);
    let stored = engine.run(finish_store(1, 3, b"ok"), now.after(Span(5)));
    assert_eq!(stored, Response::Finish(FinishOutcome::Stored));
    assert_eq!(engine.calls, 2);
    let consume = Request::Consume {
        key: skey(2),
        expires_at: UnixMillis(2_000_000),
        payers: vec![],
        fill: None,
    };
    assert_eq!(
        engine.run(consume, now),
        Response::Consume(ConsumeOutcome::Consumed)
    );
    assert_eq!(engine.calls, 3);
    // A retry is decided on what the refused speculation brought back: still one call, a replay.
    let replay = engine.run(claim(1, 7, 4), now.after(Span(10)));
    assert_eq!(
        replay,
        Response::Claim(ClaimOutcome::Replay(response(b"ok")))
    );
    assert_eq!(engine.calls, 4);
}

/// A speculation that meets another state is decided again on what the engine answered with,
/// and writes only what that decision writes.
#[test]
fn a_missed_speculation_is_decided_on_what_the_engine_holds() {
    let now = UnixMillis(1_000_000);
    // Another host's claim in flight: a second claim is told to wait, nothing is written.
    let mut engine = ModelEngine::speculative(0);
    engine.run(claim(1, 7, 1), now);
    let remembered = engine.claimed.clone();
    let before = engine.keys[skey(1).as_bytes()].clone();
    let conflict = engine.run(claim(1, 7, 2), now.after(Span(1_000)));
    assert_eq!(
        conflict,
        Response::Claim(ClaimOutcome::Conflict {
            retry_after: Span(59_000)
        })
    );
    assert_eq!(engine.keys[skey(1).as_bytes()], before);
    // Another payload under the key: a mismatch.
    let mismatch = engine.run(claim(1, 8, 2), now.after(Span(1_000)));
    assert_eq!(mismatch, Response::Claim(ClaimOutcome::Mismatch));
    // The lease ended: the retry takes the claim over, decided on the engine's value (two
    // calls: the refused speculation, then the compare-and-set on the version it returned).
    let calls = engine.calls;
    let takeover = engine.run(claim(1, 7, 2), now.after(Span(61_000)));
    assert_eq!(
        takeover,
        Response::Claim(ClaimOutcome::Forward {
            owner: OwnerToken([2; 16]),
            takeover: true
        })
    );
    assert_eq!(engine.calls - calls, 2);
    // The first owner's finish, speculating on the claim it remembers, finds the takeover: it
    // is not the owner any more and nothing is written.
    engine.claimed = remembered;
    let before = engine.keys[skey(1).as_bytes()].clone();
    let late = engine.run(finish_store(1, 1, b"late"), now.after(Span(62_000)));
    assert_eq!(late, Response::Finish(FinishOutcome::NotOwner));
    assert_eq!(engine.keys[skey(1).as_bytes()], before);
    // A token used before: already used, in one call.
    let consume = Request::Consume {
        key: skey(2),
        expires_at: UnixMillis(2_000_000),
        payers: vec![],
        fill: None,
    };
    engine.run(consume.clone(), now);
    let calls = engine.calls;
    assert_eq!(
        engine.run(consume, now),
        Response::Consume(ConsumeOutcome::AlreadyUsed)
    );
    assert_eq!(engine.calls - calls, 1);
}

/// A host whose clock is off the engine's by more than the tolerance never lands a speculative
/// write: the engine refuses it and the decision is made again on the engine's clock, so the
/// record's lease and expiry are the engine's.
#[test]
fn a_speculation_off_the_engines_clock_is_refused_and_decided_on_the_engines() {
    let now = UnixMillis(1_000_000);
    for skew in [-10_000i64, 10_000] {
        let mut engine = ModelEngine::speculative(skew);
        let forward = engine.run(claim(1, 7, 3), now);
        assert!(matches!(
            forward,
            Response::Claim(ClaimOutcome::Forward { .. })
        ));
        assert_eq!(
            engine.calls, 2,
            "refused, then written on the engine's clock"
        );
        let (value, expires_at) = engine.keys[skey(1).as_bytes()].clone();
        assert_eq!(expires_at, now.after(Span::from_secs(86_400)));
        match StoredValue::decode(&skey(1), &value).unwrap().record {
            Record::InFlight(claim) => {
                assert_eq!(claim.lease_until, now.after(Span::from_secs(60)))
            }
            other => panic!("{other:?}"),
        }
    }
    // Within the tolerance the speculation lands, at the host's time.
    let skew = i64::try_from(CLOCK_TOLERANCE.0).unwrap();
    let mut engine = ModelEngine::speculative(skew);
    engine.run(claim(1, 7, 3), now);
    assert_eq!(engine.calls, 1);
    let expires_at = engine.keys[skey(1).as_bytes()].1;
    assert_eq!(
        expires_at,
        now.after(CLOCK_TOLERANCE).after(Span::from_secs(86_400))
    );
}

/// A finish with nothing remembered (another service replica forwarded the claim), or whose
/// remembered claim is another owner's, reads first: it cannot assume what it never wrote.
#[test]
fn a_finish_without_its_claim_remembered_reads_first() {
    let now = UnixMillis(1_000_000);
    let (_, need) =
        Operation::speculate(finish_store(1, 3, b"x"), now, None, ValueVersion([1; 16]));
    assert_eq!(need, Need::Read { key: skey(1) });
    let mut engine = ModelEngine::speculative(0);
    engine.run(claim(1, 7, 3), now);
    let claimed = engine.claimed[skey(1).as_bytes()].clone();
    let (_, need) = Operation::speculate(
        finish_store(1, 4, b"x"),
        now,
        Some(&claimed),
        ValueVersion([1; 16]),
    );
    assert_eq!(need, Need::Read { key: skey(1) });
    let (_, need) = Operation::speculate(
        finish_store(1, 3, b"x"),
        now,
        Some(&claimed),
        ValueVersion([1; 16]),
    );
    assert!(matches!(need, Need::Write { at: Some(at), .. } if at == now));
}

#[test]
fn a_token_is_used_once_and_remembered_past_its_expiry_by_the_skew() {
    let mut engine = ModelEngine::default();
    let now = UnixMillis(1_000_000);
    let consume = Request::Consume {
        key: skey(3),
        expires_at: UnixMillis(1_010_000),
        payers: vec![],
        fill: None,
    };
    assert_eq!(
        engine.run(consume.clone(), now),
        Response::Consume(ConsumeOutcome::Consumed)
    );
    assert_eq!(
        engine.run(consume.clone(), now),
        Response::Consume(ConsumeOutcome::AlreadyUsed)
    );
    // An Envoy whose clock runs behind may still accept the token just after its expiry.
    assert_eq!(
        engine.run(consume.clone(), UnixMillis(1_010_000 + 30_000)),
        Response::Consume(ConsumeOutcome::AlreadyUsed)
    );
    let expiry = engine.keys[skey(3).as_bytes()].1;
    assert_eq!(expiry, UnixMillis(1_010_000 + 60_000));
}

/// What the filter does at the end of a forwarded request with a remote store: the policy half
/// locally ([`client::finish`]), the record half through the service; a kept-in-flight outcome
/// sends nothing.
fn remote_finish(
    engine: &mut ModelEngine,
    policy: &Policy,
    key: StorageKey,
    owner: OwnerToken,
    facts: ResponseFacts,
    now: UnixMillis,
) -> FinishOutcome {
    match client::finish(key, owner, facts, policy, &secrets()) {
        None => FinishOutcome::KeptInFlight,
        Some(request) => {
            let response = engine.run(request, now);
            let body = response.encode();
            let status = if matches!(response, Response::Failed(_)) {
                503
            } else {
                200
            };
            client::finish_outcome(CalloutReply {
                status: Some(status),
                body: &body,
            })
            .unwrap()
        }
    }
}

/// The secrets the filters of these tests seal with.
fn secrets() -> RecordSecrets {
    RecordSecrets::new(&[b"remote-tests-record-secret-0123456789"]).unwrap()
}

/// A claim through the service model, its answer read as the filter reads it (seal checked).
fn remote_claim(
    engine: &mut ModelEngine,
    request: Request,
    now: UnixMillis,
) -> Result<ClaimOutcome, ProtocolError> {
    let key = *request.key();
    let body = engine.run(request, now).encode();
    client::claim_outcome(
        CalloutReply {
            status: Some(200),
            body: &body,
        },
        &key,
        &secrets(),
    )
}

/// A replay without its (checked) seal: what the local store replays.
fn unsealed(outcome: ClaimOutcome) -> ClaimOutcome {
    match outcome {
        ClaimOutcome::Replay(mut stored) => {
            assert!(
                stored.seal.take().is_some(),
                "a remote replay carries a seal"
            );
            ClaimOutcome::Replay(stored)
        }
        other => other,
    }
}

#[test]
fn a_stored_answer_is_sealed_and_replays_only_while_its_seal_holds() {
    let policy = Policy::defaults();
    let mut engine = ModelEngine::default();
    let now = UnixMillis(1_000_000);
    let key = skey(4);
    let claim = |owner: u8| {
        client::claim(
            key,
            Fingerprint([1; 32]),
            OwnerToken([owner; 16]),
            Payers::NONE,
            &policy,
        )
    };
    assert!(matches!(
        remote_claim(&mut engine, claim(1), now),
        Ok(ClaimOutcome::Forward { .. })
    ));
    let facts = ResponseFacts::Upstream {
        status: 201,
        headers: vec![("content-type".into(), "application/json".into())],
        body: Some(b"{\"id\":1}".to_vec()),
    };
    let finished = remote_finish(&mut engine, &policy, key, OwnerToken([1; 16]), facts, now);
    assert_eq!(finished, FinishOutcome::Stored);
    let Ok(ClaimOutcome::Replay(stored)) = remote_claim(&mut engine, claim(2), now) else {
        panic!("the sealed answer replays")
    };
    assert_eq!(secrets().check(&key, &stored), Ok(()));

    // Whoever can write the engine rewrites the value: a planted header, another body, another
    // status, no seal at all. Each keeps the value's framing (version, key, record), so the
    // service reads it and sends it on; the filter's check refuses it.
    let value = engine.keys[key.as_bytes()].0.clone();
    let original = StoredValue::decode(&key, &value).unwrap();
    let Record::Completed(done) = &original.record else {
        panic!("a completed record")
    };
    let forged: [fn(&mut StoredResponse); 5] = [
        |r| {
            r.headers
                .push(("access-control-allow-origin".into(), "*".into()))
        },
        |r| r.body = StoredBody::Kept(b"{\"id\":2}".to_vec()),
        |r| r.status = 200,
        |r| r.seal = None,
        |r| {
            // Sealed, but with another secret.
            let other = RecordSecrets::new(&[b"not-the-fleet-secret-0123456789abcd"]).unwrap();
            *r = other.seal(&skey(4), r.clone());
        },
    ];
    for forge in &forged {
        let mut response = done.response.clone();
        forge(&mut response);
        let mut record = done.clone();
        record.response = response;
        let planted = StoredValue {
            version: original.version,
            record: Record::Completed(record),
        };
        let expiry = engine.keys[key.as_bytes()].1;
        engine
            .keys
            .insert(*key.as_bytes(), (planted.encode(&key), expiry));
        let refused = remote_claim(&mut engine, claim(3), now).unwrap_err();
        assert!(matches!(refused, ProtocolError::Tampered(_)), "{refused:?}");
        assert!(!refused.allows_failure_mode());
        assert_eq!(refused.code(), "record_corrupt");
    }

    // The genuine answer of one key, copied under another key (re-framed for that key): its
    // seal names the first key.
    let other = skey(5);
    let moved = StoredValue {
        version: original.version,
        record: original.record.clone(),
    };
    engine.keys.insert(
        *other.as_bytes(),
        (moved.encode(&other), UnixMillis(u64::MAX)),
    );
    let claim_other = client::claim(
        other,
        Fingerprint([1; 32]),
        OwnerToken([4; 16]),
        Payers::NONE,
        &policy,
    );
    assert_eq!(
        remote_claim(&mut engine, claim_other, now),
        Err(ProtocolError::Tampered(SealError::Mismatch))
    );
}

#[test]
fn callout_answers_are_decoded_or_refused() {
    let ok = Response::Claim(ClaimOutcome::Mismatch).encode();
    let failed = Response::Failed(Failure::Timeout).encode();
    let answer =
        |status, body| client::claim_outcome(CalloutReply { status, body }, &skey(1), &secrets());
    assert_eq!(answer(Some(200), &ok), Ok(ClaimOutcome::Mismatch));
    // No answer, a proxy's error page, a truncated body: store errors for the failure mode.
    assert_eq!(answer(None, &ok).unwrap_err().code(), "store_unavailable");
    assert_eq!(
        answer(Some(503), b"upstream connect error")
            .unwrap_err()
            .code(),
        "store_unavailable"
    );
    assert_eq!(
        answer(Some(200), &ok[..ok.len() - 1]).unwrap_err().code(),
        "store_unavailable"
    );
    assert_eq!(
        answer(Some(503), &failed).unwrap_err().to_string(),
        "store unavailable: remote_timeout"
    );
    // A status that contradicts the body is not trusted either way.
    assert_eq!(
        answer(Some(503), &ok).unwrap_err().code(),
        "store_unexpected_reply"
    );
    assert_eq!(
        answer(Some(200), &failed).unwrap_err().code(),
        "store_unexpected_reply"
    );
    // An answer to another operation.
    let finish = Response::Finish(FinishOutcome::Stored).encode();
    assert_eq!(
        answer(Some(200), &finish).unwrap_err().code(),
        "store_unexpected_reply"
    );
}

#[test]
fn an_outcome_in_doubt_sends_nothing() {
    let policy = Policy::defaults();
    assert_eq!(
        client::finish(
            skey(1),
            OwnerToken([1; 16]),
            ResponseFacts::InDoubt,
            &policy,
            &secrets()
        ),
        None
    );
    assert!(matches!(
        client::finish(
            skey(1),
            OwnerToken([1; 16]),
            ResponseFacts::NeverReached,
            &policy,
            &secrets()
        ),
        Some(Request::Finish {
            end: End::Release,
            ..
        })
    ));
}

#[derive(Debug, Clone)]
enum Op {
    /// A claim by `payer`'s client (see `payers`).
    Claim {
        key: u8,
        fp: u8,
        payer: u8,
    },
    Finish {
        key: u8,
        owner: u8,
        status: u16,
    },
    /// A one-time token's use, the token expiring `expires_in` ms from now.
    Consume {
        token: u8,
        expires_in: u64,
        payer: u8,
    },
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3u8, 0..2u8, 0..4u8).prop_map(|(key, fp, payer)| Op::Claim { key, fp, payer }),
        (
            0..3u8,
            0..6u8,
            prop_oneof![Just(0u16), Just(201), Just(503), Just(500)]
        )
            .prop_map(|(key, owner, status)| Op::Finish { key, owner, status }),
        (0..2u8, prop_oneof![Just(1_000u64), Just(30_000)], 0..4u8).prop_map(
            |(token, expires_in, payer)| Op::Consume {
                token,
                expires_in,
                payer
            }
        ),
        prop_oneof![Just(1u64), Just(30_000), Just(61_000), Just(90_000_000)].prop_map(Op::Advance),
    ]
}

/// Who pays for a request of client `n`: nobody, an address group alone, or an identity with
/// its group (two groups, two identities, so payers share a ledger sometimes).
fn payers(n: u8) -> Payers {
    const GROUPS: [&[u8]; 2] = [&[4, 32, 10, 0, 0, 1], &[4, 32, 10, 0, 0, 2]];
    let identity = |i: &'static [u8]| Scope {
        source: "header:authorization",
        value: i,
    };
    match n {
        0 => Payers::NONE,
        1 => Payers::of(
            Scope {
                source: PEER_GROUP_SOURCE,
                value: GROUPS[0],
            },
            false,
            None,
        ),
        2 => Payers::of(identity(b"1"), false, Some(GROUPS[0])),
        _ => Payers::of(identity(b"2"), false, Some(GROUPS[1])),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any sequence of claims, finishes, token uses and time passing gives the same outcomes
    /// through the remote protocol as through the local one: the core decides both, with one set
    /// of rules (`rule`) — a token's use is remembered as long in either, and a client at its
    /// share of the store is refused by both only while the store is under pressure (small
    /// shares and a small store, so the ops reach both).
    #[test]
    fn remote_and_local_agree(ops in proptest::collection::vec(op(), 1..40)) {
        let mut policy = Policy::defaults();
        // One cell of 8 records, so one fill shard: 4 records are its pressure of 50 %. The ops
        // touch five keys, so the cell never fills.
        policy.capacity.cells = 1;
        policy.capacity.per_cell = 8;
        policy.shares.pressure = 50;
        // Bytes bind the identity before records do: two stored answers of 3 bytes (163 bytes
        // each with their record) and a claim (160) are past 400 bytes; the peer counts records.
        policy.shares.identity = Some(Share { records: 3, bytes: 400 });
        policy.shares.peer = Some(Share { records: 3, bytes: u64::MAX });
        let mut local = MemoryStore::new();
        // Read first; speculate on the engine's clock; speculate off it (always refused).
        let mut remotes = [
            ModelEngine::default(),
            ModelEngine::speculative(0),
            ModelEngine::speculative(5_000),
        ];
        let mut now = UnixMillis(1_700_000_000_000);
        let mut next_owner = 0u8;
        for op in ops {
            match op {
                Op::Advance(ms) => now = now.after(Span(ms)),
                Op::Claim { key, fp, payer } => {
                    next_owner = next_owner.wrapping_add(1);
                    let owner = OwnerToken([next_owner % 6; 16]);
                    let mut engine = Protocol { store: &mut local, policy: &policy };
                    // The remote store's refusal names the same share, and the same payer.
                    let l = engine.claim(skey(key), Fingerprint([fp; 32]), owner, payers(payer), now).unwrap();
                    let request = client::claim(skey(key), Fingerprint([fp; 32]), owner, payers(payer), &policy);
                    // Through the filter's check: a replay's seal holds, and is all that differs.
                    for remote in &mut remotes {
                        let r = remote_claim(remote, request.clone(), now).map(unsealed).unwrap();
                        prop_assert_eq!(&l, &r);
                    }
                }
                Op::Consume { token, expires_in, payer } => {
                    // Token uses live in a hash domain of their own: keys apart from requests'.
                    let key = skey(100 + token);
                    let expires_at = now.after(Span(expires_in));
                    let mut engine = Protocol { store: &mut local, policy: &policy };
                    let l = engine.consume(key, expires_at, payers(payer), now).unwrap();
                    for remote in &mut remotes {
                        let request = client::consume(key, expires_at, payers(payer), &policy);
                        let r = remote.run(request, now);
                        prop_assert_eq!(Response::Consume(l), r);
                    }
                }
                Op::Finish { key, owner, status } => {
                    let facts = if status == 0 {
                        ResponseFacts::NeverReached
                    } else {
                        ResponseFacts::Upstream {
                            status,
                            headers: vec![("content-type".into(), "text/plain".into())],
                            body: Some(vec![status as u8; 3]),
                        }
                    };
                    let owner = OwnerToken([owner; 16]);
                    let mut engine = Protocol { store: &mut local, policy: &policy };
                    let l = engine.finish(skey(key), owner, Some(facts.clone()), now).unwrap();
                    for remote in &mut remotes {
                        let r = remote_finish(remote, &policy, skey(key), owner, facts.clone(), now);
                        prop_assert_eq!(&l, &r);
                    }
                }
            }
        }
    }

    /// Arbitrary bytes never panic a decoder.
    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = Request::decode(&bytes);
        let _ = Response::decode(&bytes);
        let _ = StoredValue::decode(&skey(1), &bytes);
    }

    /// Damaging any byte of a valid message gives a typed error or another valid message, never a
    /// panic; cutting it short is always `Truncated`.
    #[test]
    fn damaged_messages_fail_cleanly(index in 0usize..100, byte in any::<u8>(), cut in 0usize..100) {
        for request in samples() {
            let mut bytes = request.encode();
            let i = index % bytes.len();
            bytes[i] = byte;
            let _ = Request::decode(&bytes);
            let whole = request.encode();
            let cut = cut % whole.len();
            prop_assert_eq!(Request::decode(&whole[..cut]), Err(WireError::Truncated));
        }
    }
}

/// A claim over its payer's share is undone as if never written: a takeover of an abandoned claim
/// puts that claim back (a request with another payload still gets 422, not a fresh claim), and
/// the payer's charges stay as they were.
#[test]
fn a_claim_over_its_share_is_undone_as_if_never_written() {
    for speculate in [false, true] {
        let mut engine = if speculate {
            ModelEngine::speculative(0)
        } else {
            ModelEngine::default()
        };
        let mut policy = Policy::defaults();
        policy.shares.peer = Some(Share {
            records: 1,
            bytes: u64::MAX,
        });
        // Fixed caps: the share binds however empty the store is.
        policy.shares.pressure = 0;
        let payer = payers(1);
        let claim = |key: u8, fp: u8, owner: u8, payers: Payers| {
            client::claim(
                skey(key),
                Fingerprint([fp; 32]),
                OwnerToken([owner; 16]),
                payers,
                &policy,
            )
        };
        let now = UnixMillis(1_000_000);
        let forwarded = engine.run(claim(1, 1, 1, payer), now);
        assert!(matches!(
            forwarded,
            Response::Claim(ClaimOutcome::Forward { .. })
        ));
        // The lease is over: the payer's hold lapsed, and its next claim takes its one place.
        let later = now.after(Span::from_secs(61));
        let forwarded = engine.run(claim(2, 1, 2, payer), later);
        assert!(matches!(
            forwarded,
            Response::Claim(ClaimOutcome::Forward { .. })
        ));
        let abandoned = engine.keys[skey(1).as_bytes()].clone();
        // Taking over the abandoned claim would be a second record: refused, and undone.
        let refused = engine.run(claim(1, 1, 3, payer), later);
        assert_eq!(
            refused,
            Response::Claim(ClaimOutcome::QuotaExceeded {
                retry_after: Span::from_secs(60),
                share: Some(ShareRefusal {
                    reason: ShareReason::Address,
                    payer: payer.tags().next().unwrap(),
                }),
            }),
            "speculate: {speculate}"
        );
        let restored = &engine.keys[skey(1).as_bytes()];
        assert_eq!(
            restored.1, abandoned.1,
            "the abandoned claim's expiry is kept"
        );
        assert_eq!(
            StoredValue::decode(&skey(1), &restored.0).map(|v| v.record),
            StoredValue::decode(&skey(1), &abandoned.0).map(|v| v.record),
        );
        // So another payload for the key is still a mismatch, as on the local store.
        let other = engine.run(claim(1, 2, 4, Payers::NONE), later);
        assert_eq!(other, Response::Claim(ClaimOutcome::Mismatch));
        // And the payer's place frees when its claim is released.
        let release = client::finish(
            skey(2),
            OwnerToken([2; 16]),
            ResponseFacts::NeverReached,
            &policy,
            &secrets(),
        )
        .expect("a release is sent");
        assert_eq!(
            engine.run(release, later),
            Response::Finish(FinishOutcome::Released)
        );
        let taken = engine.run(claim(1, 1, 5, payer), later);
        assert!(matches!(
            taken,
            Response::Claim(ClaimOutcome::Forward { takeover: true, .. })
        ));
    }
}

/// The fleet's shares bind only under pressure: one address group claims far past its share
/// while the store's fill shard is below its pressure, and is refused once it is at it; another
/// payer below its share is served all the while.
#[test]
fn a_payer_over_its_share_is_refused_only_under_pressure() {
    for speculate in [false, true] {
        let mut engine = if speculate {
            ModelEngine::speculative(0)
        } else {
            ModelEngine::default()
        };
        let mut policy = Policy::defaults();
        // One fill shard of 16 cells of 8 records: 128 records, under pressure from 26 (20 %).
        policy.capacity.cells = 16;
        policy.capacity.per_cell = 8;
        policy.shares.pressure = 20;
        policy.shares.peer = Some(Share {
            records: 5,
            bytes: u64::MAX,
        });
        let now = UnixMillis(1_000_000);
        let claim = |key: u8, owner: u8, payers: Payers| {
            client::claim(
                skey(key),
                Fingerprint([1; 32]),
                OwnerToken([owner; 16]),
                payers,
                &policy,
            )
        };
        let forwarded =
            |response: &Response| matches!(response, Response::Claim(ClaimOutcome::Forward { .. }));
        let flooder = payers(1);
        assert!(forwarded(&engine.run(claim(0, 1, flooder), now)));
        // 26 records put the shard at its pressure: each of them is served, far past the share.
        for key in 1..26 {
            assert!(
                forwarded(&engine.run(claim(key, 1, flooder), now)),
                "record {key} of a store below its pressure (speculate: {speculate})"
            );
        }
        let refused = engine.run(claim(26, 1, flooder), now);
        assert_eq!(
            refused,
            Response::Claim(ClaimOutcome::QuotaExceeded {
                retry_after: Span::from_secs(60),
                share: Some(ShareRefusal {
                    reason: ShareReason::Address,
                    payer: flooder.tags().next().unwrap(),
                }),
            }),
            "speculate: {speculate}"
        );
        assert!(
            engine.get(&skey(26), now).is_none(),
            "the refused claim is undone"
        );
        // Another payer below its share is served under pressure.
        assert!(forwarded(&engine.run(claim(27, 2, payers(3)), now)));
        // The flooder's releases bring the shard below its pressure: it is served again.
        for key in 0..3 {
            let release = client::finish(
                skey(key),
                OwnerToken([1; 16]),
                ResponseFacts::NeverReached,
                &policy,
                &secrets(),
            )
            .expect("a release is sent");
            assert_eq!(
                engine.run(release, now),
                Response::Finish(FinishOutcome::Released)
            );
        }
        assert!(forwarded(&engine.run(claim(26, 1, flooder), now)));
        // With fixed caps (a pressure of 0) it is refused however empty the store.
        policy.shares.pressure = 0;
        let capped = client::claim(
            skey(28),
            Fingerprint([1; 32]),
            OwnerToken([1; 16]),
            flooder,
            &policy,
        );
        assert!(matches!(
            engine.run(capped, now),
            Response::Claim(ClaimOutcome::QuotaExceeded { .. })
        ));
    }
}
