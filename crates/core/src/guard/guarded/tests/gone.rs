//! The client gone at each point of a guarded request's life: what it held is given back, and
//! nothing is answered to nobody.

use super::*;

#[test]
fn a_claim_won_after_the_client_left_is_released_and_nothing_answered() {
    let policy = Policy::defaults();
    let mut machine = asked(&policy, RouteKind::Api, Course::claimed(None, None), None);
    machine.gone();
    assert!(
        machine.is_orphaned(),
        "it still waits for the store's answer"
    );
    let (acts, events) = given!(machine.answered(Reply::Claim(forwarded()), &policy));
    assert_eq!(events, [Event::Claimed]);
    assert!(
        matches!(
            &acts[..],
            [Action::Finish {
                key: KEY,
                owner: OWNER,
                facts: ResponseFacts::NeverReached,
                ..
            }]
        ),
        "{acts:?}"
    );
    assert!(!machine.is_orphaned() && !machine.expects_more());
}

#[test]
fn an_event_let_on_after_the_client_left_gives_back_both_claims() {
    let policy = Policy::defaults();
    let course = Course::claimed(Some(ordered()), Some(TOKEN));
    let mut machine = asked(&policy, RouteKind::Callback, course, None);
    let (acts, _) = given!(machine.answered(Reply::Claim(forwarded()), &policy));
    assert!(matches!(&acts[..], [Action::Sequence { .. }]), "{acts:?}");
    machine.gone();
    // The event would apply (resource claim 7): the token is never used, both are given back.
    let (acts, _) = given!(machine.ordered(Ruling::Forward(Some(7))));
    assert!(
        matches!(
            &acts[..],
            [
                Action::Finish {
                    facts: ResponseFacts::NeverReached,
                    ..
                },
                Action::SettleResource {
                    claim: 7,
                    applied: false
                }
            ]
        ),
        "{acts:?}"
    );
}

#[test]
fn a_refusal_after_the_client_left_is_not_answered() {
    let policy = Policy::defaults();
    let mut machine = asked(&policy, RouteKind::Api, Course::claimed(None, None), None);
    machine.gone();
    let conflict = Ok(ClaimOutcome::Conflict {
        retry_after: Span::from_secs(1),
    });
    let (acts, _) = given!(machine.answered(Reply::Claim(conflict), &policy));
    assert!(acts.is_empty(), "{acts:?}");
}

#[test]
fn an_event_in_doubt_keeps_its_resource_claimed_until_the_lease_ends() {
    let policy = Policy::defaults();
    let start = || {
        let course = Course::claimed(Some(ordered()), None);
        let mut machine = asked(&policy, RouteKind::Callback, course, None);
        let (acts, _) = given!(machine.answered(Reply::Claim(forwarded()), &policy));
        assert!(matches!(&acts[..], [Action::Sequence { .. }]), "{acts:?}");
        let _ = given!(machine.ordered(Ruling::Forward(Some(7))));
        machine
    };
    // Reset, timed out, or the client gone mid-answer: the event may still be running, so its
    // resource is not given back (no SettleOrder): a second event for it is busy meanwhile.
    for cause in [
        DoubtCause::UpstreamReset,
        DoubtCause::UpstreamTimeout,
        DoubtCause::ClientGone,
    ] {
        let mut machine = start();
        let (acts, _) = given!(machine.ended(false, || (ResponseFacts::InDoubt, cause)));
        assert!(
            matches!(
                &acts[..],
                [Action::Finish {
                    facts: ResponseFacts::InDoubt,
                    ..
                }]
            ),
            "{cause:?}: {acts:?}"
        );
    }
    // An answer settles it: applied by a 2xx, given back otherwise.
    for (status, applied) in [(&b"201"[..], true), (&b"500"[..], false)] {
        let mut machine = start();
        let _ = given!(machine.upstream_head(Capture::head([(":status", status)], &policy)));
        let (acts, _) = given!(machine.ended(true, || panic!("complete")));
        assert!(
            acts.contains(&Action::SettleResource { claim: 7, applied }),
            "{acts:?}"
        );
    }
    // Never sent (Envoy answered itself): nothing ran, so the resource is free again.
    let mut machine = start();
    let (acts, _) =
        given!(machine.ended(false, || (ResponseFacts::NeverReached, DoubtCause::Other)));
    assert!(
        acts.contains(&Action::SettleResource {
            claim: 7,
            applied: false
        }),
        "{acts:?}"
    );
}
