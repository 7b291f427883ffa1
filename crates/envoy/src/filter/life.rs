//! The request's life after its body, as the core's machine ([`guard::Guarded`]) runs it: each
//! of its actions carried out here — a store question asked of the local store at once or of the
//! remote store by callout (the stream paused until it answers), the sequencer asked, the
//! request let on or sent on a detached exchange, an answer sent, a claim finished, a resource
//! settled — and each answer handed back to the machine. Whether the store is local or remote is
//! decided in [`crate::backend`] only.

use super::*;

/// What asking the store gave.
enum Asked {
    /// The local store's answer, or a remote call that could not be made.
    Now(Reply),
    /// Asked of the remote store by this callout: the answer comes later.
    Later(u32),
    /// The local store cannot be asked without the clock.
    NoClock,
}

impl Filter {
    /// Carries out the machine's actions, in order, handing each answer that comes at once back
    /// to it; the stream then waits for a callout, goes on, or was answered.
    pub(super) fn run(&mut self, mut machine: Box<Machine>) -> Action {
        let mut result = Action::Continue;
        let mut call = None;
        loop {
            self.count_events(&mut machine);
            let Some(action) = machine.poll() else {
                break;
            };
            match action {
                guard::Action::Ask(ask) => match self.ask(ask) {
                    Asked::Now(answer) => machine.answered(answer, &self.shared.policy),
                    Asked::NoClock => machine.clock_failed(),
                    // The request waits for the answer: its last action (the machine's rule).
                    Asked::Later(token) => (call, result) = (Some(token), Action::Pause),
                },
                guard::Action::Sequence {
                    ordered, payers, ..
                } => match sequencer::begin(&self.shared, ordered, payers, self.context_id) {
                    Sequenced::Now(decision) => machine.ordered(decision),
                    Sequenced::Later(token) => (call, result) = (Some(token), Action::Pause),
                },
                guard::Action::Detach {
                    key,
                    owner,
                    held,
                    order,
                } => match self.detach(key, owner, held, order) {
                    Ok(token) => {
                        self.stage = Stage::Detached { token };
                        // A parked duplicate that claimed a released key waits no more.
                        self.unpark_unless(false);
                        return Action::Pause;
                    }
                    Err(sent) => machine.sent(sent),
                },
                guard::Action::Forward => {
                    if let Some(key) = machine.key() {
                        self.debug(&key, "claimed, forwarded");
                    }
                }
                // Let on unprotected because the store could not decide: counted apart from a
                // request without a key, and its answer marked as the core says.
                guard::Action::Pass => {
                    if let Some(why) = machine.degraded() {
                        self.count(Counter::Degraded);
                        self.count(Counter::from(why));
                        self.degraded = Some(why);
                    }
                }
                guard::Action::Park { key, payer } => self.park(&mut machine, key, payer),
                guard::Action::Answer(http) => {
                    host::send(&http);
                    result = Action::Pause;
                }
                guard::Action::Finish {
                    key,
                    owner,
                    facts,
                    cause,
                } => {
                    settle(&self.shared, key, owner, facts, cause, true);
                }
                guard::Action::SettleResource { claim, applied } => {
                    sequencer::settle(&self.shared, claim, applied, true);
                }
                guard::Action::MarkApplied => sequencer::mark_response(),
                guard::Action::Warn(warning) => {
                    host::log(LogLevel::Warn, &warning.to_string());
                }
            }
        }
        // A parked duplicate is held, paused, until it is woken with an answer.
        let waiting = machine.is_waiting();
        if waiting {
            result = Action::Pause;
        }
        self.unpark_unless(waiting);
        self.stage = if call.is_some() || machine.expects_more() || waiting {
            Stage::Guarded { machine, call }
        } else {
            Stage::Idle
        };
        result
    }

    /// Counts the machine's events (and, at debug level, logs each with the key).
    fn count_events(&self, machine: &mut Machine) {
        let events = machine.events();
        self.count_all(events);
        if let (true, Some(key)) = (self.shared.debug.get(), machine.key()) {
            for event in events.iter() {
                self.debug(&key, Counter::from(event).name());
            }
        }
    }

    /// Asks the store the machine's question: the local store at once, or the remote store by a
    /// callout whose answer is delivered to this filter — the stream's, or its machine's once the
    /// client is gone ([`crate::dispatch`]).
    fn ask(&self, ask: Ask) -> Asked {
        let shared = &self.shared;
        let policy = &shared.policy;
        let (mut store, now) = match backend::of(shared) {
            Ok(Backend::Local { store, now }) => (store, now),
            Err(NoClock) => return Asked::NoClock,
            Ok(Backend::Remote) => {
                let stream = self.context_id;
                let (request, pending) = match &ask {
                    Ask::Claim(c) => (
                        client::claim(c.key, c.fingerprint, c.owner, c.payers, policy),
                        StoreCall::Claim { stream },
                    ),
                    // Answered as a claim is: a replay only if its seal checks out.
                    Ask::Replay { key, fingerprint } => (
                        client::replay(*key, *fingerprint),
                        StoreCall::Claim { stream },
                    ),
                    Ask::Consume {
                        use_key,
                        expires_at,
                        payers,
                    } => (
                        client::consume(*use_key, *expires_at, *payers, policy),
                        StoreCall::Consume { stream },
                    ),
                };
                return match remote_store::call(shared, &request, |_| pending) {
                    Ok(token) => Asked::Later(token),
                    Err(e) => Asked::Now(match ask {
                        Ask::Claim(_) | Ask::Replay { .. } => Reply::Claim(Err(e)),
                        Ask::Consume { .. } => Reply::Consume(Err(e)),
                    }),
                };
            }
        };
        let mut protocol = Protocol {
            store: &mut store,
            policy,
        };
        Asked::Now(match ask {
            Ask::Claim(c) => {
                Reply::Claim(protocol.claim(c.key, c.fingerprint, c.owner, c.payers, now))
            }
            Ask::Replay { key, fingerprint } => {
                Reply::Claim(protocol.replay(key, fingerprint, now))
            }
            Ask::Consume {
                use_key,
                expires_at,
                payers,
            } => Reply::Consume(protocol.consume(use_key, expires_at, payers, now)),
        })
    }

    /// Hands the machine of a stream paused for a callout its answer, and resumes the request if
    /// it goes on. A machine whose client is gone carries out what it gives back (a claim
    /// released, a resource given back) and has no request to resume.
    fn answer_with(&mut self, f: impl FnOnce(&mut Machine)) {
        let Stage::Guarded {
            mut machine,
            call: Some(_),
        } = core::mem::replace(&mut self.stage, Stage::Idle)
        else {
            return;
        };
        let orphaned = machine.is_orphaned();
        f(&mut machine);
        let action = self.run(machine);
        if !orphaned {
            self.resume(action);
        }
    }

    /// The remote store answered this request's claim (with this stream made the effective
    /// context).
    pub fn claim_answered(&mut self, reply: &remote_store::Reply) {
        let shared = Rc::clone(&self.shared);
        self.answer_with(|machine| {
            let outcome = match machine.key() {
                Some(key) => remote_store::claim_outcome(&shared, reply, &key),
                None => Err(ProtocolError::UnexpectedReply),
            };
            machine.answered(Reply::Claim(outcome), &shared.policy);
        });
    }

    /// The remote store answered this request's token use.
    pub fn use_answered(&mut self, reply: &remote_store::Reply) {
        let shared = Rc::clone(&self.shared);
        self.answer_with(|machine| {
            let outcome = client::consume_outcome(reply.answer());
            machine.answered(Reply::Consume(outcome), &shared.policy);
        });
    }

    /// The remote store answered the sequencer's begin for this request.
    pub fn order_answered(&mut self, decision: Ruling<OrderClaim>) {
        self.answer_with(|machine| machine.ordered(decision));
    }
}
