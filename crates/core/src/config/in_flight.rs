//! `in_flight`: whether a duplicate of a request still in flight (same scope, key and
//! fingerprint) waits for the first's answer, and how long, on each route.

use super::*;

/// `in_flight` (top level: every route's default; on a route: its own).
#[derive(Debug, Clone, Default)]
pub(crate) struct InFlightConfig {
    /// How long a duplicate waits; `"0s"` (or not given): it does not, and gets 409 at once.
    pub(crate) wait: Option<String>,
}

/// The longest wait a route may set. A waiting duplicate holds its client's connection and a
/// slot of the VM's waiters: past a minute a client is better told 409 and when to come back.
const MAX_WAIT: Span = Span::from_secs(60);

impl Config {
    /// A route's wait (`None`: off): its own `in_flight.wait`, else the top level's. Bounded, and
    /// shorter than the lease: a waiter must give up while the first still holds its claim, so
    /// that a claim taken over is never waited for.
    pub(super) fn compile_wait(
        &self,
        route: Option<(usize, &RouteConfig)>,
        lease: Span,
    ) -> Result<Option<Span>, Refusal> {
        let own = route.and_then(|(i, r)| {
            let wait = r.in_flight.as_ref()?.wait.as_deref()?;
            Some((item("routes", i, ".in_flight.wait"), wait))
        });
        let top = || {
            let wait = self.in_flight.as_ref()?.wait.as_deref()?;
            Some((copy("in_flight.wait"), wait))
        };
        let Some((field, text)) = own.or_else(top) else {
            return Ok(None);
        };
        let wait = text
            .parse::<Span>()
            .map_err(|e| refuse(copy(&field), &[e.text()]))?;
        if wait.as_millis() == 0 {
            return Ok(None);
        }
        if wait > MAX_WAIT || wait >= lease {
            return Err(refuse(
                field,
                &[
                    "must be at most 60 s and shorter than `lease` (",
                    &decimal(lease.as_millis()),
                    " ms): a duplicate gives up waiting while the first still holds its claim",
                ],
            ));
        }
        Ok(Some(wait))
    }
}
