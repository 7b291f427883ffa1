//! A request's course to the upstream, as the core's [`Course`] sets it: each step carried out
//! here (the ordering guard's decision, the token's use, then out on the router path or a
//! detached exchange), a step that refuses the request ending it with its claim released.

use super::*;

/// Where a request goes once its course (the core's [`Course`]) is run.
pub(super) enum AfterUse {
    /// Go on with the claim it holds (released if a step refuses it).
    Forward {
        key: StorageKey,
        owner: OwnerToken,
        held: Option<Held>,
    },
    /// No key on an optional-key route: forward without idempotency.
    PassThrough,
    /// The failure mode forwards without protection (already counted).
    Unprotected,
}

/// A request on its way upstream: the steps still ahead of it, where it goes after them, and the
/// ordering guard's claim on its resource once the guard has let it on.
pub(super) struct Going {
    pub(super) course: Course<Ordering>,
    pub(super) after: AfterUse,
    pub(super) order: Option<OrderClaim>,
}

/// What the ordering guard's step needs: the event, and the delivery id's claim it belongs to.
pub(super) struct Ordering {
    pub(super) ordered: Ordered,
    pub(super) key: StorageKey,
    pub(super) owner: OwnerToken,
}

impl Filter {
    /// Takes the request's next step.
    pub(super) fn go(&mut self, mut going: Going) -> Action {
        match going.course.step() {
            Step::Order(ordering) => self.begin_order(going, ordering),
            Step::UseToken(token) => self.use_token(&token, going),
            Step::Go => self.go_on(going),
        }
    }

    /// The course is run: the request goes out.
    fn go_on(&mut self, going: Going) -> Action {
        match going.after {
            AfterUse::Forward {
                key,
                owner,
                held: Some(held),
            } => self.detach(key, owner, held, going.order),
            AfterUse::Forward {
                key,
                owner,
                held: None,
            } => {
                self.stage = Stage::Forwarded(Forwarded {
                    key,
                    owner,
                    order: going.order,
                    answer: None,
                });
                Action::Continue
            }
            AfterUse::PassThrough => {
                self.count(Counter::Passthrough);
                self.stage = Stage::Idle;
                Action::Continue
            }
            AfterUse::Unprotected => {
                self.stage = Stage::Idle;
                Action::Continue
            }
        }
    }

    /// A step refused the request before it was sent: the upstream never saw it, so the claim it
    /// holds is released (and its ordering slot given back).
    pub(super) fn not_forwarded(&mut self, going: Going) {
        if let AfterUse::Forward { key, owner, .. } = going.after {
            self.finish_claim(key, owner, ResponseFacts::NeverReached, DoubtCause::Other);
        }
        if let Some(claim) = going.order {
            order::settle(&self.shared, claim, false, true);
        }
    }
}
