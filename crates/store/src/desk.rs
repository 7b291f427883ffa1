//! Payers' ledgers, settled in batches: one desk per ledger key with work waiting.
//!
//! Every request of one client charges the same ledger keys (its identity's and its address
//! group's: the payers of the fleet's shares). Each operation doing its own read →
//! compare-and-set on them made a busy client's concurrent requests race (losers retried, some
//! ran out of attempts: store errors for an honest caller), and held a client to one ledger
//! round trip per request. Here the jobs waiting on one key are settled together by the core's
//! [`Settlement`]: one compare-and-set for all of them, each job its own answer. While a batch is
//! at the engine, the next one gathers.
//!
//! The desk also keeps the value its last batch left (for a few thousand idle keys), which the
//! next batch speculates on: a compare-and-set on that version, proved by the engine, so a
//! client's steady stream costs one round trip per batch. Another replica's write only makes
//! that speculation miss and answer with what the engine holds.
//!
//! A batch runs in a task of its own, not in any request's future: a request that times out while
//! it waits never leaves a key's desk busy for ever.

use idemgate_core::client::scope::StorageKey;
use idemgate_core::store::remote::{Failure, LedgerJob, LedgerOutcome, Settlement};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use tokio::sync::oneshot;

/// Idle keys whose last value is kept for the next batch's speculation, at most: past it, every
/// idle key's is forgotten (the next batch on it reads, or speculates on an absent key).
const KNOWN: usize = 4096;

/// What a waiting operation gets back: its job's answer, and what its batch cost the engine
/// (counted on one job of the batch, for the metrics).
pub type Reply = (LedgerOutcome, Tally);

/// What one batch cost the engine.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub calls: u32,
    /// Compare-and-sets that met another version (not speculations that missed).
    pub conflicts: u32,
}

/// The desks of every ledger key with work waiting or a value known.
#[derive(Default)]
pub struct Desks {
    desks: Mutex<HashMap<StorageKey, Desk>>,
}

#[derive(Default)]
struct Desk {
    waiting: Vec<(LedgerJob, oneshot::Sender<Reply>)>,
    /// A batch on this key is at the engine (its task takes the next batch when done).
    busy: bool,
    /// The value the last batch left (`Some(None)`: absent), when known.
    known: Option<Option<Vec<u8>>>,
}

/// The jobs one batch settles, who waits for each, and what the key held last.
pub struct Batch {
    pub settlement: Settlement,
    pub waiters: Vec<oneshot::Sender<Reply>>,
    pub known: Option<Option<Vec<u8>>>,
}

impl Desks {
    /// Puts `job` on its key's desk. `true`: no batch was running there, and the caller starts
    /// the task that settles the key's batches ([`Desks::next`] until it answers `None`).
    pub fn queue(&self, job: LedgerJob) -> (oneshot::Receiver<Reply>, bool) {
        let (tx, rx) = oneshot::channel();
        let mut desks = self.desks.lock().unwrap_or_else(PoisonError::into_inner);
        let desk = desks.entry(job.key()).or_default();
        desk.waiting.push((job, tx));
        let start = !desk.busy;
        desk.busy = true;
        (rx, start)
    }

    /// The next batch on `key`: every job waiting there. `None` when none is: the desk is idle.
    pub fn next(&self, key: &StorageKey) -> Option<Batch> {
        let mut desks = self.desks.lock().unwrap_or_else(PoisonError::into_inner);
        let desk = desks.get_mut(key)?;
        let mut waiting = std::mem::take(&mut desk.waiting).into_iter();
        let Some((first, tx)) = waiting.next() else {
            desk.busy = false;
            if desks.len() > KNOWN {
                desks.retain(|_, desk| desk.busy || !desk.waiting.is_empty());
            }
            return None;
        };
        let mut settlement = Settlement::new(first);
        let mut waiters = vec![tx];
        for (job, tx) in waiting {
            // Every job on a desk is on its key: `add` only refuses another key's.
            match settlement.add(job) {
                Ok(()) => waiters.push(tx),
                Err(_) => {
                    let _ = tx.send((
                        LedgerOutcome::Failed(Failure::Unavailable),
                        Tally::default(),
                    ));
                }
            }
        }
        Some(Batch {
            settlement,
            waiters,
            known: desk.known.take(),
        })
    }

    /// A batch is settled: each waiter gets its answer (one of them the batch's engine calls),
    /// and the desk keeps the value the key holds now, when known.
    pub fn done(
        &self,
        key: &StorageKey,
        waiters: Vec<oneshot::Sender<Reply>>,
        answers: Vec<LedgerOutcome>,
        tally: Tally,
        known: Option<Option<Vec<u8>>>,
    ) {
        if let Some(desk) = self
            .desks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(key)
        {
            desk.known = known;
        }
        let mut answers = answers.into_iter();
        for (i, tx) in waiters.into_iter().enumerate() {
            let settled = answers
                .next()
                .unwrap_or(LedgerOutcome::Failed(Failure::Unavailable));
            let tally = if i == 0 { tally } else { Tally::default() };
            // A waiter that gave up (its operation timed out) is simply not told.
            let _ = tx.send((settled, tally));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use idemgate_core::client::payer::{Billed, PayerTag, Share};
    use idemgate_core::store::remote::Resume;

    /// A payer's charge job, as the core's exchange asks for it.
    fn job(tag: u8) -> LedgerJob {
        use idemgate_core::store::remote::{Need, Operation, OperationStep};
        use idemgate_core::store::remote::{Request, Response, ValueVersion};
        use idemgate_core::ClaimOutcome;
        let request = Request::Claim {
            key: StorageKey::from_stored([tag; 32]),
            fingerprint: idemgate_core::request::fingerprint::Fingerprint([1; 32]),
            owner: idemgate_core::record::OwnerToken([1; 16]),
            lease: idemgate_core::time::Span::from_secs(30),
            ttl: idemgate_core::time::Span::from_secs(60),
            payers: vec![Billed {
                tag: PayerTag([tag; 8]),
                share: Share {
                    records: 10,
                    bytes: 1 << 20,
                },
            }],
            fill: None,
        };
        let (mut exchange, _) = Operation::start(request);
        let step = exchange.read(
            idemgate_core::time::UnixMillis(1_000),
            None,
            ValueVersion([2; 16]),
        );
        assert!(matches!(step, OperationStep::Need(Need::Write { .. })));
        match exchange.written(idemgate_core::store::WriteOutcome::Written) {
            OperationStep::Need(Need::Ledger(job)) => job,
            OperationStep::Done(Response::Claim(ClaimOutcome::Forward { .. })) => {
                panic!("no charge")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn jobs_waiting_on_one_key_are_one_batch_and_one_task_runs_it() {
        let desks = Desks::default();
        let (a, start_a) = desks.queue(job(1));
        let (_b, start_b) = desks.queue(job(1));
        let (_c, start_c) = desks.queue(job(2));
        assert!(start_a, "the first job on a key starts its task");
        assert!(!start_b, "a second waits for the running one");
        assert!(start_c, "another key has a desk of its own");

        let key = job(1).key();
        let batch = desks.next(&key).expect("a batch");
        assert_eq!(batch.settlement.len(), 2);
        assert!(batch.known.is_none());
        // While it is at the engine, a new job joins the next batch, not a new task.
        let (_d, start_d) = desks.queue(job(1));
        assert!(!start_d);
        desks.done(
            &key,
            batch.waiters,
            vec![LedgerOutcome::Done, LedgerOutcome::Done],
            Tally {
                calls: 3,
                conflicts: 0,
            },
            Some(None),
        );
        let mut a = a;
        assert_eq!(a.try_recv().expect("answered").1.calls, 3);
        let next = desks.next(&key).expect("the job that joined");
        assert_eq!(next.settlement.len(), 1);
        assert_eq!(next.known, Some(None), "the last batch's value is kept");
        desks.done(
            &key,
            next.waiters,
            vec![LedgerOutcome::Done],
            Tally::default(),
            None,
        );
        assert!(desks.next(&key).is_none(), "nothing left: the task ends");
        let (_e, start_e) = desks.queue(job(1));
        assert!(start_e, "an idle desk starts a task again");
    }
}
