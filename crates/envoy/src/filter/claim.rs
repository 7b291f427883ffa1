//! Sending a claimed request on a detached exchange, when the core's machine
//! ([`guard::Guarded`]) says so: its answer settles the claim, whether or not the stream waits.

use super::*;

impl Filter {
    /// Sends the claimed request on a detached exchange ([`crate::detached`]), which settles the
    /// claim with its answer: `Ok(callout)` the stream waits for; else what the machine is told.
    pub(super) fn detach(
        &mut self,
        key: StorageKey,
        owner: OwnerToken,
        kept: Kept<Box<Held>>,
        order: Option<OrderClaim>,
    ) -> Result<u32, Sent<OrderClaim>> {
        // The body's bytes stay reserved from the hashing budget, and its answer's from the relay
        // budget, until the exchange ends (Envoy keeps the body it sends and buffers the answer
        // until then); if it cannot be sent, until now.
        let Kept {
            held,
            body,
            reserved,
            relay,
        } = kept;
        let route = &held.route;
        match detached::send(route, &held.headers, &body) {
            Ok(token) => {
                let exchange = Exchange {
                    shared: Rc::clone(&self.shared),
                    key,
                    owner,
                    stream: self.context_id,
                    claimed_at: host::now(),
                    kind: held.kind,
                    via: route.via,
                    order,
                    body: reserved,
                    relay,
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
