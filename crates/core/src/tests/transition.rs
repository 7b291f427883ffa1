//! State tables and preconditions through the public API. The expected answers below were worked out
//! by hand from the rule in `transition.rs`'s module docs, one table cell at a time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::order::transition::{
    check_if_match, check_version, PreconditionError, StateTable, TableError, Transition,
    TransitionError, SUBMIT_LIFECYCLE,
};
use proptest::prelude::*;
use std::prelude::rust_2021::{String, ToString};

/// An example business table (unpaid → paid → shipped; unpaid/paid → cancelled): the tests' own, not
/// the core's — the core ships only the submit button's table; tables are the application's data.
static ORDER_LIFECYCLE: StateTable = StateTable::from_static(
    &["unpaid", "paid", "shipped", "cancelled"],
    &["shipped", "cancelled"],
    &[
        ("unpaid", "pay", "paid"),
        ("paid", "ship", "shipped"),
        ("unpaid", "cancel", "cancelled"),
        ("paid", "cancel", "cancelled"),
    ],
);

/// A table shaped like an idempotency record's life, for its self-loop (`take_over`) and its
/// terminal state. Only an example: the record's real life is what `decide`/`complete` do, which
/// `properties.rs` and the vectors check on the code itself.
static RECORD_LIKE: StateTable = StateTable::from_static(
    &["absent", "in_flight", "completed", "released", "expired"],
    &["completed"],
    &[
        ("absent", "claim", "in_flight"),
        ("released", "claim", "in_flight"),
        ("expired", "claim", "in_flight"),
        ("in_flight", "take_over", "in_flight"),
        ("in_flight", "complete", "completed"),
        ("in_flight", "release", "released"),
        ("in_flight", "expire", "expired"),
        ("released", "expire", "expired"),
    ],
);

const A: &str = "AA"; // already applied
const I: &str = "ILLEGAL";

fn answer(t: Transition<'_>) -> String {
    match t {
        Transition::Apply { to } => to.to_string(),
        Transition::AlreadyApplied => A.to_string(),
        Transition::Reject(TransitionError::Illegal { .. }) => I.to_string(),
        Transition::Reject(e) => e.code().to_string(),
    }
}

/// Rows: states; columns: events; cells: target state, `A` or `I`.
fn check_matrix(table: &StateTable, events: &[&str], rows: &[(&str, &[&str])]) {
    for (state, cells) in rows {
        for (event, want) in events.iter().zip(cells.iter()) {
            assert_eq!(answer(table.on(state, event)), *want, "{state} + {event}");
        }
    }
}

#[test]
fn builtin_tables_are_valid() {
    for table in [&RECORD_LIKE, &SUBMIT_LIFECYCLE, &ORDER_LIFECYCLE] {
        assert_eq!(table.validate(), Ok(()));
    }
}

#[test]
fn order_matrix() {
    check_matrix(
        &ORDER_LIFECYCLE,
        &["pay", "ship", "cancel"],
        &[
            ("unpaid", &["paid", I, "cancelled"]),
            ("paid", &[A, "shipped", "cancelled"]),
            // A payment callback after shipping was applied on the way here.
            ("shipped", &[A, A, I]),
            // An order can be cancelled unpaid, so PAY here may never have happened: reject.
            ("cancelled", &[I, I, A]),
        ],
    );
}

#[test]
fn record_matrix() {
    check_matrix(
        &RECORD_LIKE,
        &["claim", "take_over", "complete", "release", "expire"],
        &[
            ("absent", &["in_flight", I, I, I, I]),
            (
                "in_flight",
                &[A, "in_flight", "completed", "released", "expired"],
            ),
            ("completed", &[A, I, A, I, I]),
            ("released", &["in_flight", I, I, A, "expired"]),
            ("expired", &["in_flight", I, I, I, A]),
        ],
    );
}

#[test]
fn submit_matrix() {
    check_matrix(
        &SUBMIT_LIFECYCLE,
        &["submit", "succeed", "fail_retryable", "fail_final", "reset"],
        &[
            ("idle", &["in_flight", I, I, I, A]),
            // The double click: a second submit while in flight sends nothing.
            (
                "in_flight",
                &[A, "succeeded", "failed_retryable", "failed_final", A],
            ),
            ("succeeded", &[A, A, I, I, "idle"]),
            ("failed_retryable", &["in_flight", I, A, I, A]),
            ("failed_final", &[A, I, I, A, "idle"]),
        ],
    );
}

#[test]
fn repeating_an_applied_event_is_acknowledged_in_builtin_tables() {
    for table in [&RECORD_LIKE, &SUBMIT_LIFECYCLE, &ORDER_LIFECYCLE] {
        for state in [
            "absent",
            "in_flight",
            "completed",
            "released",
            "expired",
            "idle",
        ]
        .iter()
        .chain(&[
            "succeeded",
            "failed_retryable",
            "failed_final",
            "unpaid",
            "paid",
        ]) {
            for event in [
                "claim",
                "take_over",
                "complete",
                "release",
                "expire",
                "submit",
            ]
            .iter()
            .chain(&[
                "succeed",
                "fail_retryable",
                "fail_final",
                "reset",
                "pay",
                "ship",
            ]) {
                if let Transition::Apply { to } = table.on(state, event) {
                    let again = table.on(to, event);
                    assert!(
                        matches!(again, Transition::Apply { .. } | Transition::AlreadyApplied),
                        "{state} --{event}--> {to}, then {event} again: {again:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn unknown_names_and_terminal_flag() {
    let unknown = |t| matches!(t, Transition::Reject(e) if e == TransitionError::UnknownState);
    assert!(unknown(ORDER_LIFECYCLE.on("lost", "pay")));
    assert_eq!(
        ORDER_LIFECYCLE.on("paid", "refund"),
        Transition::Reject(TransitionError::UnknownEvent)
    );
    assert_eq!(
        ORDER_LIFECYCLE.on("cancelled", "pay"),
        Transition::Reject(TransitionError::Illegal { terminal: true })
    );
    assert_eq!(
        ORDER_LIFECYCLE.on("unpaid", "ship"),
        Transition::Reject(TransitionError::Illegal { terminal: false })
    );
    assert_eq!(
        TransitionError::UnknownEvent.code(),
        "transition_unknown_event"
    );
}

fn owned(
    states: &[&str],
    terminal: &[&str],
    edges: &[(&str, &str, &str)],
) -> Result<StateTable<String>, TableError> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect();
    let e = edges
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    StateTable::new(s(states), s(terminal), e)
}

#[test]
fn owned_tables_validate_and_answer_like_static_ones() {
    let err = |r: Result<StateTable<String>, TableError>| r.map(|_| ()).unwrap_err().code();
    assert_eq!(
        err(owned(&["a", "a"], &[], &[])),
        "transition_table_duplicate_state"
    );
    assert_eq!(
        err(owned(&["a"], &[], &[("a", "go", "b")])),
        "transition_table_unknown_state"
    );
    assert_eq!(
        err(owned(&["a"], &["z"], &[])),
        "transition_table_unknown_state"
    );
    let dup = owned(&["a", "b"], &[], &[("a", "go", "b"), ("a", "go", "a")]);
    assert_eq!(err(dup), "transition_table_duplicate_transition");
    let term = owned(&["a", "b"], &["b"], &[("b", "go", "a")]);
    assert_eq!(err(term), "transition_table_terminal_has_transition");

    let order = owned(
        &["unpaid", "paid", "shipped", "cancelled"],
        &["shipped", "cancelled"],
        &[
            ("unpaid", "pay", "paid"),
            ("paid", "ship", "shipped"),
            ("unpaid", "cancel", "cancelled"),
            ("paid", "cancel", "cancelled"),
        ],
    )
    .unwrap();
    for state in ["unpaid", "paid", "shipped", "cancelled", "nope"] {
        for event in ["pay", "ship", "cancel", "nope"] {
            assert_eq!(
                order.on(state, event),
                ORDER_LIFECYCLE.on(state, event),
                "{state} {event}"
            );
        }
    }
}

#[test]
fn if_match_follows_rfc9110() {
    let check =
        |h: Option<&str>, etag| check_if_match(h.map(str::as_bytes), etag).map_err(|e| e.code());
    assert_eq!(check(None, "\"v3\""), Ok(()));
    assert_eq!(check(Some("*"), "\"v3\""), Ok(()));
    assert_eq!(check(Some("\"v3\""), "\"v3\""), Ok(()));
    assert_eq!(check(Some(" \"v1\" , \"v3\" "), "\"v3\""), Ok(()));
    assert_eq!(check(Some("\"v1\",,\"v3\""), "\"v3\""), Ok(()));
    assert_eq!(check(Some("\"a,b\""), "\"a,b\""), Ok(()));
    assert_eq!(check(Some("\"v2\""), "\"v3\""), Err("precondition_failed"));
    assert_eq!(
        check(Some("W/\"v3\""), "\"v3\""),
        Err("precondition_failed")
    );
    assert_eq!(
        check(Some("\"v3\""), "W/\"v3\""),
        Err("precondition_failed")
    );
    assert_eq!(check(Some("\"V3\""), "\"v3\""), Err("precondition_failed"));
    for bad in [
        "v3",
        "\"v3",
        "",
        " , ",
        "*, \"v3\"",
        "\"v3\" \"v4\"",
        "\"a b\"",
        "w/\"v3\"",
    ] {
        assert_eq!(
            check(Some(bad), "\"v3\""),
            Err("precondition_malformed"),
            "{bad:?}"
        );
    }
}

#[test]
fn versions() {
    assert_eq!(check_version(3, 3), Ok(()));
    let conflict = check_version(3, 4).unwrap_err();
    assert_eq!(
        conflict,
        PreconditionError::VersionConflict {
            expected: 3,
            current: 4
        }
    );
    assert_eq!(conflict.code(), "version_conflict");
}

proptest! {
    /// Unknown names never panic and are reported as such.
    #[test]
    fn arbitrary_names_do_not_panic(state in "[a-z_]{0,12}", event in "[a-z_]{0,12}") {
        let answer = SUBMIT_LIFECYCLE.on(&state, &event);
        if !SUBMIT_LIFECYCLE.is_state(&state) {
            prop_assert_eq!(answer, Transition::Reject(TransitionError::UnknownState));
        }
    }
}
