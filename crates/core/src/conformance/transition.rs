//! Group `transition`:
//! - `{"table":"submit" | {"states":[..],"terminal":[..],"transitions":[[from,event,to],..]},
//!   "state":..,"event":..}` → `{"apply": to}`, `"already_applied"`, or the transition error code
//!   (a table given as data is built with `StateTable::new`: a refused table is its table error
//!   code). The core's only built-in table is the submit button's; example tables (an order's
//!   life) are data in the vectors;
//! - `{"op":"if_match","if_match": value or null,"etag":..}` → `true` or the precondition code;
//! - `{"op":"version","expected":n,"current":n}` → `true` or the precondition code.

use crate::conformance::{opt_str_field, str_field, u64_field, Outcome};
use crate::json::Value;
use crate::transition::{check_if_match, check_version, StateTable, Transition, SUBMIT_LIFECYCLE};
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
        Some(Value::Object(_)) => {
            let table = table(input.get("table").unwrap_or(&Value::Null))?;
            let table = table.map_err(|e| String::from(e.code()))?;
            answer(table.on(state, event))
        }
        _ => Err(String::from("vector_bad_input:table")),
    }
}

fn answer(transition: Transition<'_>) -> Outcome {
    match transition {
        Transition::Apply { to } => Ok(object! { "apply" => to }),
        Transition::AlreadyApplied => Ok(Value::from("already_applied")),
        Transition::Reject(e) => Err(String::from(e.code())),
    }
}

type Table = Result<StateTable<String>, crate::transition::TableError>;

/// `{"states":[..],"terminal":[..],"transitions":[[from,event,to],..]}` → a validated table.
fn table(value: &Value) -> Result<Table, String> {
    let bad = || String::from("vector_bad_input:table");
    let names = |field: &str| -> Result<Vec<String>, String> {
        let list = value.get(field).and_then(Value::as_array).ok_or_else(bad)?;
        list.iter()
            .map(|v| v.as_str().map(String::from).ok_or_else(bad))
            .collect()
    };
    let transitions = value
        .get("transitions")
        .and_then(Value::as_array)
        .ok_or_else(bad)?
        .iter()
        .map(|edge| match edge.as_array() {
            Some([from, event, to]) => match (from.as_str(), event.as_str(), to.as_str()) {
                (Some(f), Some(e), Some(t)) => Ok((f.into(), e.into(), t.into())),
                _ => Err(bad()),
            },
            _ => Err(bad()),
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(StateTable::new(
        names("states")?,
        names("terminal")?,
        transitions,
    ))
}
