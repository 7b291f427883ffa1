//! Group `decision`: what a request gets given the record found (`docs/semantics.md` §4), and its
//! HTTP form.
//! Input `{"policy"?, "now", "fingerprint": "A", "record": null | {"state": "in_flight",
//! "fingerprint", "lease_until", "expires_at"} | {"state": "completed", "fingerprint", "status",
//! "headers"?, "body"?: text | null (null = not kept), "expires_at"}}`.
//! Output `{"decision": "claim"|"conflict"|"replay"|"mismatch", ...details, "http": {"status",
//! "type"?, "retry_after"?, "replayed"?, "body_omitted"?, "location"?, "etag"?}}`.
//! With `"late": true` the request is a late signed delivery ([`decide_late`]): `"replay"`, or
//! `"refused"` with the stale-signature answer — never a claim.
//! With `"relay": {"in_flight": [peer, ...], "peer"}` the request's claim is won on a detached
//! route, from `peer`, while one exchange per entry of `in_flight` (its peer's) holds its part of
//! the relay budget: `{"decision": "detach"}` (sent), or `"release"` with its answer (not sent,
//! the claim released).

use crate::answer::{answer, EdgeAnswer, HttpAnswer, BODY_OMITTED_HEADER, REPLAYED_HEADER};
use crate::client::payer::Payers;
use crate::client::scope::StorageKey;
use crate::client::signature::SignatureError;
use crate::conformance::{fingerprint_label, header_pairs, policy_field, u64_field, Outcome};
use crate::decision::{decide, decide_late, Decision, ResponseFacts};
use crate::guard::{Action, Claim, Course, Guarded, Reply};
use crate::policy::{Policy, RouteKind};
use crate::record::{Completed, InFlight, OwnerToken, Record, StoredBody, StoredResponse};
use crate::request::budget::{Budget, Reservation};
use crate::request::fingerprint::Fingerprint;
use crate::request::json::Value;
use crate::store::protocol::ClaimOutcome;
use crate::time::UnixMillis;
use alloc::format;
use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec::Vec;

pub fn eval(input: &Value) -> Outcome {
    let policy = policy_field(input)?;
    if let Some(relay) = input.get("relay") {
        return detached(&policy, relay);
    }
    let now = UnixMillis(u64_field(input, "now")?);
    let fingerprint = fingerprint_label(input, "fingerprint")?;
    let record = match input.get("record") {
        None | Some(Value::Null) => None,
        Some(record) => Some(record_from(record)?),
    };
    if input.get("late") == Some(&Value::Bool(true)) {
        return Ok(match decide_late(record.as_ref(), fingerprint, now) {
            Some(stored) => object! {
                "decision" => "replay",
                "http" => http(&answer(&EdgeAnswer::Replay { stored: &stored, replay_headers: &policy.replay_headers })),
            },
            None => object! {
                "decision" => "refused",
                "http" => http(&answer(&EdgeAnswer::Signature(&SignatureError::Stale))),
            },
        });
    }
    let owner = OwnerToken([7; 16]);
    let out = match decide(record.as_ref(), fingerprint, owner, now, &policy) {
        Decision::Claim { claim, takeover } => object! {
            "decision" => "claim",
            "takeover" => takeover,
            "lease_until" => claim.lease_until.0,
            "expires_at" => claim.expires_at.0,
        },
        Decision::Conflict { retry_after } => object! {
            "decision" => "conflict",
            "retry_after_ms" => retry_after.as_millis(),
            "http" => http(&answer(&EdgeAnswer::Conflict { retry_after })),
        },
        Decision::Replay(stored) => object! {
            "decision" => "replay",
            "http" => http(&answer(&EdgeAnswer::Replay { stored: &stored, replay_headers: &policy.replay_headers })),
        },
        Decision::Mismatch => object! {
            "decision" => "mismatch",
            "http" => http(&answer(&EdgeAnswer::Mismatch)),
        },
    };
    Ok(out)
}

/// The parts of an HTTP answer a vector pins down.
pub fn http(answer: &HttpAnswer) -> Value {
    let mut out: Vec<(String, Value)> = Vec::new();
    let mut insert = |key: &str, value: Value| out.push((key.into(), value));
    insert("status", answer.status.into());
    if let Some(ct) = answer.header("content-type") {
        insert("content_type", ct.into());
    }
    if ct_is_problem(answer) {
        let body = core::str::from_utf8(&answer.body)
            .ok()
            .and_then(|text| Value::parse(text).ok())
            .unwrap_or_default();
        insert("type", body.get("type").cloned().unwrap_or_default());
    } else {
        insert(
            "body",
            String::from_utf8_lossy(&answer.body).into_owned().into(),
        );
    }
    for (name, key) in [
        ("retry-after", "retry_after"),
        (REPLAYED_HEADER, "replayed"),
        (BODY_OMITTED_HEADER, "body_omitted"),
        ("location", "location"),
        ("etag", "etag"),
    ] {
        if let Some(value) = answer.header(name) {
            insert(key, value.into());
        }
    }
    Value::Object(out)
}

fn ct_is_problem(answer: &HttpAnswer) -> bool {
    answer.header("content-type") == Some("application/problem+json")
}

fn record_from(value: &Value) -> Result<Record, String> {
    let state = crate::conformance::str_field(value, "state")?;
    let fingerprint = fingerprint_label(value, "fingerprint")?;
    let expires_at = UnixMillis(u64_field(value, "expires_at")?);
    match state {
        "in_flight" => Ok(Record::InFlight(InFlight {
            fingerprint,
            owner: OwnerToken([1; 16]),
            lease_until: UnixMillis(u64_field(value, "lease_until")?),
            expires_at,
            payers: crate::client::payer::Payers::NONE,
        })),
        "completed" => {
            let status = u16::try_from(u64_field(value, "status")?)
                .map_err(|_| String::from("vector_bad_input:status"))?;
            let body = match value.get("body") {
                Some(Value::String(text)) => StoredBody::Kept(text.as_bytes().to_vec()),
                _ => StoredBody::NotKept,
            };
            Ok(Record::Completed(Completed {
                fingerprint,
                response: StoredResponse {
                    status,
                    headers: header_pairs(value, "headers")?,
                    body,
                    seal: None,
                },
                expires_at,
            }))
        }
        _ => Err(String::from("vector_bad_input:state")),
    }
}

/// A claim won on a detached route from `peer`, with `in_flight`'s exchanges holding their parts
/// of the relay budget: sent, or released unsent with its answer.
fn detached(policy: &Policy, relay: &Value) -> Outcome {
    let bad = |field: &str| format!("vector_bad_input:relay.{field}");
    let budget = Rc::new(Budget::default());
    let part = |peer: &str| Reservation::new(Rc::clone(&budget), Rc::from(peer.as_bytes()));
    let mut held = Vec::new();
    for peer in relay
        .get("in_flight")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("in_flight"))?
    {
        let mut exchange = part(peer.as_str().ok_or_else(|| bad("in_flight"))?);
        if !exchange.grow(policy.max_relay_body, policy.relay_limits()) {
            return Err(bad("in_flight"));
        }
        held.push(exchange);
    }
    let peer = relay
        .get("peer")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("peer"))?;
    let owner = OwnerToken([7; 16]);
    let claim = Claim {
        key: StorageKey::from_stored([1; 32]),
        fingerprint: Fingerprint([b'A'; 32]),
        owner,
        payers: Payers::NONE,
    };
    let course = Course::claimed(None, None);
    let kept = Some(((), part(peer)));
    let mut machine: Guarded<(), ()> = Guarded::claim(policy, RouteKind::Api, claim, course, kept);
    let _ask = machine.poll();
    let won = ClaimOutcome::Forward {
        owner,
        takeover: false,
    };
    machine.answered(Reply::Claim(Ok(won)), policy);
    let actions: Vec<Action<(), ()>> = core::iter::from_fn(|| machine.poll()).collect();
    match &actions[..] {
        [Action::Detach { .. }] => Ok(object! { "decision" => "detach" }),
        [Action::Finish {
            facts: ResponseFacts::NeverReached,
            ..
        }, Action::Answer(answer)] => Ok(object! {
            "decision" => "release",
            "http" => http(answer),
        }),
        other => Err(format!("vector_unexpected_actions:{}", other.len())),
    }
}
