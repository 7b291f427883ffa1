//! A route's one-time tokens on the filter's side: the token issuing endpoint, verifying a
//! request's token before any store decision, and using it once — before the request goes on,
//! whatever the store decided (forwarded, answered or unguarded): the course's token step.

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

    /// Uses a verified token, then goes on with the request's course: locally at once, or
    /// (remote store) once the store answers, the request paused meanwhile.
    pub(super) fn use_token(&mut self, claims: &VerifiedToken, going: Going) -> Action {
        if remote_store::is_remote(&self.shared) {
            let claim = match &going.after {
                AfterUse::Forward { key, owner, .. } => Some((*key, *owner)),
                _ => None,
            };
            let stream = self.context_id;
            let shared = Rc::clone(&self.shared);
            let policy = self.policy();
            let request = client::consume(claims.use_key, claims.expires_at, self.payers, &policy);
            return match remote_store::call(&self.shared, &request, |_| StoreCall::Consume {
                stream,
                shared,
                claim,
            }) {
                Ok(call) => {
                    self.stage = Stage::Using {
                        call,
                        going: Box::new(going),
                    };
                    Action::Pause
                }
                Err(e) => self.token_used(Err(e), going),
            };
        }
        let policy = self.policy();
        let mut store = self.shared.store();
        let Some(now) = host::now() else {
            // Whether the token is still good cannot be judged without the clock.
            let action = self.reply(&EdgeAnswer::ClockUnavailable);
            self.not_forwarded(going);
            return action;
        };
        let mut engine = Engine {
            store: &mut store,
            policy: &policy,
        };
        let outcome = engine.consume(claims.use_key, claims.expires_at, self.payers, now);
        self.token_used(outcome, going)
    }

    /// The token's use is decided (the core's [`guard::after_use`]): the course goes on, or the
    /// request is answered (and a claim it holds released).
    pub(super) fn token_used(
        &mut self,
        outcome: Result<ConsumeOutcome, ProtocolError>,
        going: Going,
    ) -> Action {
        let (refusal, events) = guard::after_use(&outcome);
        self.count_all(events);
        let Some(answer) = refusal else {
            return self.go(going);
        };
        if let EdgeAnswer::StoreFailed(e) = &answer {
            log_store_failure(e);
        }
        let action = self.reply(&answer);
        self.not_forwarded(going);
        action
    }

    /// Forwarding without idempotency (`pass_through`) still needs the route's token used, once.
    pub(super) fn unprotected(&mut self, token: Option<VerifiedToken>) -> Action {
        self.go(Going {
            course: Course::unguarded(token),
            after: AfterUse::Unprotected,
            order: None,
        })
    }

    /// The remote store answered this request's token use.
    pub fn use_answered(&mut self, reply: &remote_store::Reply) {
        let Stage::Using { going, .. } = core::mem::replace(&mut self.stage, Stage::Idle) else {
            return;
        };
        let outcome = client::consume_outcome(reply.answer());
        let action = self.token_used(outcome, *going);
        self.resume(action);
    }
}
