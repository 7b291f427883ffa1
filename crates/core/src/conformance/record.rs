//! Group `record`: decoding a store cell. Input `{"bytes_hex"}`; output the entries as
//! `[{"key": hex, "state": "in_flight"|"completed"|"token_used"|"resource", ...}]`, or the decode error code.
//! Round trip: every successfully decoded cell re-encodes to the same bytes.

use crate::conformance::{bytes_field, Outcome};
use crate::hash::to_hex;
use crate::record::{Bucket, Record, StoredBody};
use crate::request::json::Value;
use alloc::string::String;
use alloc::vec::Vec;

pub fn eval(input: &Value) -> Outcome {
    let bytes = bytes_field(input, "bytes")?.ok_or("vector_bad_input:bytes_hex")?;
    let bucket = Bucket::decode(&bytes).map_err(|e| String::from(e.code()))?;
    if bucket.encode() != bytes {
        return Err(String::from("vector_round_trip_mismatch"));
    }
    let entries: Vec<Value> = bucket
        .entries
        .iter()
        .map(|(key, record)| match record {
            Record::InFlight(r) => object! {
                "key" => key.to_hex(), "state" => "in_flight",
                "fingerprint" => to_hex(&r.fingerprint.0), "owner" => to_hex(&r.owner.0),
                "lease_until" => r.lease_until.0, "expires_at" => r.expires_at.0,
            },
            Record::Completed(r) => object! {
                "key" => key.to_hex(), "state" => "completed",
                "fingerprint" => to_hex(&r.fingerprint.0), "expires_at" => r.expires_at.0,
                "status" => r.response.status, "headers" => r.response.headers.as_slice(),
                "body" => match &r.response.body {
                    StoredBody::Kept(body) => Value::String(String::from_utf8_lossy(body).into_owned()),
                    StoredBody::NotKept => Value::Null,
                },
            },
            Record::TokenUsed { expires_at } => object! {
                "key" => key.to_hex(), "state" => "token_used", "expires_at" => expires_at.0,
            },
            Record::Resource(r) => object! {
                "key" => key.to_hex(), "state" => "resource", "resource_state" => r.state.as_str(),
                "version" => r.version, "expires_at" => r.expires_at.0,
                "claim" => r.claim.as_ref().map(|c| object! {
                    "owner" => to_hex(&c.owner.0), "lease_until" => c.lease_until.0, "version" => c.version,
                }),
                "early" => r.early.iter().map(|(e, at)| object! { "event" => e.as_str(), "first_seen" => at.0 }).collect::<Vec<Value>>(),
            },
        })
        .collect();
    Ok(Value::Array(entries))
}
