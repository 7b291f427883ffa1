//! State tables (`docs/semantics.md` §8, §9): an application's own tables, declared as data in the
//! one format the edge's `routes[].order.table` reads
//! (`idemgate_core::order::transition::DeclaredTable`), and the core's submit-button lifecycle that
//! drives the JS submit guard. The core validates the table and answers every event; this module
//! only carries names across the boundary.

use crate::error::{CodedError, JsResult};
use crate::object::{Json, Member};
use crate::outline::{self, Unread};
use alloc::string::String;
use alloc::vec::Vec;
use idemgate_core::order::transition::StateTable as CoreTable;
use idemgate_core::order::transition::{
    Arrival, DeclaredTable, TableError, Transition, SUBMIT_LIFECYCLE,
};
use idemgate_json::Value;
use wasm_bindgen::prelude::*;

/// A table the core validated. In JS (the package wraps it in its own `StateTable` class):
///
/// ```js
/// const table = StateTable.declare(text, shape);  // the outline of {"transitions": [["unpaid", "pay", "paid"]]}
/// table.describe();                          // {initial: "unpaid", states: [..], terminal: [..]}
/// table.answer("unpaid", "pay", false);      // {outcome: "apply", state: "paid"}   (`on`)
/// table.answer("paid", "ship", true);        // {outcome: "early", state: "paid"}   (`arrival`)
/// ```
///
/// One `answer` export for both questions instead of two keeps the JS glue small.
#[wasm_bindgen]
pub struct StateTable {
    table: Table,
}

/// Which table: the core's built-in submit lifecycle (copied to own its strings, so the rules are
/// compiled once, for `String`: see `to_owned_strings`), or one declared as data.
enum Table {
    Submit {
        rules: CoreTable<String>,
        initial: &'static str,
    },
    Declared(DeclaredTable),
}

impl Table {
    fn rules(&self) -> &CoreTable<String> {
        match self {
            Table::Submit { rules, .. } => rules,
            Table::Declared(declared) => declared.table(),
        }
    }

    fn initial(&self) -> &str {
        match self {
            Table::Submit { initial, .. } => initial,
            Table::Declared(declared) => declared.initial(),
        }
    }
}

#[wasm_bindgen]
impl StateTable {
    /// A table from its declaration as JS parsed it (`text` and `shape`: the value's outline, see
    /// [`crate::outline`]; an empty outline when the text was not JSON). The core's
    /// `DeclaredTable::from_value` validates it, as it does a route's `order.table`; a refused one
    /// throws the core's `transition_table_*` code with its message.
    pub fn declare(text: &[u8], shape: &[u32]) -> JsResult<StateTable> {
        Ok(StateTable::read(text, shape)?)
    }

    /// The core's submit-button lifecycle. It declares no initial state: it starts where a
    /// declaration without `initial` starts, at its first state (`idle`); a table without states
    /// would be the core's `transition_table_empty`.
    pub fn submit() -> JsResult<StateTable> {
        let Some(initial) = SUBMIT_LIFECYCLE.states().next() else {
            let empty = TableError::Empty;
            return Err(CodedError::new(empty.code(), empty.message()).into());
        };
        let rules = SUBMIT_LIFECYCLE.to_owned_strings();
        Ok(StateTable {
            table: Table::Submit { rules, initial },
        })
    }

    /// `{initial, states, terminal}`: the state a new object starts in, every state and the
    /// terminal ones, in the table's order.
    pub fn describe(&self) -> JsValue {
        self.shape().into_js()
    }

    /// `event` at `state`: with `arrival` false as an application applies it (`on`), with
    /// `arrival` true as an order-guarded edge decides (`arrival`). See [`StateTable::step`].
    pub fn answer(&self, state: &str, event: &str, arrival: bool) -> JsResult<JsValue> {
        let (outcome, to) = self.step(state, event, arrival)?;
        let object = Json::object(&[
            ("outcome", Member::Text(outcome)),
            ("state", Member::Text(to)),
        ]);
        Ok(object.into_js())
    }
}

impl StateTable {
    /// A declared table from an outline (see [`StateTable::declare`]).
    pub fn read(text: &[u8], shape: &[u32]) -> Result<StateTable, CodedError> {
        let declared = match outline::read(text, shape) {
            Ok(value) => DeclaredTable::from_value(&value),
            Err(Unread::NotJson) => Err(TableError::NOT_JSON),
            Err(Unread::Broken(e)) => return Err(e),
        };
        match declared {
            Ok(declared) => Ok(StateTable {
                table: Table::Declared(declared),
            }),
            Err(e) => Err(CodedError::new(e.code(), e.message())),
        }
    }

    /// A declared table from JSON text, read as the JS layer reads it (`JSON.parse`, then the
    /// outline) — for Rust callers and tests; the module's export is [`StateTable::declare`].
    pub fn parse(text: &str) -> Result<StateTable, CodedError> {
        let Ok(value) = Value::parse(text) else {
            return StateTable::read(&[], &[]);
        };
        let (mut bytes, mut shape) = (Vec::new(), Vec::new());
        outline::write(&value, &mut bytes, &mut shape);
        StateTable::read(&bytes, &shape)
    }

    /// The outcome's name and the state after it: `apply` and the next state; `already_applied`,
    /// and with `arrival` also `early` and `illegal`, with `state` unchanged. A rejection is the
    /// core's `transition_*` code (with `arrival`, only an unknown state or event is rejected).
    pub fn step<'a>(
        &'a self,
        state: &'a str,
        event: &str,
        arrival: bool,
    ) -> Result<(&'static str, &'a str), CodedError> {
        let table = self.table.rules();
        let arrived = if arrival {
            table.arrival(state, event)
        } else {
            from_transition(table.on(state, event))
        };
        match arrived {
            Arrival::Apply { to } => Ok(("apply", to)),
            Arrival::Reject(e) => {
                // Concatenated rather than `format!`ed, and the core's `message()` rather than
                // `to_string()`: no `core::fmt` in the module.
                let mut message = String::from("\"");
                for part in [event, "\" at \"", state, "\": ", e.message()] {
                    message.push_str(part);
                }
                Err(CodedError::new(e.code(), message))
            }
            other => Ok((other.name(), state)),
        }
    }

    /// The declaration's shape as JSON: `{"initial":..,"states":[..],"terminal":[..]}`.
    pub fn shape(&self) -> Json {
        let table = self.table.rules();
        let mut out = Json(String::with_capacity(128));
        out.raw("{\"initial\":");
        out.string(self.table.initial());
        out.raw(",\"states\":");
        out.strings(table.states());
        out.raw(",\"terminal\":");
        out.strings(table.states().filter(|s| table.is_terminal(s)));
        out.raw("}");
        out
    }
}

/// `on`'s answer in `arrival`'s terms: the same outcomes, an illegal event still a rejection.
fn from_transition(transition: Transition<'_>) -> Arrival<'_> {
    match transition {
        Transition::Apply { to } => Arrival::Apply { to },
        Transition::AlreadyApplied => Arrival::AlreadyApplied,
        Transition::Reject(e) => Arrival::Reject(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDER: &str = r#"{"initial": "unpaid", "transitions": [
        ["unpaid", "payment.succeeded", "paid"], ["paid", "order.shipped", "shipped"],
        ["unpaid", "order.cancelled", "cancelled"], ["paid", "order.cancelled", "cancelled"]]}"#;

    fn code<T>(r: Result<T, CodedError>) -> Result<T, &'static str> {
        r.map_err(|e| e.code)
    }

    #[test]
    fn a_declared_table_answers_both_questions() {
        let table = StateTable::parse(ORDER).unwrap();
        let on = |s, e| code(table.step(s, e, false));
        let arrival = |s, e| code(table.step(s, e, true));
        assert_eq!(on("unpaid", "payment.succeeded"), Ok(("apply", "paid")));
        assert_eq!(
            on("shipped", "payment.succeeded"),
            Ok(("already_applied", "shipped"))
        );
        assert_eq!(on("unpaid", "order.shipped"), Err("transition_illegal"));
        assert_eq!(arrival("unpaid", "order.shipped"), Ok(("early", "unpaid")));
        assert_eq!(
            arrival("shipped", "order.cancelled"),
            Ok(("illegal", "shipped"))
        );
        assert_eq!(arrival("paid", "refund"), Err("transition_unknown_event"));
        assert_eq!(on("lost", "order.shipped"), Err("transition_unknown_state"));
        let shape = Value::parse(&table.shape().0).unwrap();
        let names = |name: &str| -> Vec<&str> {
            let list = shape.get(name).and_then(Value::as_array).unwrap();
            list.iter().filter_map(Value::as_str).collect()
        };
        assert_eq!(shape.get("initial").and_then(Value::as_str), Some("unpaid"));
        assert_eq!(names("states"), ["unpaid", "paid", "shipped", "cancelled"]);
        assert_eq!(names("terminal"), ["shipped", "cancelled"]);
    }

    #[test]
    fn a_refused_table_is_the_core_code_and_text() {
        let refused = StateTable::parse(r#"{"transitions": [["a", "go", "b"], ["a", "go", "c"]]}"#);
        let error = refused.err().unwrap();
        assert_eq!(error.code, "transition_table_duplicate_transition");
        assert_eq!(error.message, r#"event "go" has two transitions from "a""#);
        for (text, want) in [
            ("{", "transition_table_malformed"),
            ("null", "transition_table_malformed"),
            (r#"{"transitions": []}"#, "transition_table_empty"),
            (
                r#"{"terminals": [], "transitions": [["a", "go", "b"]]}"#,
                "transition_table_unknown_field",
            ),
        ] {
            assert_eq!(code(StateTable::parse(text)).err(), Some(want), "{text}");
        }
    }

    #[test]
    fn the_submit_lifecycle() {
        let submit = StateTable::submit().unwrap();
        let on = |s, e| code(submit.step(s, e, false));
        assert_eq!(on("idle", "submit"), Ok(("apply", "in_flight")));
        assert_eq!(
            on("in_flight", "submit"),
            Ok(("already_applied", "in_flight"))
        );
        assert_eq!(on("succeeded", "reset"), Ok(("apply", "idle")));
        assert_eq!(on("idle", "succeed"), Err("transition_illegal"));
        assert_eq!(on("gone", "submit"), Err("transition_unknown_state"));
        assert_eq!(on("idle", "fly"), Err("transition_unknown_event"));
        assert_eq!(
            code(submit.step("idle", "succeed", true)),
            Ok(("early", "idle"))
        );
        let shape = Value::parse(&submit.shape().0).unwrap();
        assert_eq!(shape.get("initial").and_then(Value::as_str), Some("idle"));
        let terminal = shape.get("terminal").and_then(Value::as_array);
        assert_eq!(terminal.map(|t| t.len()), Some(0));
    }
}
