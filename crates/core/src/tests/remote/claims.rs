//! The read → decide → compare-and-set exchange: one claim admitted whatever the interleaving,
//! the common cases in one engine call, speculation checked on the engine's clock.

use super::engine::ModelEngine;
use super::support::{claim, finish_store, response, secrets, skey};
use crate::decision::ResponseFacts;
use crate::policy::Policy;
use crate::record::{OwnerToken, Record};
use crate::store::protocol::{ClaimOutcome, ConsumeOutcome, FinishOutcome};
use crate::store::remote::Resume;
use crate::store::remote::{
    client, End, Need, Operation, OperationStep, Request, Response, StoredValue, ValueVersion,
    CLOCK_TOLERANCE,
};
use crate::store::WriteOutcome;
use crate::time::{Span, UnixMillis};
use std::prelude::rust_2021::Vec;

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
