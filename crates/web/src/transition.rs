//! State tables (semantics §8, §9): the core's submit-button lifecycle drives the JS submit guard;
//! the order table is this package's example of a business table (the core ships none).

use crate::error::{CodedError, JsResult, INVALID_ARGUMENT};
use crate::object::{Json, Member};
use alloc::string::String;
use idemgate_core::transition::{StateTable, Transition, SUBMIT_LIFECYCLE};
use wasm_bindgen::prelude::*;

/// An example business table: unpaid → paid → shipped; unpaid/paid → cancelled.
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

/// The answer of built-in `table` (`"submit"` or `"order"`) for `event` at `state`:
/// `{outcome: "apply", state: next}` when the event applies, `{outcome: "already_applied", state}`
/// when it was applied before (the state stays); a rejection throws with the core's code
/// (`transition_illegal`, `transition_unknown_state`, `transition_unknown_event`).
#[wasm_bindgen]
pub fn transition(table: &str, state: &str, event: &str) -> JsResult<JsValue> {
    let (outcome, to) = match answer(table, state, event)? {
        Some(next) => ("apply", next),
        None => ("already_applied", String::from(state)),
    };
    let object = Json::object(&[
        ("outcome", Member::Text(outcome)),
        ("state", Member::Text(&to)),
    ]);
    Ok(object.into_js())
}

/// The next state, or `None` when the event was already applied.
pub fn answer(table: &str, state: &str, event: &str) -> Result<Option<String>, CodedError> {
    let table: &StateTable = match table {
        "submit" => &SUBMIT_LIFECYCLE,
        "order" => &ORDER_LIFECYCLE,
        _ => {
            return Err(CodedError::new(
                INVALID_ARGUMENT,
                "unknown state table: use submit or order",
            ))
        }
    };
    match table.on(state, event) {
        Transition::Apply { to } => Ok(Some(String::from(to))),
        Transition::AlreadyApplied => Ok(None),
        Transition::Reject(e) => {
            // Concatenated rather than `format!`ed, and the core's `message()` rather than
            // `to_string()`: no `core::fmt` in the module.
            let mut message = String::from("\"");
            for part in [event, "\" at \"", state, "\": ", e.message()] {
                message.push_str(part);
            }
            Err(CodedError::new(e.code(), message))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn submit_lifecycle() {
        assert_eq!(
            answer("submit", "idle", "submit"),
            Ok(Some("in_flight".into()))
        );
        assert_eq!(answer("submit", "in_flight", "submit"), Ok(None));
        assert_eq!(
            answer("submit", "succeeded", "reset"),
            Ok(Some("idle".into()))
        );
        let code = |r: Result<Option<String>, CodedError>| r.map_err(|e| e.code);
        assert_eq!(
            code(answer("submit", "idle", "succeed")),
            Err("transition_illegal")
        );
        assert_eq!(
            code(answer("submit", "gone", "submit")),
            Err("transition_unknown_state")
        );
        assert_eq!(
            code(answer("submit", "idle", "fly")),
            Err("transition_unknown_event")
        );
        assert_eq!(
            code(answer("cart", "idle", "submit")),
            Err(INVALID_ARGUMENT)
        );
        assert_eq!(answer("order", "shipped", "pay"), Ok(None));
        assert_eq!(
            code(answer("order", "cancelled", "pay")),
            Err("transition_illegal")
        );
        assert_eq!(ORDER_LIFECYCLE.validate(), Ok(()));
        assert_eq!(
            code(answer("record", "absent", "claim")),
            Err(INVALID_ARGUMENT)
        );
    }
}
