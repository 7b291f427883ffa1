//! The claim and what follows it: the core's decision on the key (local store at once, remote
//! store by callout), then forwarding as the owner — on the router path, or on a detached
//! exchange — and settling the claim when the request ends.

use super::*;

impl Filter {
    /// The whole request is known: claim its key through the core and act on the outcome.
    pub(super) fn claim(&mut self, hashing: Box<Hashing>) -> Action {
        let policy = self.policy();
        let Hashing {
            intake,
            token,
            mut held,
            order,
            mut reservation,
        } = *hashing;
        // The detached exchange's copy of the body outlives the hashing: its bytes stay
        // reserved until it is sent; the rest (the hasher, a key source's or the ordering
        // guard's copy) is returned when this function is done with them.
        if let Some(held) = &mut held {
            held.reserved = Some(Box::new(reservation.split(held.body.len() as u64)));
        }
        let (key, fingerprint) = match intake.finish() {
            Ok(Taken::Claim { key, fingerprint }) => (key, fingerprint),
            Ok(Taken::Unguarded) => return self.unguarded(token),
            Err(refusal) => return self.refuse_body(&refusal),
        };
        // The event and its resource are read before any store write: a tracked event without a
        // resource id is refused without a claim.
        match order.map(|probe| order::before(*probe)).transpose() {
            Ok(ordered) => self.ordered = ordered.flatten(),
            Err(http) => {
                self.count(Counter::OrderResourceMissing);
                return self.send(&http);
            }
        }
        let owner = self.shared.owners.next();
        if remote_store::is_remote(&self.shared) {
            let stream = self.context_id;
            let shared = Rc::clone(&self.shared);
            let request = client::claim(key, fingerprint, owner, self.payers, &policy);
            match remote_store::call(&self.shared, &request, |_| StoreCall::Claim {
                stream,
                shared,
                key,
                owner,
            }) {
                Ok(call) => {
                    self.stage = Stage::Claiming(Box::new(Claiming {
                        call,
                        key,
                        token,
                        held,
                    }));
                    return Action::Pause;
                }
                Err(e) => return self.claimed(key, Err(e), token, held),
            }
        }
        let Some(now) = host::now() else {
            return self.reply(&EdgeAnswer::ClockUnavailable);
        };
        let mut store = self.shared.store();
        let mut engine = Engine {
            store: &mut store,
            policy: &policy,
        };
        let outcome = engine.claim(key, fingerprint, owner, self.payers, now);
        self.claimed(key, outcome, token, held)
    }

    /// Carries out what the core makes of a claim's outcome (from the local store, or the remote
    /// store's answer): forward as the key's owner, answer, or forward unguarded.
    pub(super) fn claimed(
        &mut self,
        key: StorageKey,
        outcome: Result<ClaimOutcome, ProtocolError>,
        token: Option<VerifiedToken>,
        held: Option<Held>,
    ) -> Action {
        let policy = self.policy();
        let (next, events) = guard::after_claim(&outcome, &policy);
        self.count_all(events);
        match next {
            Next::Forward { owner, takeover } => {
                self.debug(
                    &key,
                    if takeover {
                        "taken over, forwarded"
                    } else {
                        "claimed, forwarded"
                    },
                );
                // The delivery is this request's: its course (the ordering guard's decision on
                // its event, its token's use) is the core's.
                let ordering = self.ordered.take().map(|ordered| Ordering {
                    ordered,
                    key,
                    owner,
                });
                self.go(Going {
                    course: Course::claimed(ordering, token),
                    after: AfterUse::Forward { key, owner, held },
                    order: None,
                })
            }
            Next::Answer(answer) => {
                self.log_answer(&key, &answer);
                self.reply(&answer)
            }
            Next::Unguarded => {
                match &outcome {
                    Err(e) => log_store_failure(e),
                    Ok(_) => self.debug(&key, "store full: forwarded unguarded"),
                }
                self.stage = Stage::Idle;
                self.unprotected(token)
            }
        }
    }

    /// Sends the claimed request on a detached exchange ([`crate::detached`]) and keeps the stream
    /// paused until its answer is relayed. If it cannot be sent, the upstream never saw it: the
    /// claim is released and the client told so.
    pub(super) fn detach(
        &mut self,
        key: StorageKey,
        owner: OwnerToken,
        held: Held,
        order: Option<OrderClaim>,
    ) -> Action {
        let policy = self.policy();
        let route = &held.route;
        match detached::send(route, &held.headers, &held.body) {
            Ok(token) => {
                let exchange = Exchange {
                    shared: Rc::clone(&self.shared),
                    key,
                    owner,
                    stream: self.context_id,
                    claimed_at: host::now(),
                    kind: self.kind,
                    via: route.via,
                    order: order.clone(),
                };
                if !self.shared.register(token, Pending::Detached(exchange)) {
                    // The answer would find no entry and the client would wait for nothing.
                    // The exchange was sent, so its outcome is in doubt: settle it as such (the
                    // claim holds until its lease ends, so a retry cannot run it twice) and tell
                    // the client now.
                    host::log(
                        LogLevel::Error,
                        "the callout table was busy: outcome in doubt",
                    );
                    self.finish_claim(key, owner, ResponseFacts::InDoubt, DoubtCause::Other);
                    let retry_after = policy.lease;
                    return self.reply(&EdgeAnswer::Relay(RelayProblem::NoAnswer { retry_after }));
                }
                self.count(Counter::Detached);
                self.debug(&key, "sent on a detached exchange");
                self.stage = Stage::Detached { token };
                Action::Pause
            }
            Err(status) => {
                host::log(
                    LogLevel::Warn,
                    &format!(
                        "could not send to cluster `{}` (status {}): released",
                        route.cluster, status.0
                    ),
                );
                self.finish_claim(key, owner, ResponseFacts::NeverReached, DoubtCause::Other);
                if let Some(claim) = order {
                    order::settle(&self.shared, claim, false, true);
                }
                self.reply(&EdgeAnswer::Relay(RelayProblem::NotSent))
            }
        }
    }

    /// The remote store answered this request's claim (with this stream made the effective
    /// context): act on it, and resume the request if it goes on.
    pub fn claim_answered(&mut self, reply: &remote_store::Reply) {
        let Stage::Claiming(claiming) = core::mem::replace(&mut self.stage, Stage::Idle) else {
            return;
        };
        let Claiming {
            key, token, held, ..
        } = *claiming;
        let outcome = remote_store::claim_outcome(&self.shared, reply, &key);
        let action = self.claimed(key, outcome, token, held);
        self.resume(action);
    }

    /// Completes, releases or keeps the claim, as the core decides from `facts`.
    pub(super) fn finish_claim(
        &mut self,
        key: StorageKey,
        owner: OwnerToken,
        facts: ResponseFacts,
        cause: DoubtCause,
    ) {
        settle(
            &self.shared,
            key,
            owner,
            self.kind.screen(facts),
            cause,
            true,
        );
    }
}
