//! The operation's ledger work once its record's answer is known: each payer charged on its own
//! ledger key, a charge's move on a finish, and the operation undone (charges given back, the key
//! put back) when a payer is refused or a ledger fails.

use super::*;

impl Operation {
    /// Resumes with what became of the [`Need::Ledger`] job: a charge refused or failed undoes
    /// the operation; a finish's move of its charge is best effort.
    #[must_use = "the next step must be carried out"]
    pub fn settled(&mut self, settled: LedgerOutcome) -> OperationStep {
        let Some(Task::Ledger(job)) = self.current_task() else {
            // A settlement with no job asked for: a host bug, answered as a failure.
            return OperationStep::Done(Response::Failed(Failure::Unavailable));
        };
        match (settled, job) {
            (LedgerOutcome::Done, job) => self.charged(job),
            (
                LedgerOutcome::Refused { retry_after, share },
                Job::Charge {
                    tag,
                    share: Some(_),
                    space,
                },
            ) => self.over_share(tag, space, OverShare::new(retry_after, share)),
            (
                LedgerOutcome::Refused { retry_after, share },
                Job::Charge { .. } | Job::Gauge { .. },
            ) => self.refused(OverShare::new(retry_after, share)),
            // Only a charge can be refused: a host bug, and moves are best effort anyway.
            (LedgerOutcome::Refused { .. }, _) => self.next_task(),
            (LedgerOutcome::Failed(failure), _) => self.task_failed(failure),
        }
    }

    /// Counts a lost compare-and-set on the record: the answer once there were too many.
    pub(super) fn lost(&mut self) -> Option<OperationStep> {
        self.attempts += 1;
        (self.attempts >= MAX_ATTEMPTS)
            .then_some(OperationStep::Done(Response::Failed(Failure::Contention)))
    }

    pub(super) fn current_task(&self) -> Option<Task> {
        self.after.as_ref().and_then(|a| a.tasks.first().cloned())
    }

    /// The record's write landed: what its payers owe, if anything.
    pub(super) fn landed(&mut self, landing: Landing) -> OperationStep {
        let mut after = After {
            answer: landing.response,
            tasks: Vec::new(),
            written: None,
            refunds: Vec::new(),
        };
        // Each payer within its share, then the record counted in its fill shard (by no share).
        let charge = |payers: &[Billed], fill: &Option<Fill>, space| {
            let shard = fill.map(|fill| (fill.shard.tag, None));
            payers
                .iter()
                .map(|p| (p.tag, Some(p.share)))
                .chain(shard)
                .map(|(tag, share)| Task::Ledger(Job::Charge { tag, share, space }))
                .collect::<Vec<_>>()
        };
        match (&self.request, &after.answer, landing.space) {
            (
                Request::Claim { payers, fill, .. },
                Response::Claim(ClaimOutcome::Forward { .. }),
                Some(space),
            )
            | (
                Request::Consume { payers, fill, .. },
                Response::Consume(ConsumeOutcome::Consumed),
                Some(space),
            ) => {
                after.tasks = charge(payers, fill, space);
                after.written = landing.version.map(|v| (v, landing.previous));
            }
            // A new resource record, as a claim's: charged to the delivery's payers, deleted
            // again if one is over its share.
            (Request::OrderBegin { payers, fill, .. }, Response::Begin(..), Some(space))
                if !payers.is_empty() || fill.is_some() =>
            {
                after.tasks = charge(payers, fill, space);
                after.written = landing.version.map(|v| (v, None));
            }
            (Request::Finish { shard, .. }, Response::Finish(outcome), to) => {
                if let Some((payers, from)) = landing.replaced {
                    let stored = matches!(outcome, crate::store::protocol::FinishOutcome::Stored);
                    after.tasks = payers
                        .tags()
                        .chain(shard.map(|shard| shard.tag))
                        .map(|tag| match (stored, to) {
                            (true, Some(to)) => Task::Ledger(Job::Shift { tag, from, to }),
                            _ => Task::Ledger(Job::Refund { tag, space: from }),
                        })
                        .collect();
                }
            }
            _ => {}
        }
        self.after = Some(after);
        self.start_task()
    }

    /// The first task's first engine call, or the answer when none is left.
    pub(super) fn start_task(&mut self) -> OperationStep {
        self.attempts = 0;
        let Some(task) = self.current_task() else {
            return match self.after.take() {
                Some(after) => OperationStep::Done(after.answer),
                None => OperationStep::Done(Response::Failed(Failure::Unavailable)),
            };
        };
        match task {
            Task::Ledger(job) => OperationStep::Need(Need::Ledger(LedgerJob(job))),
            Task::Unwrite(version, previous) => {
                let key = *self.request.key();
                let write = match previous {
                    None => Write::Delete,
                    Some(record) => Write::Set {
                        expires_at: record.expires_at(),
                        value: StoredValue {
                            version: self.derive_version(),
                            record,
                        }
                        .encode(&key),
                    },
                };
                self.pending = Some(Pending::Unwrite);
                OperationStep::Need(Need::Write {
                    key,
                    expect: Some(version),
                    write,
                    at: None,
                })
            }
        }
    }

    pub(super) fn next_task(&mut self) -> OperationStep {
        if let Some(after) = &mut self.after {
            if !after.tasks.is_empty() {
                after.tasks.remove(0);
            }
        }
        self.start_task()
    }

    /// `job` is done: a charge is remembered (to give back if a later one fails); the next task.
    pub(super) fn charged(&mut self, job: Job) -> OperationStep {
        if let (Job::Charge { tag, space, .. }, Some(after)) = (job, &mut self.after) {
            after.refunds.push(Job::Refund { tag, space });
        }
        self.next_task()
    }

    /// A payer is at its share, which binds only while the record's fill shard is under
    /// pressure ([`Fill::gauge`], the local store's rule): the shard's count is read next, then
    /// the payer is charged beyond its share if the shard has room. Refused at once when nothing
    /// is counted or the shares are fixed caps.
    pub(super) fn over_share(
        &mut self,
        tag: PayerTag,
        space: Space,
        over: OverShare,
    ) -> OperationStep {
        let fill = match &self.request {
            Request::Claim { fill, .. }
            | Request::Consume { fill, .. }
            | Request::OrderBegin { fill, .. } => *fill,
            _ => None,
        };
        let (Some(fill), Some(after)) = (
            fill.and_then(|fill| Fill::gauge(Some(fill.shard), fill.pressure)),
            &mut self.after,
        ) else {
            return self.refused(over);
        };
        let beyond = Job::Charge {
            tag,
            share: None,
            space,
        };
        let gauge = Job::Gauge { fill, over };
        after.tasks.splice(
            0..after.tasks.len().min(1),
            [Task::Ledger(gauge), Task::Ledger(beyond)],
        );
        self.start_task()
    }

    /// A payer is at its share: 429 with when it has room and which share refused (the filter
    /// counts and logs it as the local store's), and the operation undone.
    pub(super) fn refused(&mut self, over: OverShare) -> OperationStep {
        let (retry_after, share) = (over.retry_after, Some(over.refusal));
        let answer = match &self.request {
            Request::Consume { .. } => {
                Response::Consume(ConsumeOutcome::QuotaExceeded { retry_after, share })
            }
            Request::OrderBegin { .. } => Response::Begin(
                crate::order::BeginOutcome::QuotaExceeded { retry_after, share },
                None,
            ),
            _ => Response::Claim(ClaimOutcome::QuotaExceeded { retry_after, share }),
        };
        self.undo(answer)
    }

    /// The current task could not be done. A charge undoes the operation, answering `failure`
    /// (the host's failure mode applies, as for any failed claim); anything else is best effort.
    pub(super) fn task_failed(&mut self, failure: Failure) -> OperationStep {
        self.pending = None;
        match self.current_task() {
            Some(Task::Ledger(Job::Charge { .. } | Job::Gauge { .. })) => {
                let answer = match failure {
                    Failure::Full => full(&self.request),
                    other => Response::Failed(other),
                };
                self.undo(answer)
            }
            _ => self.next_task(),
        }
    }

    /// Gives back the charges made, deletes the record written, and answers `answer`.
    pub(super) fn undo(&mut self, answer: Response) -> OperationStep {
        let Some(after) = &mut self.after else {
            return OperationStep::Done(answer);
        };
        let mut tasks: Vec<Task> = after.refunds.drain(..).map(Task::Ledger).collect();
        tasks.extend(
            after
                .written
                .take()
                .map(|(version, previous)| Task::Unwrite(version, previous)),
        );
        after.tasks = tasks;
        after.answer = answer;
        self.start_task()
    }
}
