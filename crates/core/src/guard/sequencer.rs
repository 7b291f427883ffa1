//! What the edge does with the sequencer's outcome (the HTTP meaning of each
//! decision mapped once, in the core): the event goes on — claiming its resource when it applies
//! — or is answered here, with the failure modes for a store that is full or failed; and the
//! events a host counts. Both stores' outcomes (the local one's at once, the store service's by
//! callout) come through here: [`begin`] and [`settle`] are the guard's steps on either store,
//! the host only saying where the record is ([`OrderStore`]) and moving the bytes.

use crate::answer::order::{order_answer, OrderAnswer};
use crate::answer::{answer_for, EdgeAnswer};
use crate::guard::{over_share, Event, Events, Ruling};
use crate::order::BeginOutcome;
use crate::policy::{FailureMode, Policy};
use crate::store::protocol::ProtocolError;
use alloc::string::String;

mod begin;
mod note;
mod probe;
mod settle;
#[cfg(test)]
mod steps_tests;

pub use begin::begin;
pub use begin::AskedBegin;
pub use begin::BeginStep;
pub use begin::Begun;
pub use begin::Claimed;
pub use begin::OrderStore;
pub use note::OrderNote;
pub use probe::applies;
pub(crate) use probe::settlement;
pub use probe::Ordered;
pub use probe::Probe;
pub use settle::settle;
pub use settle::settle_answered;
pub use settle::settle_unsent;
pub use settle::SettleStep;
pub use settle::Settled;

/// The event applies: it is let on with the resource claimed, which moves to `to` once a 2xx
/// answer comes back (the host keeps it with the claim's key and owner).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Applies {
    pub(crate) to: String,
}

/// The decision for the sequencer's `outcome`, and what to count.
pub(crate) fn decide(
    policy: &Policy,
    outcome: Result<BeginOutcome, &ProtocolError>,
) -> (Ruling<Applies>, Events) {
    let counted = |decision, event| (decision, Events::of(&[event]));
    // A failure mode: the event goes on without the sequencer (its delivery id's claim
    // still holds), or the edge answers.
    let failing = |mode, edge: EdgeAnswer<'_>| match mode {
        FailureMode::PassThrough => Ruling::Forward(None),
        FailureMode::Reject => Ruling::Answer(answer_for(&edge, policy)),
    };
    let outcome = match outcome {
        Ok(outcome) => outcome,
        // A state no filter sealed decides nothing, and the failure mode does not apply either:
        // passing the event on would skip the ordering the record may truly hold.
        Err(e) if !e.allows_failure_mode() => {
            let decision =
                Ruling::Answer(order_answer(&OrderAnswer::RecordCorrupt, &policy.problems));
            return counted(decision, Event::RecordCorrupt);
        }
        Err(e) => {
            let decision = failing(policy.on_store_error, EdgeAnswer::StoreFailed(e));
            return counted(decision, Event::StoreError);
        }
    };
    if let Some(edge) = OrderAnswer::of(&outcome) {
        let event = match &outcome {
            BeginOutcome::AlreadyApplied { .. } => Event::OrderAlreadyApplied,
            BeginOutcome::Illegal { .. } => Event::OrderIllegal,
            BeginOutcome::Early { .. } => Event::OrderEarly,
            BeginOutcome::Busy { .. } => Event::OrderBusy,
            _ => Event::OrderStateUnknown,
        };
        return counted(Ruling::Answer(order_answer(&edge, &policy.problems)), event);
    }
    match outcome {
        BeginOutcome::Apply { to } => {
            counted(Ruling::Forward(Some(Applies { to })), Event::OrderForwarded)
        }
        BeginOutcome::ForwardEarly => counted(Ruling::Forward(None), Event::OrderForwardedEarly),
        BeginOutcome::StoreFull { retry_after } => counted(
            failing(policy.on_store_full, EdgeAnswer::StoreFull { retry_after }),
            Event::StoreFull,
        ),
        // Counted as a claim's refusal is, by the share that refused.
        BeginOutcome::QuotaExceeded { retry_after, share } => (
            Ruling::Answer(answer_for(
                &EdgeAnswer::QuotaExceeded { retry_after },
                policy,
            )),
            over_share(share),
        ),
        // Not named by the table (or answered above): handled as without `order`.
        _ => (Ruling::Forward(None), Events::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreError;
    use crate::time::Span;
    use alloc::string::ToString;

    fn policy(mode: FailureMode) -> Policy {
        let mut policy = Policy::defaults();
        policy.on_store_error = mode;
        policy.on_store_full = mode;
        policy
    }

    fn status(decision: &Ruling<Applies>) -> Option<u16> {
        match decision {
            Ruling::Answer(http) => Some(http.status),
            Ruling::Forward(_) => None,
        }
    }

    #[test]
    fn each_outcome_is_let_on_or_answered_and_counted_once() {
        let retry_after = Span::from_secs(3);
        let state = || "paid".to_string();
        let cases = [
            (
                BeginOutcome::Apply { to: state() },
                None,
                Some(Event::OrderForwarded),
            ),
            (
                BeginOutcome::ForwardEarly,
                None,
                Some(Event::OrderForwardedEarly),
            ),
            (BeginOutcome::NotOrdered, None, None),
            (
                BeginOutcome::AlreadyApplied { state: state() },
                Some(200),
                Some(Event::OrderAlreadyApplied),
            ),
            (
                BeginOutcome::Illegal {
                    state: state(),
                    terminal: true,
                },
                Some(200),
                Some(Event::OrderIllegal),
            ),
            (
                BeginOutcome::Early { retry_after },
                Some(409),
                Some(Event::OrderEarly),
            ),
            (
                BeginOutcome::Busy { retry_after },
                Some(409),
                Some(Event::OrderBusy),
            ),
            (
                BeginOutcome::UnknownState { state: state() },
                Some(500),
                Some(Event::OrderStateUnknown),
            ),
            (
                BeginOutcome::QuotaExceeded {
                    retry_after,
                    share: None,
                },
                Some(429),
                Some(Event::QuotaExceeded),
            ),
            (
                BeginOutcome::StoreFull { retry_after },
                Some(503),
                Some(Event::StoreFull),
            ),
        ];
        for (outcome, answered, event) in cases {
            let name = outcome.name();
            let applies = matches!(outcome, BeginOutcome::Apply { .. });
            let (decision, events) = decide(&policy(FailureMode::Reject), Ok(outcome));
            assert_eq!(status(&decision).is_some(), answered.is_some(), "{name}");
            if let (Some(got), Some(want)) = (status(&decision), answered) {
                // Acknowledged events are 2xx; the rest as the core's answers say.
                assert_eq!(got / 100, want / 100, "{name}: {got}");
            }
            assert_eq!(
                events.iter().collect::<alloc::vec::Vec<_>>(),
                event.into_iter().collect::<alloc::vec::Vec<_>>(),
                "{name}"
            );
            assert_eq!(
                matches!(decision, Ruling::Forward(Some(Applies { .. }))),
                applies,
                "{name}: only an event that applies claims its resource"
            );
        }
    }

    #[test]
    fn a_full_or_failed_store_follows_its_failure_mode() {
        let full = || BeginOutcome::StoreFull {
            retry_after: Span::from_secs(1),
        };
        let failed = ProtocolError::Store(StoreError::Unavailable("down".into()));
        let pass = policy(FailureMode::PassThrough);
        assert_eq!(decide(&pass, Ok(full())).0, Ruling::Forward(None));
        assert_eq!(decide(&pass, Err(&failed)).0, Ruling::Forward(None));
        let reject = policy(FailureMode::Reject);
        assert_eq!(status(&decide(&reject, Err(&failed)).0), Some(503));
        let (_, events) = decide(&reject, Err(&failed));
        assert_eq!(
            events.iter().collect::<alloc::vec::Vec<_>>(),
            [Event::StoreError]
        );
    }

    #[test]
    fn a_state_that_fails_its_seal_is_a_503_in_every_failure_mode() {
        let tampered = ProtocolError::Tampered(crate::record::seal::SealError::Mismatch);
        for mode in [FailureMode::PassThrough, FailureMode::Reject] {
            let (decision, events) = decide(&policy(mode), Err(&tampered));
            let Ruling::Answer(http) = decision else {
                panic!("{mode:?}: never forwarded")
            };
            assert_eq!(http.status, 503, "{mode:?}");
            assert!(
                String::from_utf8_lossy(&http.body).contains("order_record_corrupt"),
                "{mode:?}"
            );
            assert_eq!(
                http.header(crate::order::ORDER_HEADER),
                None,
                "not acknowledged"
            );
            assert_eq!(
                events.iter().collect::<alloc::vec::Vec<_>>(),
                [Event::RecordCorrupt]
            );
        }
    }
}
