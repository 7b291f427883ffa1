//! Group `client` (the browser client's rules, `docs/semantics.md` §9), by `op`:
//! - `{"op":"classify","status":n}` → the status class's name
//!   ([`crate::browser::retry::classify`]);
//! - `{"op":"settle","status":n}` → `{"event": submit event, "keeps_key": bool}`
//!   ([`crate::browser::intent`]);
//! - `{"op":"replayed","value": text or null}` → whether it marks a replay
//!   ([`crate::answer`]);
//! - `{"op":"reuses_key","held": fp or null,"payload": fp or null,"held_if_match"?: etag or null,
//!   "if_match"?: etag or null}` → bool;
//! - `{"op":"token_target","endpoint":..,"method":..,"path":..}` → the request target
//!   ([`crate::client::token::issue_target`]);
//! - `{"op":"token_fresh","expires_at":ms,"now":ms}` → whether the token is still usable
//!   ([`crate::client::token::is_fresh`]).

use crate::conformance::{opt_str_field, str_field, u64_field, Outcome};
use crate::request::json::Value;
use crate::time::UnixMillis;
use alloc::string::String;

fn status(input: &Value) -> Result<u16, String> {
    u16::try_from(u64_field(input, "status")?).map_err(|_| String::from("vector_bad_input:status"))
}

pub fn eval(input: &Value) -> Outcome {
    Ok(match str_field(input, "op")? {
        "classify" => Value::from(crate::browser::retry::classify(status(input)?).name()),
        "settle" => {
            let settled = crate::browser::intent::settle(status(input)?);
            object! { "event" => settled.event(), "keeps_key" => settled.keeps_key() }
        }
        "replayed" => {
            Value::from(opt_str_field(input, "value")?.is_some_and(crate::answer::is_replayed))
        }
        "reuses_key" => Value::from(crate::browser::intent::reuses_key(
            opt_str_field(input, "held")?,
            opt_str_field(input, "payload")?,
            opt_str_field(input, "held_if_match")?,
            opt_str_field(input, "if_match")?,
        )),
        "token_target" => Value::from(crate::client::token::issue_target(
            str_field(input, "endpoint")?,
            str_field(input, "method")?,
            str_field(input, "path")?,
        )),
        "token_fresh" => Value::from(crate::client::token::is_fresh(
            UnixMillis(u64_field(input, "expires_at")?),
            UnixMillis(u64_field(input, "now")?),
        )),
        _ => return Err(String::from("vector_bad_input:op")),
    })
}
