//! Group `transition`:
//! - `{"table":"submit" | {"states":[..],"terminal":[..],"transitions":[[from,event,to],..]},
//!   "state":..,"event":..}` → `{"apply": to}`, `"already_applied"`, or the transition error code
//!   (a table given as data is built with `StateTable::new`: a refused table is its table error
//!   code). The core's only built-in table is the submit button's; example tables (an order's
//!   life) are data in the vectors;
//! - `{"op":"if_match","if_match": value or null,"etag":..}` → `true` or the precondition code;
//! - `{"op":"version","expected":n,"current":n}` → `true` or the precondition code;
//! - `{"op":"arrival","table":..,"state":..,"event":..}` → what the event does at an
//!   order-guarded edge: `{"apply": to}`, `"already_applied"`, `"early"`, `"illegal"`, or the
//!   transition error code (`StateTable::arrival`);
//! - `{"op":"declare","table":..}` → `{"initial":..,"states":n,"terminal":[..]}` of the declared
//!   table, or its table error code (`DeclaredTable`, the format routes and the browser read).
//!
//! A table given as data is read as a declaration (`DeclaredTable::from_value`).

use crate::conformance::{opt_str_field, str_field, u64_field, Outcome};
use crate::order::transition::{
    check_if_match, check_version, Arrival, DeclaredTable, Transition, SUBMIT_LIFECYCLE,
};
use crate::request::json::Value;
use alloc::string::String;
use alloc::vec::Vec;

pub fn eval(input: &Value) -> Outcome {
    let checked = match opt_str_field(input, "op")? {
        None => return on(input),
        Some("if_match") => check_if_match(
            opt_str_field(input, "if_match")?.map(str::as_bytes),
            str_field(input, "etag")?,
        ),
        Some("version") => {
            check_version(u64_field(input, "expected")?, u64_field(input, "current")?)
        }
        Some("arrival") => return arrival(input),
        Some("declare") => return declare(input),
        Some(_) => return Err(String::from("vector_bad_input:op")),
    };
    checked
        .map(|()| Value::Bool(true))
        .map_err(|e| String::from(e.code()))
}

fn on(input: &Value) -> Outcome {
    let (state, event) = (str_field(input, "state")?, str_field(input, "event")?);
    match input.get("table") {
        Some(Value::String(name)) if name == "submit" => answer(SUBMIT_LIFECYCLE.on(state, event)),
        Some(table @ Value::Object(_)) => answer(declared(table)?.table().on(state, event)),
        _ => Err(String::from("vector_bad_input:table")),
    }
}

fn arrival(input: &Value) -> Outcome {
    let (state, event) = (str_field(input, "state")?, str_field(input, "event")?);
    let table = match input.get("table") {
        Some(Value::String(name)) if name == "submit" => None,
        Some(table @ Value::Object(_)) => Some(declared(table)?),
        _ => return Err(String::from("vector_bad_input:table")),
    };
    let arrival = match &table {
        None => SUBMIT_LIFECYCLE.arrival(state, event),
        Some(t) => t.table().arrival(state, event),
    };
    match arrival {
        Arrival::Apply { to } => Ok(object! { "apply" => to }),
        Arrival::Reject(e) => Err(String::from(e.code())),
        other => Ok(Value::from(other.name())),
    }
}

fn declare(input: &Value) -> Outcome {
    let declared = declared(input.get("table").unwrap_or(&Value::Null))?;
    let table = declared.table();
    let terminal = table
        .states()
        .filter(|s| table.is_terminal(s))
        .map(Value::from)
        .collect::<Vec<_>>();
    Ok(object! {
        "initial" => declared.initial(),
        "states" => table.states().map(Value::from).collect::<Vec<_>>(),
        "terminal" => terminal,
    })
}

fn answer(transition: Transition<'_>) -> Outcome {
    match transition {
        Transition::Apply { to } => Ok(object! { "apply" => to }),
        Transition::AlreadyApplied => Ok(Value::from("already_applied")),
        Transition::Reject(e) => Err(String::from(e.code())),
    }
}

/// A table declaration; a refused one is its table error code.
fn declared(value: &Value) -> Result<DeclaredTable, String> {
    DeclaredTable::from_value(value).map_err(|e| String::from(e.code()))
}
