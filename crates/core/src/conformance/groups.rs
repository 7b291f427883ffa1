//! Which evaluator answers which group. Each group's evaluator lives in its own file next to this
//! one, named after the group.

use super::Outcome;
use crate::request::json::Value;
use alloc::format;

#[path = "client.rs"]
mod client;
#[path = "completion.rs"]
mod completion;
#[path = "config.rs"]
mod config;
#[path = "decision.rs"]
mod decision;
#[path = "duration.rs"]
mod duration;
#[path = "fingerprint.rs"]
mod fingerprint;
#[path = "form.rs"]
mod form;
#[path = "json.rs"]
mod json;
#[path = "key.rs"]
mod key;
#[path = "key_source.rs"]
mod key_source;
#[path = "order.rs"]
mod order;
#[path = "record.rs"]
mod record;
#[path = "retry.rs"]
mod retry;
#[path = "signature.rs"]
mod signature;
#[path = "storage_key.rs"]
mod storage_key;
#[path = "target.rs"]
mod target;
#[path = "token.rs"]
mod token;
#[path = "transition.rs"]
mod transition;

pub const NAMES: &[&str] = &[
    "key",
    "storage_key",
    "json",
    "form",
    "fingerprint",
    "record",
    "decision",
    "completion",
    "token",
    "transition",
    "retry",
    "config",
    "duration",
    "signature",
    "key_source",
    "client",
    "target",
    "order",
];

pub fn dispatch(group: &str, input: &Value) -> Outcome {
    match group {
        "key" => key::eval(input),
        "storage_key" => storage_key::eval(input),
        "json" => json::eval(input),
        "form" => form::eval(input),
        "fingerprint" => fingerprint::eval(input),
        "record" => record::eval(input),
        "decision" => decision::eval(input),
        "completion" => completion::eval(input),
        "token" => token::eval(input),
        "transition" => transition::eval(input),
        "retry" => retry::eval(input),
        "config" => config::eval(input),
        "duration" => duration::eval(input),
        "signature" => signature::eval(input),
        "key_source" => key_source::eval(input),
        "client" => client::eval(input),
        "target" => target::eval(input),
        "order" => order::eval(input),
        other => Err(format!("vector_unknown_group:{other}")),
    }
}
