//! Group `completion`: what the end of a forwarded request does to its claim
//! (`docs/semantics.md` §5). Input `{"policy"?, "now", "claim": {"fingerprint", "lease_until",
//! "expires_at"}, "facts": "never_reached" | "in_doubt" | {"status", "headers"?: [[n, v]], "body":
//! text | null (null = over the limit)}}`. Output `{"completion": "store", "status", "headers",
//! "body_kept", "expires_at"}` or `{"completion": "release"}` or `{"completion":
//! "keep_in_flight"}`.

use crate::conformance::{fingerprint_label, header_pairs, policy_field, u64_field, Outcome};
use crate::decision::{complete, Completion, ResponseFacts};
use crate::record::{InFlight, OwnerToken, StoredBody};
use crate::request::json::Value;
use crate::time::UnixMillis;
use alloc::string::String;

pub fn eval(input: &Value) -> Outcome {
    let policy = policy_field(input)?;
    let now = UnixMillis(u64_field(input, "now")?);
    let claim_in = input.get("claim").ok_or("vector_bad_input:claim")?;
    let claim = InFlight {
        fingerprint: fingerprint_label(claim_in, "fingerprint")?,
        owner: OwnerToken([1; 16]),
        lease_until: UnixMillis(u64_field(claim_in, "lease_until")?),
        expires_at: UnixMillis(u64_field(claim_in, "expires_at")?),
        payers: crate::client::payer::Payers::NONE,
    };
    let facts = match input.get("facts") {
        Some(Value::String(s)) if s == "never_reached" => ResponseFacts::NeverReached,
        Some(Value::String(s)) if s == "in_doubt" => ResponseFacts::InDoubt,
        Some(facts @ Value::Object(_)) => ResponseFacts::Upstream {
            status: u16::try_from(u64_field(facts, "status")?)
                .map_err(|_| String::from("vector_bad_input:status"))?,
            headers: header_pairs(facts, "headers")?,
            body: facts
                .get("body")
                .and_then(Value::as_str)
                .map(|s| s.as_bytes().to_vec()),
        },
        _ => return Err(String::from("vector_bad_input:facts")),
    };
    Ok(match complete(&claim, facts, now, &policy) {
        Completion::Store(done) => object! {
            "completion" => "store",
            "status" => done.response.status,
            "headers" => done.response.headers,
            "body_kept" => matches!(done.response.body, StoredBody::Kept(_)),
            "expires_at" => done.expires_at.0,
        },
        Completion::Release => object! { "completion" => "release" },
        Completion::KeepInFlight => object! { "completion" => "keep_in_flight" },
    })
}
