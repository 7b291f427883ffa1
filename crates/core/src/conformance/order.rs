//! Group `order`: the sequencer of a callback route and the If-Match precondition.
//! - `{"op":"begin","table":..,"record":R|null,"event":..,"owner":n,"now":ms,"lease_ms":..,
//!   "ttl_ms":..,"retry_after_ms":..,"forward_after_ms"?:..}` → `{"outcome": name, ...,
//!   "record": R|null}` (the record written, `null` when nothing is);
//! - `{"op":"settle","record":R|null,"owner":n,"to":..,"applied":bool,"ttl_ms":..,"now":ms}` →
//!   `{"outcome": "advanced"|"released"|"not_owner", "record": R|null}`;
//! - `{"op":"read","resource":{source},"event":{source},"table":..,"headers"?:{..},"body"?:text}`
//!   → `"not_ordered"`, `"resource_missing"` or `{"resource":..,"event":..}`;
//! - `{"op":"precondition","precondition"?: "if-match" (default) | "if-match-or-any","method":..,
//!   "if_match":[values]}` → `true` or the problem code;
//! - `{"op":"answer","answer":"already_applied"|"illegal"|"early"|"busy"|"resource_missing"|
//!   "precondition_required"|"precondition_malformed","state"?:..,"retry_after_ms"?:..}` →
//!   `{"status":n,"idemgate-order":v|null,"retry-after":v|null,"code":problem code|null,
//!   "body":JSON body of a 200|null}`.
//!
//! A record R is `{"state","version","expires_at","claim":{"owner":n,"lease_until","version"}|null,
//! "early":[[event, first_seen], ..]}`; an owner `n` is the token of 16 bytes `n`.

use crate::answer::order::{order_answer, OrderAnswer};
use crate::conformance::{str_field, u64_field, Outcome};
use crate::order::transition::DeclaredTable;
use crate::order::{
    begin, creates, settle, Begin, BeginOutcome, OrderFacts, OrderRule, Precondition,
    PreconditionProblem, Resource, SettleOutcome, ORDER_HEADER,
};
use crate::record::resource::ResourceClaim;
use crate::record::OwnerToken;
use crate::request::json::{JsonPointer, Value};
use crate::request::key_source::KeySource;
use crate::time::{Span, UnixMillis};
use alloc::string::{String, ToString};
use alloc::vec::Vec;

pub fn eval(input: &Value) -> Outcome {
    match str_field(input, "op")? {
        "begin" => begin_op(input),
        "settle" => settle_op(input),
        "read" => read_op(input),
        "precondition" => precondition_op(input),
        "answer" => answer_op(input),
        _ => Err(String::from("vector_bad_input:op")),
    }
}

fn bad(field: &str) -> String {
    ["vector_bad_input:", field].concat()
}

fn table(input: &Value) -> Result<DeclaredTable, String> {
    let value = input.get("table").ok_or_else(|| bad("table"))?;
    DeclaredTable::from_value(value).map_err(|e| String::from(e.code()))
}

fn owner(input: &Value) -> Result<OwnerToken, String> {
    let n = u8::try_from(u64_field(input, "owner")?).map_err(|_| bad("owner"))?;
    Ok(OwnerToken([n; 16]))
}

fn record_in(input: &Value) -> Result<Option<Resource>, String> {
    let Some(r) = input.get("record").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let claim = match r.get("claim").filter(|v| !v.is_null()) {
        None => None,
        Some(c) => Some(ResourceClaim {
            owner: owner(c)?,
            lease_until: UnixMillis(u64_field(c, "lease_until")?),
            version: u64_field(c, "version")?,
        }),
    };
    let mut early = Vec::new();
    for pair in r.get("early").and_then(Value::as_array).unwrap_or_default() {
        match pair.as_array() {
            Some([event, Value::Number(at)]) => early.push((
                event.as_str().ok_or_else(|| bad("early"))?.to_string(),
                UnixMillis(
                    at.as_i64()
                        .and_then(|n| u64::try_from(n).ok())
                        .ok_or_else(|| bad("early"))?,
                ),
            )),
            _ => return Err(bad("early")),
        }
    }
    Ok(Some(Resource {
        state: str_field(r, "state")?.to_string(),
        version: u64_field(r, "version")?,
        claim,
        early,
        expires_at: UnixMillis(u64_field(r, "expires_at")?),
        // The rules never read the seal: only the remote store's filter checks it.
        seal: None,
    }))
}

fn record_out(record: Option<&Resource>) -> Value {
    let Some(r) = record else {
        return Value::Null;
    };
    let early: Vec<Value> = r
        .early
        .iter()
        .map(|(e, at)| Value::Array(alloc::vec![Value::from(e.as_str()), Value::from(at.0)]))
        .collect();
    object! {
        "state" => r.state.as_str(), "version" => r.version, "expires_at" => r.expires_at.0,
        "claim" => r.claim.as_ref().map(|c| object! {
            "owner" => u64::from(c.owner.0[0]), "lease_until" => c.lease_until.0, "version" => c.version,
        }),
        "early" => early,
    }
}

fn span(input: &Value, name: &str) -> Result<Span, String> {
    u64_field(input, name).map(Span)
}

fn begin_op(input: &Value) -> Outcome {
    let table = table(input)?;
    let current = record_in(input)?;
    let forward_after = match input.get("forward_after_ms") {
        None | Some(Value::Null) => None,
        Some(_) => Some(span(input, "forward_after_ms")?),
    };
    let begin_input = Begin {
        table: &table,
        event: str_field(input, "event")?,
        owner: owner(input)?,
        lease: span(input, "lease_ms")?,
        ttl: span(input, "ttl_ms")?,
        retry_after: span(input, "retry_after_ms")?,
        forward_after,
    };
    let now = UnixMillis(u64_field(input, "now")?);
    let (outcome, written) = begin(current.as_ref(), &begin_input, now);
    let charged = creates(current.as_ref(), written.as_ref(), now);
    let mut out = object! {
        "outcome" => outcome.name(),
        "record" => record_out(written.as_ref()),
        "charged" => charged,
    };
    if let Value::Object(members) = &mut out {
        let mut add = |name: &str, value: Value| members.push((name.to_string(), value));
        match &outcome {
            BeginOutcome::Apply { to } => add("to", Value::from(to.as_str())),
            BeginOutcome::AlreadyApplied { state } | BeginOutcome::UnknownState { state } => {
                add("state", Value::from(state.as_str()))
            }
            BeginOutcome::Illegal { state, terminal } => {
                add("state", Value::from(state.as_str()));
                add("terminal", Value::Bool(*terminal));
            }
            BeginOutcome::Early { retry_after } | BeginOutcome::Busy { retry_after } => {
                add("retry_after_ms", Value::from(retry_after.0))
            }
            _ => {}
        }
    }
    Ok(out)
}

fn settle_op(input: &Value) -> Outcome {
    let current = record_in(input)?;
    let applied = match input.get("applied") {
        Some(Value::Bool(b)) => *b,
        _ => return Err(bad("applied")),
    };
    let (outcome, written) = settle(
        current.as_ref(),
        owner(input)?,
        str_field(input, "to")?,
        applied,
        span(input, "ttl_ms")?,
        UnixMillis(u64_field(input, "now")?),
    );
    let name = match outcome {
        SettleOutcome::Advanced { .. } => "advanced",
        SettleOutcome::Released => "released",
        _ => "not_owner",
    };
    Ok(object! { "outcome" => name, "record" => record_out(written.as_ref()) })
}

fn source(input: &Value, name: &str) -> Result<KeySource, String> {
    let members = input
        .get(name)
        .and_then(Value::as_object)
        .ok_or_else(|| bad(name))?;
    match members {
        [(kind, Value::String(text))] => match kind.as_str() {
            "header" => Ok(KeySource::Header(text.to_ascii_lowercase())),
            "json" => JsonPointer::parse(text)
                .map(KeySource::Json)
                .map_err(|_| bad(name)),
            "form" => Ok(KeySource::Form(text.clone())),
            _ => Err(bad(name)),
        },
        _ => Err(bad(name)),
    }
}

fn read_op(input: &Value) -> Outcome {
    let rule = OrderRule {
        resource: source(input, "resource")?,
        event: source(input, "event")?,
        table: table(input)?,
        retry_after: Span::from_secs(10),
        forward_after: None,
    };
    let headers = input.get("headers");
    let lookup = |name: &str| -> Vec<&[u8]> {
        headers
            .and_then(|h| h.as_object())
            .into_iter()
            .flatten()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .filter_map(|(_, v)| v.as_str().map(str::as_bytes))
            .collect()
    };
    let body = input.get("body").and_then(Value::as_str).unwrap_or("");
    Ok(match rule.read(&lookup, body.as_bytes()) {
        OrderFacts::NotOrdered => Value::from("not_ordered"),
        OrderFacts::ResourceMissing => Value::from("resource_missing"),
        OrderFacts::Ordered { resource, event } => {
            object! { "resource" => resource.as_str(), "event" => event.as_str() }
        }
    })
}

fn precondition_op(input: &Value) -> Outcome {
    let values: Vec<&[u8]> = input
        .get("if_match")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("if_match"))?
        .iter()
        .map(|v| v.as_str().map(str::as_bytes).ok_or_else(|| bad("if_match")))
        .collect::<Result<_, _>>()?;
    let rule = match input.get("precondition").and_then(Value::as_str) {
        None | Some("if-match") => Precondition::IfMatch,
        Some("if-match-or-any") => Precondition::IfMatchOrAny,
        Some(_) => return Err(bad("precondition")),
    };
    match rule.check(str_field(input, "method")?, &values) {
        Ok(()) => Ok(Value::Bool(true)),
        Err(p) => Err(String::from(p.code())),
    }
}

fn answer_op(input: &Value) -> Outcome {
    let state = || str_field(input, "state");
    let wait = || span(input, "retry_after_ms");
    let edge = match str_field(input, "answer")? {
        "already_applied" => OrderAnswer::AlreadyApplied { state: state()? },
        "illegal" => OrderAnswer::Illegal { state: state()? },
        "early" => OrderAnswer::Early {
            retry_after: wait()?,
        },
        "busy" => OrderAnswer::Busy {
            retry_after: wait()?,
        },
        "resource_missing" => OrderAnswer::ResourceMissing,
        "precondition_required" => OrderAnswer::Precondition(PreconditionProblem::Required),
        "precondition_malformed" => OrderAnswer::Precondition(PreconditionProblem::Malformed),
        "precondition_version_required" => {
            OrderAnswer::Precondition(PreconditionProblem::VersionRequired)
        }
        _ => return Err(bad("answer")),
    };
    let http = order_answer(&edge, &crate::policy::ProblemStyle::DEFAULT);
    let body = Value::parse(core::str::from_utf8(&http.body).unwrap_or("")).unwrap_or(Value::Null);
    let problem = http.header("content-type") == Some("application/problem+json");
    let code = if problem {
        body.get("code").cloned()
    } else {
        None
    };
    Ok(object! {
        "status" => u64::from(http.status),
        "idemgate-order" => http.header(ORDER_HEADER).map(Value::from),
        "retry-after" => http.header("retry-after").map(Value::from),
        "code" => code,
        "body" => if problem { Value::Null } else { body },
    })
}
