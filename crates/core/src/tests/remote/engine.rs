//! The model of the store engine the remote protocol is checked against.

use crate::client::scope::StorageKey;
use crate::store::protocol::ClaimOutcome;
use crate::store::remote::Resume;
use crate::store::remote::{
    LedgerJob, LedgerOutcome, Need, Operation, OperationStep, Request, Response, Settlement,
    SettlementStep, ValueVersion, Write, CLOCK_TOLERANCE,
};
use crate::store::WriteOutcome;
use crate::time::UnixMillis;
use std::collections::BTreeMap;
use std::prelude::rust_2021::Vec;

/// A model of the engine: one value per key, expiring on the engine's clock, compare-and-set on
/// the value's version prefix — what the service's Lua scripts do in Redis.
///
/// With `speculate` on, it also models the service's side of one-round-trip operations: the host
/// clock (the engine's plus `host_skew` ms), the values the host wrote for the claims it
/// forwarded, and a compare-and-set that answers a refusal with the engine's clock and value.
#[derive(Default)]
pub(crate) struct ModelEngine {
    pub(crate) keys: BTreeMap<[u8; 32], (Vec<u8>, UnixMillis)>,
    writes: u64,
    speculate: bool,
    host_skew: i64,
    pub(crate) claimed: BTreeMap<[u8; 32], Vec<u8>>,
    /// Protocol calls made (each is one round trip to Redis).
    pub(crate) calls: u64,
}

impl ModelEngine {
    pub(crate) fn get(&mut self, key: &StorageKey, now: UnixMillis) -> Option<Vec<u8>> {
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

    pub(crate) fn fresh(&mut self) -> ValueVersion {
        self.writes += 1;
        let mut v = [0u8; 16];
        v[..8].copy_from_slice(&self.writes.to_be_bytes());
        ValueVersion(v)
    }

    pub(crate) fn speculative(host_skew: i64) -> ModelEngine {
        ModelEngine {
            speculate: true,
            host_skew,
            ..ModelEngine::default()
        }
    }

    /// The Redis compare-and-set script: a speculative write (`at`) is refused off the engine's
    /// clock; a refusal answers with the engine's clock and the key's value.
    pub(crate) fn cas_found(
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
    pub(crate) fn run(&mut self, request: Request, now: UnixMillis) -> Response {
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
