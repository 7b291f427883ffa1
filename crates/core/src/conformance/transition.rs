//! Group `transition`:
//! - `{"table":"order"|"record"|"submit","state":..,"event":..}` → `{"apply": to}`,
//!   `"already_applied"`, or the transition error code;
//! - `{"op":"if_match","if_match": value or null,"etag":..}` → `true` or the precondition code;
//! - `{"op":"version","expected":n,"current":n}` → `true` or the precondition code.

use crate::conformance::{opt_str_field, str_field, u64_field, Outcome};
use crate::json::Value;
use crate::transition::{
    check_if_match, check_version, Transition, ORDER_LIFECYCLE, RECORD_LIFECYCLE, SUBMIT_LIFECYCLE,
};
use alloc::string::String;

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
    let table = match str_field(input, "table")? {
        "order" => &ORDER_LIFECYCLE,
        "record" => &RECORD_LIFECYCLE,
        "submit" => &SUBMIT_LIFECYCLE,
        _ => return Err(String::from("vector_bad_input:table")),
    };
    match table.on(str_field(input, "state")?, str_field(input, "event")?) {
        Transition::Apply { to } => Ok(object! { "apply" => to }),
        Transition::AlreadyApplied => Ok(Value::from("already_applied")),
        Transition::Reject(e) => Err(String::from(e.code())),
    }
}
