//! Settling payers' ledger jobs, several at once on one key, sans-IO.
//!
//! Every request of one client charges the same ledger keys (its identity's, its address
//! group's), so a busy client's concurrent operations all want the same key. Each doing its own
//! read → decide → compare-and-set makes them race, and the ledger's throughput is one round trip
//! per operation at best. A host instead collects the jobs waiting on one key and settles them
//! together: one read (or none, when it knows the value it last wrote), every job decided in
//! order on the same usage, one compare-and-set. Each job gets its own answer — a charge past the
//! share is refused without holding up the others.
//!
//! The host's loop is the [`Operation`](super::Operation)'s: [`Settlement::start`] or
//! [`Settlement::speculate`], then [`Settlement::read`], [`Settlement::written`],
//! [`Settlement::conflicted`] or [`Settlement::failed`] with each engine answer, until
//! [`LedgerOutcome`]s come back, one per job, in the order the jobs were added.

use super::ledger::{self, Job};
use super::operation::{Need, Resume, Write};
use super::stored::ValueVersion;
use super::wire::Failure;
use crate::client::payer::ShareRefusal;
use crate::client::scope::StorageKey;
use crate::store::protocol::MAX_ATTEMPTS;
use crate::store::share::ledger::Usage;
use crate::store::WriteOutcome;
use crate::time::{Span, UnixMillis};
use alloc::vec::Vec;

/// Compare-and-sets a settlement may lose before its jobs fail with [`Failure::Contention`]. Only
/// another host writing the same ledger makes one lose (a host settles a key's jobs one batch at
/// a time), and each round lost is one that other host won.
pub(crate) const LEDGER_ATTEMPTS: u32 = 4 * MAX_ATTEMPTS;

/// One change an operation needs on a payer's ledger ([`Need::Ledger`]): opaque to the host,
/// which only groups jobs by [`LedgerJob::key`] and settles them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerJob(pub(crate) Job);

impl LedgerJob {
    /// The engine key of the payer's ledger.
    pub fn key(&self) -> StorageKey {
        ledger::ledger_key(self.0.tag())
    }
}

/// What became of one [`LedgerJob`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LedgerOutcome {
    /// Written (or nothing needed writing).
    Done,
    /// A charge with the payer at its share: it has room again in `retry_after`; `share` says
    /// which share refused it, and whose.
    Refused {
        retry_after: Span,
        share: ShareRefusal,
    },
    /// The ledger could not be changed.
    Failed(Failure),
}

/// A job a settlement could not take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SettleError {
    /// The job is on another key than the settlement's.
    OtherKey,
}

/// Another engine call, or every job's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettlementStep {
    Need(Need),
    Done(Vec<LedgerOutcome>),
}

/// The jobs waiting on one ledger key, settled with one compare-and-set.
#[derive(Debug)]
pub struct Settlement {
    key: StorageKey,
    jobs: Vec<Job>,
    /// Each job's answer on the usage of the write in flight.
    answers: Vec<LedgerOutcome>,
    /// The value the write in flight sets (`None`: a delete), kept for [`Settlement::value`].
    writing: Option<Option<Vec<u8>>>,
    /// The value the key holds once the settlement is done, when known.
    known: Option<Option<Vec<u8>>>,
    attempts: u32,
}

impl Settlement {
    /// A settlement of `first` and the jobs later [`Settlement::add`]ed on its key.
    pub fn new(first: LedgerJob) -> Settlement {
        Settlement {
            key: first.key(),
            jobs: alloc::vec![first.0],
            answers: Vec::new(),
            writing: None,
            known: None,
            attempts: 0,
        }
    }

    /// Adds a job on the same key (before the settlement starts).
    pub fn add(&mut self, job: LedgerJob) -> Result<(), SettleError> {
        if job.key() != self.key {
            return Err(SettleError::OtherKey);
        }
        self.jobs.push(job.0);
        Ok(())
    }

    /// The ledger key.
    pub fn key(&self) -> &StorageKey {
        &self.key
    }

    /// How many jobs the settlement holds.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// Never true: a settlement is made with its first job.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Starts with a read.
    #[must_use = "the first step must be carried out"]
    pub fn start(&self) -> Need {
        Need::Read { key: self.key }
    }

    /// Starts with a speculative compare-and-set, decided at `at` on the host's clock on the value
    /// the host last knew the key to hold (`None`: absent — a payer's first charge), the write
    /// proving it ([`Need::Write`]'s `at`). A settlement that writes nothing on the assumed value
    /// starts with a read instead.
    #[must_use = "the first step must be carried out"]
    pub fn speculate(
        &mut self,
        at: UnixMillis,
        assumed: Option<&[u8]>,
        fresh: ValueVersion,
    ) -> Need {
        match self.decide(at, assumed, fresh, Some(at)) {
            SettlementStep::Need(need @ Need::Write { .. }) => need,
            _ => {
                self.answers.clear();
                self.writing = None;
                self.known = None;
                self.start()
            }
        }
    }

    /// The value the key holds now that the settlement is done (`Some(None)`: absent), when this
    /// settlement knows it — what a host may [`Settlement::speculate`] on next time.
    pub fn value(&self) -> Option<Option<&[u8]>> {
        self.known.as_ref().map(Option::as_deref)
    }

    fn fail(&mut self, failure: Failure) -> SettlementStep {
        self.writing = None;
        self.known = None;
        SettlementStep::Done(alloc::vec![LedgerOutcome::Failed(failure); self.jobs.len()])
    }

    fn lost(&mut self) -> Option<SettlementStep> {
        self.attempts += 1;
        self.answers.clear();
        (self.attempts >= LEDGER_ATTEMPTS).then(|| self.fail(Failure::Contention))
    }

    /// Every job in order on the usage found, and the compare-and-set that makes it so.
    fn decide(
        &mut self,
        now: UnixMillis,
        value: Option<&[u8]>,
        fresh: ValueVersion,
        at: Option<UnixMillis>,
    ) -> SettlementStep {
        let Some(tag) = self.jobs.first().map(Job::tag) else {
            return SettlementStep::Done(Vec::new());
        };
        let (expect, mut found) = match value.map(|bytes| ledger::decode(tag, bytes)) {
            None => (None, Usage::default()),
            Some(Ok((version, usage))) => (Some(version), usage),
            // Never overwrite what cannot be read.
            Some(Err(_)) => return self.fail(Failure::Corrupt),
        };
        found.prune(now);
        let mut usage = found.clone();
        self.answers = self
            .jobs
            .iter()
            .map(|job| match job.apply(&mut usage, now) {
                Ok(()) => LedgerOutcome::Done,
                Err(over) => LedgerOutcome::Refused {
                    retry_after: over.retry_after,
                    share: over.refusal,
                },
            })
            .collect();
        // Nothing changed but what lapsed (refunds of holds already over, or every charge
        // refused): no write; the key's expiry forgets lapsed holds by itself.
        if usage == found {
            self.known = Some(value.map(<[u8]>::to_vec));
            return SettlementStep::Done(core::mem::take(&mut self.answers));
        }
        let write = match usage.holds.last() {
            Some(last) => Write::Set {
                value: ledger::encode(tag, fresh, &usage),
                expires_at: last.until,
            },
            // The payer's last hold given back: its key goes.
            None => Write::Delete,
        };
        self.writing = Some(match &write {
            Write::Set { value, .. } => Some(value.clone()),
            Write::Delete => None,
        });
        SettlementStep::Need(Need::Write {
            key: self.key,
            expect,
            write,
            at,
        })
    }
}

impl Resume for Settlement {
    type Step = SettlementStep;

    /// Resumes with what the read found: the engine's clock, the key's bytes, a fresh version.
    fn read(&mut self, now: UnixMillis, value: Option<&[u8]>, fresh: ValueVersion) -> Self::Step {
        self.decide(now, value, fresh, None)
    }

    /// Resumes with the compare-and-set's result; a conflict is followed by a read.
    fn written(&mut self, outcome: WriteOutcome) -> Self::Step {
        match (outcome, self.writing.take()) {
            (WriteOutcome::Written, Some(value)) => {
                self.known = Some(value);
                SettlementStep::Done(core::mem::take(&mut self.answers))
            }
            (WriteOutcome::Conflict, Some(_)) => match self.lost() {
                Some(done) => done,
                None => SettlementStep::Need(self.start()),
            },
            // A write result with no write asked for: a host bug, answered as a failure.
            (_, None) => self.fail(Failure::Unavailable),
        }
    }

    /// Resumes after a compare-and-set the engine refused and answered with its clock and the
    /// key's current value: decided again on those.
    fn conflicted(
        &mut self,
        now: UnixMillis,
        value: Option<&[u8]>,
        fresh: ValueVersion,
    ) -> Self::Step {
        if self.writing.take().is_none() {
            return self.fail(Failure::Unavailable);
        }
        match self.lost() {
            Some(done) => done,
            None => self.read(now, value, fresh),
        }
    }

    /// Resumes after the engine failed a call: every job fails with `failure`.
    fn failed(&mut self, failure: Failure) -> Self::Step {
        self.fail(failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::share::{PayerTag, Share, ShareReason, Space};
    use alloc::vec;

    const A: PayerTag = PayerTag([1, 2, 3, 4, 5, 6, 7, 0]);
    const NOW: UnixMillis = UnixMillis(10_000);

    fn charge(tag: PayerTag, until: u64) -> LedgerJob {
        LedgerJob(Job::Charge {
            tag,
            share: Some(Share {
                records: 2,
                bytes: u64::MAX,
            }),
            space: Space::bare(UnixMillis(until)),
        })
    }

    /// A's refusal in these tests: at its 2 records, room again when the first lapses.
    fn refused() -> LedgerOutcome {
        LedgerOutcome::Refused {
            retry_after: Span(10_000),
            share: ShareRefusal {
                reason: ShareReason::Identity,
                payer: A,
            },
        }
    }

    fn version(n: u8) -> ValueVersion {
        ValueVersion([n; 16])
    }

    /// The written value's usage, and the write's expectation.
    fn written(need: &Need) -> (Option<ValueVersion>, Usage) {
        match need {
            Need::Write {
                expect,
                write: Write::Set { value, .. },
                ..
            } => (*expect, ledger::decode(A, value).expect("a ledger").1),
            other => panic!("a write: {other:?}"),
        }
    }

    fn batch(jobs: &[LedgerJob]) -> Settlement {
        let mut settlement = Settlement::new(jobs[0]);
        for job in &jobs[1..] {
            settlement.add(*job).expect("same key");
        }
        settlement
    }

    #[test]
    fn jobs_on_one_key_are_decided_in_order_and_written_once() {
        let mut s = batch(&[charge(A, 20_000), charge(A, 30_000), charge(A, 40_000)]);
        assert_eq!(s.start(), Need::Read { key: s.key });
        let SettlementStep::Need(need) = s.read(NOW, None, version(1)) else {
            panic!("a write")
        };
        let (expect, usage) = written(&need);
        assert_eq!(expect, None);
        assert_eq!(usage.records(), 2, "the share is 2: the third is not held");
        assert_eq!(
            s.written(WriteOutcome::Written),
            SettlementStep::Done(vec![LedgerOutcome::Done, LedgerOutcome::Done, refused()])
        );
        let Need::Write {
            write: Write::Set { value, .. },
            ..
        } = need
        else {
            panic!()
        };
        assert_eq!(s.value(), Some(Some(&value[..])), "what the key holds now");
    }

    #[test]
    fn a_lost_race_is_decided_again_on_what_won() {
        let mut s = batch(&[charge(A, 20_000), charge(A, 30_000)]);
        let SettlementStep::Need(_) = s.read(NOW, None, version(1)) else {
            panic!()
        };
        // Another replica charged A once meanwhile: one of the two fits now.
        let mut theirs = Usage::default();
        theirs.add(Space::bare(UnixMillis(50_000)));
        let found = ledger::encode(A, version(9), &theirs);
        let SettlementStep::Need(need) = s.conflicted(NOW, Some(&found), version(2)) else {
            panic!("a write")
        };
        let (expect, usage) = written(&need);
        assert_eq!(expect, Some(version(9)));
        assert_eq!(usage.records(), 2);
        assert_eq!(
            s.written(WriteOutcome::Written),
            SettlementStep::Done(vec![LedgerOutcome::Done, refused()])
        );
    }

    #[test]
    fn a_speculation_is_a_write_on_the_known_version() {
        let mut known = Usage::default();
        known.add(Space::bare(UnixMillis(50_000)));
        let value = ledger::encode(A, version(4), &known);
        let mut s = batch(&[charge(A, 20_000)]);
        let need = s.speculate(NOW, Some(&value), version(5));
        assert!(
            matches!(need, Need::Write { at: Some(NOW), .. }),
            "{need:?}"
        );
        assert_eq!(written(&need).0, Some(version(4)));
        // Only refunds of lapsed holds on an absent key: nothing to write, so a read decides.
        let refund = LedgerJob(Job::Refund {
            tag: A,
            space: Space::bare(UnixMillis(1)),
        });
        let mut s = Settlement::new(refund);
        assert_eq!(s.speculate(NOW, None, version(6)), s.start());
        assert_eq!(s.value(), None, "an assumption is never reported as known");
    }

    #[test]
    fn too_many_lost_races_fail_every_job_and_bad_bytes_are_never_overwritten() {
        let mut s = batch(&[charge(A, 20_000), charge(A, 30_000)]);
        let mut step = s.read(NOW, None, version(1));
        let mut rounds = 0;
        while let SettlementStep::Need(Need::Write { .. }) = step {
            rounds += 1;
            step = s.written(WriteOutcome::Conflict);
            if let SettlementStep::Need(Need::Read { .. }) = step {
                step = s.read(NOW, None, version(1));
            }
        }
        assert_eq!(rounds, LEDGER_ATTEMPTS);
        assert_eq!(
            step,
            SettlementStep::Done(vec![LedgerOutcome::Failed(Failure::Contention); 2])
        );

        let mut s = batch(&[charge(A, 20_000)]);
        assert_eq!(
            s.read(
                NOW,
                Some(b"not a ledger at all, but long enough"),
                version(1)
            ),
            SettlementStep::Done(vec![LedgerOutcome::Failed(Failure::Corrupt)])
        );
        let other = PayerTag([9; 8]);
        assert_eq!(s.add(charge(other, 1)), Err(SettleError::OtherKey));
    }
}
