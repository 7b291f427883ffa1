//! The request's promises, checked after every input and at the end of every path by the model,
//! which watches only the actions.

use super::inputs::{Input, KEY, OWNER, TOKEN};
use super::run::Run;
use idemgate_core::decision::ResponseFacts;
use idemgate_core::events::Event;
use idemgate_core::guard::{Action, Ask, Warning};
use idemgate_core::policy::{FailureMode, RouteKind};

impl Run {
    pub(crate) fn check(
        &mut self,
        actions: Vec<Action<u32, &'static str>>,
        events: &[Event],
        path: &[Input],
        input: Option<Input>,
    ) {
        let shape = self.shape;
        let at = || format!("{shape:?} {path:?} then {input:?}");
        // A claim is counted when it is won, a token's use when it is recorded; never otherwise.
        let won_now = matches!(input, Some(Input::Claim(0 | 1)));
        assert_eq!(events.contains(&Event::Claimed), won_now, "{}", at());
        let used_now = matches!(input, Some(Input::Consume(0)));
        assert_eq!(events.contains(&Event::TokenConsumed), used_now, "{}", at());
        let n = actions.len();
        for (i, action) in actions.into_iter().enumerate() {
            let seen = &mut self.seen;
            if matches!(
                action,
                Action::Ask(_) | Action::Sequence { .. } | Action::Detach { .. }
            ) {
                assert_eq!(i + 1, n, "{}: a waiting action is not the last", at());
            }
            if matches!(
                action,
                Action::Ask(_)
                    | Action::Sequence { .. }
                    | Action::Detach { .. }
                    | Action::Forward
                    | Action::Pass
                    | Action::Answer(_)
            ) {
                assert!(!seen.gone, "{}: {action:?} for a client gone", at());
            }
            match action {
                Action::Ask(Ask::Claim(claim)) => {
                    assert!(shape.keyed && seen.waits.is_none(), "{}", at());
                    assert_eq!((claim.key, claim.owner), (KEY, OWNER));
                    seen.waits = Some("claim");
                }
                // No shape here is on a route that waits for a request in flight.
                Action::Park { .. } => panic!("{}: parked where no route waits", at()),
                // Only a late signed delivery looks its key up, and no shape here is one.
                Action::Ask(Ask::Replay { .. }) => panic!("{}: a look-up, not a claim", at()),
                Action::Ask(Ask::Consume { use_key, .. }) => {
                    assert!(shape.token && !seen.consumed && !seen.fated(), "{}", at());
                    assert_eq!(use_key, TOKEN.use_key);
                    assert!(
                        !shape.ordered || !seen.won || seen.let_on,
                        "{}: token before order",
                        at()
                    );
                    seen.waits = Some("consume");
                }
                Action::Sequence { key, owner, .. } => {
                    assert!(shape.ordered && seen.won && !seen.let_on, "{}", at());
                    assert!(
                        !seen.consumed,
                        "{}: the token used before the event was let on",
                        at()
                    );
                    assert_eq!((key, owner), (KEY, OWNER));
                    seen.waits = Some("order");
                }
                Action::Forward | Action::Detach { .. } => {
                    assert!(!seen.fated(), "{}: fated twice", at());
                    assert!(seen.won, "{}: out without a claim", at());
                    assert!(
                        !shape.token || seen.consumed,
                        "{}: out before its token's use",
                        at()
                    );
                    assert!(
                        !shape.ordered || seen.let_on,
                        "{}: out before its event",
                        at()
                    );
                    if let Action::Detach {
                        key,
                        owner,
                        held,
                        order,
                    } = action
                    {
                        assert!(shape.detached, "{}", at());
                        assert_eq!((key, owner, held.held), (KEY, OWNER, "kept"));
                        assert_eq!(order, seen.resource, "{}", at());
                        seen.resource_to_exchange = order.is_some();
                        seen.out = Some("detach");
                        seen.waits = Some("send");
                    } else {
                        assert!(!shape.detached, "{}", at());
                        seen.out = Some("forward");
                    }
                }
                Action::Pass => {
                    assert!(!seen.fated(), "{}: fated twice", at());
                    assert!(!seen.won, "{}: passed while holding a claim", at());
                    assert!(
                        !shape.token || seen.consumed,
                        "{}: passed before its token's use",
                        at()
                    );
                    assert!(
                        !shape.keyed || shape.failure == FailureMode::PassThrough,
                        "{}",
                        at()
                    );
                    seen.out = Some("pass");
                }
                Action::Answer(_) => {
                    assert!(!seen.answered, "{}: answered twice", at());
                    let undone_detach = seen.out == Some("detach") && !seen.exchange;
                    assert!(
                        seen.out.is_none() || undone_detach,
                        "{}: answered after going out",
                        at()
                    );
                    seen.answered = true;
                }
                Action::Finish {
                    key, owner, facts, ..
                } => {
                    assert!(seen.won, "{}: finished a claim it did not win", at());
                    assert_eq!((key, owner), (KEY, OWNER));
                    assert!(seen.finishes.is_empty(), "{}: finished twice", at());
                    assert!(
                        !seen.exchange,
                        "{}: finished what the exchange settles",
                        at()
                    );
                    let went = seen.out == Some("forward") || seen.out == Some("detach");
                    if !went
                        || (seen.out == Some("detach") && matches!(input, Some(Input::Sent(1))))
                    {
                        assert_eq!(facts, ResponseFacts::NeverReached, "{}: never sent", at());
                    }
                    if shape.kind == RouteKind::Callback {
                        if let ResponseFacts::Upstream { status, .. } = facts {
                            assert!((200..300).contains(&status), "{}", at());
                        }
                    }
                    seen.finishes.push(facts);
                }
                Action::SettleResource { claim, applied } => {
                    assert_eq!(
                        Some(claim),
                        seen.resource,
                        "{}: settled a claim never given",
                        at()
                    );
                    assert!(seen.settles.is_empty(), "{}: settled twice", at());
                    assert!(
                        !applied
                            || (matches!(seen.headed, Some(Some(200..=299)))
                                && matches!(input, Some(Input::Ended(true)))),
                        "{}: applied without a 2xx answer come to its end",
                        at()
                    );
                    seen.settles.push(applied);
                }
                Action::MarkApplied => {
                    let head = matches!(input, Some(Input::Head(Some(200..=299))));
                    assert!(seen.resource.is_some() && head, "{}", at());
                }
                Action::Warn(Warning::OutOfOrder(_)) => {
                    panic!("{}: an awaited input said out of order", at())
                }
                Action::Warn(_) => {}
            }
        }
    }

    /// At the end of a path (nothing awaited any more): nothing the request holds is left behind.
    pub(crate) fn check_end(&self, path: &[Input]) {
        let seen = &self.seen;
        let shape = self.shape;
        assert!(
            seen.fated() || seen.gone,
            "{shape:?} {path:?}: ended without a fate"
        );
        if seen.won {
            assert!(
                seen.finishes.len() == 1 || seen.exchange,
                "{shape:?} {path:?}: a won claim left behind"
            );
        }
        if seen.resource.is_some() && seen.let_on {
            // Left to its lease only when the outcome is in doubt: the event may still run.
            let in_doubt = seen.finishes.contains(&ResponseFacts::InDoubt);
            assert!(
                seen.settles.len() == 1 || seen.exchange || seen.lost || in_doubt,
                "{shape:?} {path:?}: a resource claim left behind"
            );
            assert!(
                !in_doubt || seen.settles.is_empty(),
                "{shape:?} {path:?}: a resource given back while its event is in doubt"
            );
        }
    }
}
