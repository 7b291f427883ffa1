//! The filter's side of the ordering guard (issue 26): the course's ordering step. A claimed
//! request goes on once [`crate::order`] has decided its event — on its course (with the
//! resource's claim to settle when the upstream answers), answered at the edge (its delivery id
//! released), or paused for the remote store's answer.

use super::{Filter, Going, Ordering, Stage};
use crate::abi::Action;
use crate::order::{self, Began};
use crate::origin::DoubtCause;
#[allow(unused_imports)]
use crate::prelude::*;
use idemgate_core::decision::ResponseFacts;
use idemgate_core::record::OwnerToken;
use idemgate_core::scope::StorageKey;

/// A claimed request waiting for the remote store's ordering decision (callout `call`).
pub(super) struct OrderWait {
    pub(super) call: u32,
    /// The delivery id's claim, released if the guard answers the request.
    key: StorageKey,
    owner: OwnerToken,
    going: Going,
}

impl Filter {
    /// The ordering guard decides the request's event.
    pub(super) fn begin_order(&mut self, going: Going, ordering: Ordering) -> Action {
        let Ordering {
            ordered,
            key,
            owner,
        } = ordering;
        let began = order::begin(&self.shared, ordered, self.context_id, (key, owner));
        self.ordered(began, key, owner, going)
    }

    /// Goes on with the request as the ordering guard decided.
    fn ordered(
        &mut self,
        began: Began,
        key: StorageKey,
        owner: OwnerToken,
        mut going: Going,
    ) -> Action {
        match began {
            Began::Forward(claim) => {
                going.order = claim;
                self.go(going)
            }
            Began::Answer(http) => {
                // Nothing ran: the delivery id is free for the sender's next delivery.
                self.finish_claim(key, owner, ResponseFacts::NeverReached, DoubtCause::Other);
                self.send(&http)
            }
            Began::Pending(call) => {
                let wait = OrderWait {
                    call,
                    key,
                    owner,
                    going,
                };
                self.stage = Stage::Ordering(Box::new(wait));
                Action::Pause
            }
        }
    }

    /// The remote store answered the ordering guard's begin for this request.
    pub fn order_answered(&mut self, began: Began) {
        let Stage::Ordering(wait) = core::mem::replace(&mut self.stage, Stage::Idle) else {
            return;
        };
        let OrderWait {
            key, owner, going, ..
        } = *wait;
        let action = self.ordered(began, key, owner, going);
        self.resume(action);
    }
}
