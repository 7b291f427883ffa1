use super::*;
use alloc::string::ToString;

#[test]
fn an_owned_copy_answers_as_the_original() {
    let copy = SUBMIT_LIFECYCLE.to_owned_strings();
    assert_eq!(copy.validate(), Ok(()));
    assert!(copy.states().eq(SUBMIT_LIFECYCLE.states()));
    for state in SUBMIT_LIFECYCLE.states() {
        assert_eq!(copy.is_terminal(state), SUBMIT_LIFECYCLE.is_terminal(state));
        for (_, event, _) in SUBMIT_LIFECYCLE.edges() {
            assert_eq!(copy.on(state, event), SUBMIT_LIFECYCLE.on(state, event));
            assert_eq!(
                copy.arrival(state, event),
                SUBMIT_LIFECYCLE.arrival(state, event)
            );
        }
    }
}

/// Written without `write!`, the texts read as the `{:?}`-quoted ones did for plain names.
#[test]
fn table_error_texts_are_pinned() {
    let name = || String::from("paid");
    let cases = [
        (
            TableError::DuplicateState(name()),
            r#"state "paid" is listed twice"#,
        ),
        (
            TableError::UnknownState(name()),
            r#"state "paid" is not in the state list"#,
        ),
        (
            TableError::DuplicateTransition {
                from: name(),
                event: "ship".into(),
            },
            r#"event "ship" has two transitions from "paid""#,
        ),
        (
            TableError::TerminalHasTransition(name()),
            r#"terminal state "paid" has an outgoing transition"#,
        ),
        (TableError::Empty, "a table needs at least one transition"),
        (TableError::Malformed("not JSON"), "not JSON"),
        (
            TableError::UnknownField("terminals".into()),
            r#"a table has no member "terminals""#,
        ),
    ];
    for (error, text) in cases {
        assert_eq!(error.message(), text);
        assert_eq!(error.to_string(), text);
    }
}

#[test]
fn entity_tag_grammar() {
    assert_eq!(
        entity_tag(b"\"a,b\" x"),
        Some((false, &b"a,b"[..], &b" x"[..]))
    );
    assert_eq!(entity_tag(b"W/\"\""), Some((true, &b""[..], &b""[..])));
    assert_eq!(
        entity_tag(b"\"\x80\xff\""),
        Some((false, &b"\x80\xff"[..], &b""[..]))
    );
    for bad in [&b"\"a b\""[..], b"\"a\x7f\"", b"\"open", b"W/x", b"w/\"a\""] {
        assert_eq!(entity_tag(bad), None, "{bad:?}");
    }
}
