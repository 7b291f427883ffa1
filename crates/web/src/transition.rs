//! State tables (semantics §8, §9): the core's submit-button lifecycle drives the JS submit guard;
//! the order table is this package's example of a business table (the core ships none).

use crate::error::{CodedError, JsResult, INVALID_ARGUMENT};
use alloc::string::{String, ToString};
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

/// The answer of built-in `table` (`"submit"` or `"order"`) for `event` at `state`: the next state
/// when the event applies, `undefined` when it was already applied (the state stays); a rejection
/// throws with the core's code (`transition_illegal`, `transition_unknown_state`,
/// `transition_unknown_event`).
#[wasm_bindgen]
pub fn transition(table: &str, state: &str, event: &str) -> JsResult<Option<String>> {
    Ok(answer(table, state, event)?)
}

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
            // Concatenated rather than `format!`ed: the error's text is the only formatting left.
            let mut message = String::from("\"");
            for part in [event, "\" at \"", state, "\": "] {
                message.push_str(part);
            }
            message.push_str(&e.to_string());
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
