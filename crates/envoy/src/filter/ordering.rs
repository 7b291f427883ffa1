//! The filter's side of the ordering guard (issue 26): a claimed request goes on once
//! [`crate::order`] has decided its event — forwarded (with the resource's claim to settle when
//! the upstream answers), answered at the edge (its delivery id released), or paused for the
//! remote store's answer.

use super::{AfterUse, Filter, Held, Stage};
use crate::abi::Action;
use crate::order::Began;
use crate::origin::DoubtCause;
#[allow(unused_imports)]
use crate::prelude::*;
use idemgate_core::decision::ResponseFacts;
use idemgate_core::guard::VerifiedToken;
use idemgate_core::record::OwnerToken;
use idemgate_core::scope::StorageKey;

/// A claimed request waiting for the remote store's ordering decision (callout `call`).
pub(super) struct OrderWait {
    pub(super) call: u32,
    pub(super) key: StorageKey,
    pub(super) owner: OwnerToken,
    pub(super) token: Option<VerifiedToken>,
    pub(super) held: Option<Held>,
}

impl Filter {
    /// Goes on with a claimed request once the ordering guard (if any) has decided its event.
    pub(super) fn forward_ordered(&mut self, wait: OrderWait, began: Option<Began>) -> Action {
        let OrderWait {
            key,
            owner,
            token,
            held,
            ..
        } = wait;
        let order = match began {
            None | Some(Began::Forward(None)) => None,
            Some(Began::Forward(Some(claim))) => Some(claim),
            Some(Began::Answer(http)) => {
                // Nothing ran: the delivery id is free for the sender's next delivery.
                self.finish_claim(key, owner, ResponseFacts::NeverReached, DoubtCause::Other);
                return self.send(&http);
            }
            Some(Began::Pending(call)) => {
                let wait = OrderWait {
                    call,
                    key,
                    owner,
                    token,
                    held,
                };
                self.stage = Stage::Ordering(Box::new(wait));
                return Action::Pause;
            }
        };
        let after = AfterUse::Forward {
            key,
            owner,
            held,
            order,
        };
        match &token {
            Some(claims) => self.use_token(claims, after),
            None => self.go_on(after),
        }
    }

    /// The remote store answered the ordering guard's begin for this request.
    pub fn order_answered(&mut self, began: Began) {
        let Stage::Ordering(wait) = core::mem::replace(&mut self.stage, Stage::Idle) else {
            return;
        };
        let action = self.forward_ordered(*wait, Some(began));
        self.resume(action);
    }
}
