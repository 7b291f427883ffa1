//! The sequencer: two events racing on one resource of an ordered callback route, every
//! interleaving of their host-call steps through the filter's `.wasm` (the invariants:
//! `explore::order`).

use crate::support::filter;
use idemgate_host_tests::explore::order::{check, event};
use idemgate_host_tests::explore::{every_schedule_checked, Coverage, Plan};

fn all(plan: &Plan) -> Coverage {
    let coverage = every_schedule_checked(plan, &filter(), 50_000, check)
        .unwrap()
        .unwrap_or_else(|v| panic!("{v}"));
    assert!(coverage.exhaustive, "{coverage:?}");
    println!("{coverage:?}");
    coverage
}

#[test]
fn two_events_that_both_apply_from_the_first_state() {
    // Payment then cancellation both apply (unpaid → paid → cancelled); cancellation first makes
    // the payment illegal. Racing, one waits (busy) or is decided after the other.
    let coverage = all(&Plan::ordered(vec![
        event("a", "payment.succeeded"),
        event("b", "order.cancelled"),
    ]));
    assert!(coverage.schedules > 2, "{coverage:?}");
}

#[test]
fn two_deliveries_of_one_transition() {
    // Two payment events for one transition (providers send both kinds): one applies, the other
    // is already applied or busy, never a second application.
    all(&Plan::ordered(vec![
        event("a", "payment.succeeded"),
        event("b", "payment.succeeded"),
    ]));
}

#[test]
fn an_early_event_racing_the_one_it_waits_for() {
    // Shipping races the payment it needs: applied after it, or sent back early (or busy).
    all(&Plan::ordered(vec![
        event("a", "order.shipped"),
        event("b", "payment.succeeded"),
    ]));
}
