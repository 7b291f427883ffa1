//! The protocol over a memory store: operations on `protocol::Engine`, sans-IO claim transactions
//! interleaved with them, and the protocol invariants checked after each.

use super::input::{Facts, Op, KEYS, MAX_PENDING};
use super::oracle::live;
use super::records::fingerprint;
use idemgate_core::client::payer::Payers;
use idemgate_core::client::scope::{Scope, StorageKey};
use idemgate_core::client::token::CLOCK_SKEW;
use idemgate_core::decision::{complete, Completion, ResponseFacts};
use idemgate_core::policy::Policy;
use idemgate_core::record::{Bucket, Completed, InFlight, OwnerToken, Record};
use idemgate_core::request::fingerprint::Fingerprint;
use idemgate_core::request::key::IdempotencyKey;
use idemgate_core::store::protocol::{Claiming, StoreReply, StoreRequest, Transaction, TransactionStep};
use idemgate_core::{ClaimOutcome, ConsumeOutcome, FinishOutcome, Protocol, ProtocolError};
use idemgate_core::store::{Layout, MemoryStore, Store, WriteOutcome};
use idemgate_core::time::{Span, UnixMillis};
use std::sync::OnceLock;

pub(crate) struct Pending<'p> {
    key: usize,
    pub(crate) fp: Fingerprint,
    pub(crate) owner: OwnerToken,
    pub(crate) now: UnixMillis,
    tx: Transaction<Claiming<'p>>,
    request: StoreRequest,
}

pub(crate) struct World<'p> {
    pub(crate) store: MemoryStore,
    pub(crate) policy: &'p Policy,
    pub(crate) now: UnixMillis,
    pub(crate) keys: Vec<StorageKey>,
    /// (key index, owner) for every claim that was granted.
    pub(crate) owners: Vec<(usize, OwnerToken)>,
    pub(crate) next_owner: u64,
    pub(crate) pending: Vec<Pending<'p>>,
}

pub(crate) fn storage_keys() -> &'static Vec<StorageKey> {
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

    pub(crate) fn record(&mut self, key: usize) -> (Option<Record>, u64) {
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

    pub(crate) fn apply(&mut self, op: &Op) {
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
