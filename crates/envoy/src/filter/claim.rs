//! The claim: the whole request is known, so the core's machine ([`guard::Guarded`]) is started
//! with its key, fingerprint and course; and sending a claimed request on a detached exchange,
//! when the machine says so.

use super::*;

impl Filter {
    /// The whole request is known: start its life in the core's machine with the claim of its key.
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
        let ordered = match order.map(|probe| order::before(*probe)).transpose() {
            Ok(ordered) => ordered.flatten(),
            Err(http) => {
                self.count(Counter::OrderResourceMissing);
                return self.send(&http);
            }
        };
        let claim = Claim {
            key,
            fingerprint,
            owner: self.shared.owners.next(),
            payers: self.payers,
        };
        let course = Course::claimed(ordered, token);
        let held = held.map(Box::new);
        let machine = Guarded::claim(&policy, self.kind, claim, course, held);
        self.run(Box::new(machine))
    }

    /// Sends the claimed request on a detached exchange ([`crate::detached`]), which settles the
    /// claim with its answer: `Ok(callout)` the stream waits for; else what the machine is told.
    pub(super) fn detach(
        &mut self,
        key: StorageKey,
        owner: OwnerToken,
        held: Held,
        order: Option<OrderClaim>,
    ) -> Result<u32, Sent<OrderClaim>> {
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
                    order,
                };
                if !self.shared.register(token, Pending::Detached(exchange)) {
                    // The answer would find no entry and the client would wait for nothing.
                    host::log(
                        LogLevel::Error,
                        "the callout table was busy: outcome in doubt",
                    );
                    return Err(Sent::Lost);
                }
                self.count(Counter::Detached);
                self.debug(&key, "sent on a detached exchange");
                Ok(token)
            }
            Err(status) => {
                host::log(
                    LogLevel::Warn,
                    &format!(
                        "could not send to cluster `{}` (status {}): released",
                        route.cluster, status.0
                    ),
                );
                Err(Sent::Failed { order })
            }
        }
    }
}
