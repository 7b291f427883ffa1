//! Group `config`: input `{"config": <document or text>, "env"?: {name: value}}`; output a summary
//! of the compiled policy, or `config_syntax` / `config_invalid:<field>`.

use crate::conformance::Outcome;
use crate::order::OrderRule;
use crate::policy::{
    FailureMode, KeyRequirement, Policy, ScopeSource, StoreRule, TokenRequirement,
};
use crate::request::fingerprint::FingerprintMode;
use crate::request::json::Value;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

pub fn eval(input: &Value) -> Outcome {
    let text = match input.get("config") {
        Some(Value::String(text)) => text.clone(),
        Some(doc) => doc.to_string(),
        None => return Err(String::from("vector_bad_input:config")),
    };
    let env = input.get("env").cloned().unwrap_or(Value::Null);
    let lookup = |name: &str| env.get(name).and_then(Value::as_str).map(String::from);
    let policy = Policy::from_json(&text, &lookup).map_err(|e| match e.field() {
        Some(field) => format!("{}:{field}", e.code()),
        None => e.code().to_string(),
    })?;
    Ok(summary(&policy))
}

fn order_summary(order: &OrderRule) -> Value {
    let table = order.table.table();
    object! {
        "resource" => order.resource.describe(), "event" => order.event.describe(),
        "initial" => order.table.initial(),
        "states" => table.states().map(Value::from).collect::<Vec<Value>>(),
        "retry_after_ms" => order.retry_after.as_millis(),
        "forward_after_ms" => order.forward_after.map(|s| s.as_millis()),
    }
}

fn summary(p: &Policy) -> Value {
    let routes: Vec<Value> = p
        .routes
        .iter()
        .map(|r| {
            let mut route = object! {
                "prefix" => r.prefix.as_str(), "methods" => r.methods.as_slice(),
                "key" => if r.key == KeyRequirement::Required { "required" } else { "optional" },
                "token" => if r.token == TokenRequirement::Required { "required" } else { "none" },
            };
            // Only on routes that have them, so the summaries of other routes stay as they were.
            if let (Some(order), Value::Object(members)) = (&r.order, &mut route) {
                members.push(("order".into(), order_summary(order)));
            }
            if let (Some(share), Value::Object(members)) = (&r.share, &mut route) {
                let share = object! { "records" => share.records, "bytes" => share.bytes };
                members.push(("share".into(), share));
            }
            if let (Some(p), Value::Object(members)) = (&r.precondition, &mut route) {
                let name = match p {
                    crate::order::Precondition::IfMatch => "if-match",
                    crate::order::Precondition::IfMatchOrAny => "if-match-or-any",
                };
                members.push(("precondition".into(), Value::from(name)));
            }
            route
        })
        .collect();
    let scope: Vec<String> = p
        .scope
        .iter()
        .map(|source| match source {
            // The storage key's source is the same; the summary shows the declaration.
            ScopeSource::VerifiedHeader(name) => alloc::format!("verified-header:{name}"),
            other => other.label(),
        })
        .collect();
    let store = match &p.store_rule {
        StoreRule::ReleaseStatuses(list) => object! { "release" => list.as_slice() },
        StoreRule::StoreAll => Value::from("all"),
        StoreRule::SuccessOnly => Value::from("2xx"),
    };
    let fields: Vec<String> = match &p.fingerprint.mode {
        FingerprintMode::Fields(ptrs) => ptrs.iter().map(|p| p.as_str().to_string()).collect(),
        _ => Vec::new(),
    };
    let mode = |m: FailureMode| {
        if m == FailureMode::Reject {
            "reject"
        } else {
            "pass_through"
        }
    };
    object! {
        "header" => p.header.as_str(),
        "routes" => routes,
        "scope" => scope,
        "fingerprint" => object! {
            "mode" => p.fingerprint.mode.name(),
            "headers" => p.fingerprint.headers.as_slice(),
            "fields" => fields,
            "max_depth" => p.fingerprint.json_limits.max_depth,
        },
        "ttl_ms" => p.ttl.as_millis(),
        "lease_ms" => p.lease.as_millis(),
        "replay_headers" => p.replay_headers.as_slice(),
        "store" => store,
        "max_request_body" => p.max_request_body,
        "max_response_body" => p.max_response_body,
        "cells" => p.capacity.cells,
        "per_cell" => p.capacity.per_cell,
        "shares" => object! {
            "identity" => p.shares.identity.map_or(Value::from("off"), |s| Value::from(s.records)),
            "peer" => p.shares.peer.map_or(Value::from("off"), |s| Value::from(s.records)),
            "identity_bytes" => share_bytes(p.shares.identity),
            "peer_bytes" => share_bytes(p.shares.peer),
            "ipv4_prefix" => p.shares.ipv4_prefix,
            "ipv6_prefix" => p.shares.ipv6_prefix,
            "pressure" => p.shares.pressure,
        },
        "memory_bound" => crate::policy::memory_bound(
            &p.capacity,
            p.shares.memory,
            &p.replay_headers,
        ),
        "on_store_full" => mode(p.on_store_full),
        "on_store_error" => mode(p.on_store_error),
        "token" => p.token.as_ref().map(|t| object! {
            "ttl_ms" => t.ttl.as_millis(),
            "issue_path" => t.issue_path.as_str(),
            "header" => t.header.as_str(),
        }),
    }
}

/// A share's bytes as the vectors spell them: `"off"` when not limited (or the share is off).
fn share_bytes(share: Option<crate::client::payer::Share>) -> Value {
    match share {
        Some(share) if share.bytes != u64::MAX => Value::from(share.bytes),
        _ => Value::from("off"),
    }
}
