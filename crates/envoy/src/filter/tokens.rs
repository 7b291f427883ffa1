//! A route's one-time tokens on the filter's side: the token issuing endpoint, and verifying a
//! request's token before any store decision. Its single use is a step of the request's course,
//! in the core's machine ([`guard::Guarded`]).

use super::*;

impl Filter {
    /// The token issuing endpoint: the core's [`guard::issue_token`] for the identified client.
    pub(super) fn issue_token(&mut self, headers: &Headers, path: &str) -> Action {
        let policy = self.policy();
        let Ok(client) = identify(&policy, &HeaderFacts::new(headers)) else {
            return self.reply(&EdgeAnswer::RequestUnreadable);
        };
        let Some(client) = client else {
            return self.unscoped(&policy);
        };
        let Some(now) = host::now() else {
            return self.reply(&EdgeAnswer::ClockUnavailable);
        };
        let nonce = crate::entropy::random16();
        let (http, events) = guard::issue_token(&policy, path, client.scope(), now, nonce);
        self.count_all(events);
        self.send(&http)
    }

    /// The token a route requires, checked before any store decision by the core's
    /// [`guard::check_token`]: `Err(action)` was answered (no identity to bind it to, no clock,
    /// or a token that is missing or not valid here).
    pub(super) fn verify_token(
        &mut self,
        client: Option<&ClientIdentity>,
        route: &Route,
        method: &str,
        headers: &Headers,
    ) -> Result<Option<VerifiedToken>, Action> {
        let policy = self.policy();
        let scope = client.map(ClientIdentity::scope);
        let presented = |name: &str| header_text(headers, name);
        match guard::check_token(&policy, route, method, scope, presented, host::now) {
            Ok(verified) => Ok(verified),
            Err(refusal) => {
                self.count_all(refusal.events());
                Err(self.reply(&refusal.answer()))
            }
        }
    }
}
