//! Vectors through the browser module's `.wasm`, by the exports a browser app calls: `key` through
//! `parseKeyValues`, `fingerprint` through a `Fingerprinter`, `retry` through `retryNext` (with
//! the policy defaults of `defaults`), `transition` (state tables, given as data or the submit
//! lifecycle; `on`, `arrival` and `declare`) through a `StateTable`, `client`
//! through `classifyStatus`, `settle`, `isReplayed`, `reusesKey`, `tokenTarget` and
//! `tokenIsFresh`, `target` (browser–edge parity) through `requestTarget` and a `Fingerprinter`
//! with the route's `caseSensitive`. Results are names and objects, read as they are. A case the
//! module's API cannot express (another group, a malformed input, a policy that does not parse, a
//! request no route guards — the browser does not route) is not exposed and answers `None`. What the wasm-bindgen convention is lives in [`crate::wasm_bindgen`]; this
//! module only maps a group's input onto calls.

use super::Case;
use crate::error::Result;
use crate::wasm_bindgen::{Arg, JsError, WebModule};
use idemgate_core::policy::Policy;
use serde_json::{json, Value};
use std::path::Path;

/// The groups this module answers.
pub const EXPOSED_GROUPS: &[&str] = &[
    "key",
    "fingerprint",
    "retry",
    "transition",
    "client",
    "target",
];

pub struct WebVectors {
    web: WebModule,
}

type Thrown<T> = std::result::Result<T, JsError>;

fn outcome(result: Thrown<Value>) -> Value {
    match result {
        Ok(value) => json!({ "ok": value }),
        Err(e) => json!({ "error": e.code }),
    }
}

/// A parsed JSON value as `js/table.js` writes it for `StateTable.declare` (crates/web/src/outline.rs):
/// `0` null, a number or a boolean; `1, len` a string; `2, n` an array; `3, n` an object whose
/// members are each a key's length and then its value; the strings' UTF-8 bytes in `text`.
fn outline(value: &Value, text: &mut Vec<u8>, shape: &mut Vec<u32>) {
    let string = |s: &str, text: &mut Vec<u8>, shape: &mut Vec<u32>| {
        shape.push(u32::try_from(s.len()).unwrap_or(u32::MAX));
        text.extend_from_slice(s.as_bytes());
    };
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    match value {
        Value::String(s) => {
            shape.push(1);
            string(s, text, shape);
        }
        Value::Array(items) => {
            shape.extend([2, count(items.len())]);
            for item in items {
                outline(item, text, shape);
            }
        }
        Value::Object(members) => {
            shape.extend([3, count(members.len())]);
            for (key, item) in members {
                string(key, text, shape);
                outline(item, text, shape);
            }
        }
        _ => shape.push(0),
    }
}

fn text(s: &str) -> Arg {
    Arg::Bytes(s.as_bytes().to_vec())
}

impl WebVectors {
    pub fn start(path: &Path) -> Result<Self> {
        Ok(WebVectors {
            web: WebModule::load(path, 0x5eed)?,
        })
    }

    /// The browser module's answer, or `None` if it does not expose what the case needs.
    pub fn answer(&mut self, case: &Case) -> Result<Option<Value>> {
        match case.group.as_str() {
            "key" => self.key(&case.input),
            "fingerprint" => self.fingerprint(&case.input),
            "retry" => self.retry(&case.input),
            "transition" => self.transition(&case.input),
            "client" => self.client(&case.input),
            "target" => self.target(case),
            _ => Ok(None),
        }
    }

    fn key(&mut self, input: &Value) -> Result<Option<Value>> {
        let values: Option<Vec<Vec<u8>>> = match (input.get("values_hex"), input.get("values")) {
            (Some(list), _) => list.as_array().and_then(|l| {
                l.iter()
                    .map(|v| v.as_str().and_then(idemgate_core::hash::from_hex))
                    .collect()
            }),
            (None, Some(list)) => list.as_array().and_then(|l| {
                l.iter()
                    .map(|v| v.as_str().map(|s| s.as_bytes().to_vec()))
                    .collect()
            }),
            (None, None) => None,
        };
        let Some(values) = values else {
            return Ok(None);
        };
        let lengths = values.iter().map(|v| v.len() as u32).collect();
        let joined = values.concat();
        let result = self
            .web
            .optional_string("parseKeyValues", &[Arg::Bytes(joined), Arg::U32s(lengths)])?;
        Ok(Some(outcome(
            result.map(|key| key.map(Value::String).unwrap_or(Value::Null)),
        )))
    }

    fn fingerprint(&mut self, input: &Value) -> Result<Option<Value>> {
        let policy = match input.get("policy") {
            None | Some(Value::Null) => Policy::defaults(),
            Some(config) => match Policy::from_json(&config.to_string(), &|_| None) {
                Ok(policy) => policy,
                Err(_) => return Ok(None),
            },
        };
        // The edge binds If-Match by the route's precondition, a routing rule: the browser does
        // not route.
        if policy.routes.iter().any(|r| r.precondition.is_some()) {
            return Ok(None);
        }
        let fields: Vec<String> = input
            .pointer("/policy/fingerprint/fields")
            .and_then(Value::as_array)
            .map(|l| {
                l.iter()
                    .filter_map(|f| f.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let Some((method, path, headers)) = request_parts(input) else {
            return Ok(None);
        };
        let body = match (input.get("body"), input.get("body_hex")) {
            (Some(Value::String(s)), _) => s.as_bytes().to_vec(),
            (None, Some(hex)) => match hex.as_str().and_then(idemgate_core::hash::from_hex) {
                Some(bytes) => bytes,
                None => return Ok(None),
            },
            (None, None) => Vec::new(),
            _ => return Ok(None),
        };
        let offsets: Option<Vec<u64>> = match input.get("chunks") {
            None => Some(Vec::new()),
            Some(list) => list
                .as_array()
                .and_then(|l| l.iter().map(Value::as_u64).collect()),
        };
        let Some(offsets) = offsets else {
            return Ok(None);
        };
        let chunks = idemgate_core::conformance::split_at_offsets(&body, offsets);
        let spec = &policy.fingerprint;
        // One constructor call: method, path, fields, header names, then header name/value pairs,
        // joined, with their lengths (crates/web/src/fingerprint.rs).
        let mut parts: Vec<&[u8]> = vec![method.as_bytes(), path.as_bytes()];
        parts.extend(fields.iter().map(|f| f.as_bytes()));
        parts.extend(spec.headers.iter().map(|n| n.as_bytes()));
        for (name, value) in &headers {
            parts.extend([name.as_bytes(), value.as_bytes()]);
        }
        let lengths = parts.iter().map(|p| p.len() as u32).collect();
        let limits = &spec.json_limits;
        let args = [
            text(spec.mode.name()),
            Arg::OptU16(Some(limits.max_depth)),
            Arg::OptU16(Some(limits.max_number_len)),
            Arg::OptBool(None),
            Arg::Bytes(parts.concat()),
            Arg::U32s(lengths),
            Arg::I32(fields.len() as i32),
            Arg::OptU32(Some(spec.headers.len() as u32)),
        ];
        let handle = match self.web.handle("fingerprinter_new", &args)? {
            Ok(handle) => handle,
            Err(e) => return Ok(Some(outcome(Err(e)))),
        };
        let answer = self.fingerprint_with(handle, &chunks)?;
        self.web.free("fingerprinter", handle)?;
        Ok(Some(outcome(answer.map(Value::String))))
    }

    fn fingerprint_with(&mut self, h: i32, chunks: &[&[u8]]) -> Result<Thrown<String>> {
        for chunk in chunks {
            let args = [Arg::I32(h), Arg::Bytes(chunk.to_vec())];
            if let Err(e) = self.web.unit("fingerprinter_update", &args)? {
                return Ok(Err(e));
            }
        }
        self.web.string("fingerprinter_finish", &[Arg::I32(h)])
    }

    fn retry(&mut self, input: &Value) -> Result<Option<Value>> {
        let defaults = self.defaults()?;
        let field = |name: &str| defaults.pointer(name).and_then(Value::as_f64);
        let (Some(mut max_attempts), Some(mut base), Some(mut max), Some(mut total)) = (
            field("/retry/maxAttempts"),
            field("/retry/baseDelayMs"),
            field("/retry/maxDelayMs"),
            field("/retry/maxTotalMs"),
        ) else {
            return Ok(None);
        };
        if let Some(overrides) = input.get("policy") {
            let Some(obj) = overrides.as_object() else {
                return Ok(None);
            };
            for (name, value) in obj {
                let Some(v) = value.as_u64() else {
                    return Ok(None);
                };
                match name.as_str() {
                    "max_attempts" => max_attempts = v as f64,
                    "base_delay_ms" => base = v as f64,
                    "max_delay_ms" => max = v as f64,
                    "max_total_ms" => total = v as f64,
                    _ => return Ok(None),
                }
            }
        }
        let number = |name: &str| input.get(name).and_then(Value::as_u64);
        let (Some(attempts), Some(elapsed), Some(now), Some(random)) = (
            number("attempts_made"),
            number("elapsed_ms"),
            number("now"),
            number("random"),
        ) else {
            return Ok(None);
        };
        let (Ok(attempts), Ok(random), Ok(max_attempts)) = (
            u32::try_from(attempts),
            u32::try_from(random),
            u32::try_from(max_attempts as u64),
        ) else {
            return Ok(None);
        };
        let Some(raw) = input.get("outcome") else {
            return Ok(None);
        };
        let flag = |name: &str| raw.get(name).and_then(Value::as_bool) == Some(true);
        // The outcome by name.
        let (kind, status, retry_after) = if flag("network_error") {
            ("network_error", 0, None)
        } else if flag("timeout") {
            ("timeout", 0, None)
        } else {
            let Some(status) = raw
                .get("status")
                .and_then(Value::as_u64)
                .and_then(|s| u16::try_from(s).ok())
            else {
                return Ok(None);
            };
            let retry_after = match raw.get("retry_after") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.as_bytes().to_vec()),
                Some(_) => return Ok(None),
            };
            ("response", status, retry_after)
        };
        let args = [
            Arg::I32(max_attempts as i32),
            Arg::F64(base),
            Arg::F64(max),
            Arg::F64(total),
            Arg::I32(attempts as i32),
            Arg::F64(elapsed as f64),
            text(kind),
            Arg::I32(i32::from(status)),
            Arg::OptBytes(retry_after),
            Arg::F64(now as f64),
            Arg::I32(random as i32),
        ];
        // `{retry: true, delayMs}` or `{retry: false, reason}`.
        let result = self.web.object("retryNext", &args)?;
        Ok(Some(outcome(result.map(|answer| {
            match (
                answer.get("retry"),
                answer.get("delayMs"),
                answer.get("reason"),
            ) {
                (Some(Value::Bool(true)), Some(ms), None) => json!({ "retry_ms": ms }),
                (Some(Value::Bool(false)), None, Some(reason)) => json!({ "final": reason }),
                _ => json!({ "unexpected": answer }),
            }
        }))))
    }

    fn client(&mut self, input: &Value) -> Result<Option<Value>> {
        let field = |name: &str| input.get(name).and_then(Value::as_str);
        let opt = |name: &str| match input.get(name) {
            None | Some(Value::Null) => Some(Arg::OptBytes(None)),
            Some(Value::String(s)) => Some(Arg::OptBytes(Some(s.as_bytes().to_vec()))),
            Some(_) => None,
        };
        let status = input
            .get("status")
            .and_then(Value::as_u64)
            .and_then(|s| u16::try_from(s).ok())
            .map(|s| Arg::I32(i32::from(s)));
        let answer = match (field("op"), status) {
            (Some("classify"), Some(status)) => Some(Value::String(
                self.web.string_result("classifyStatus", &[status])?,
            )),
            (Some("settle"), Some(status)) => match self.web.object("settle", &[status])? {
                Ok(settled) => Some(json!({
                    "event": settled.get("event"),
                    "keeps_key": settled.get("keepsKey"),
                })),
                Err(e) => return Ok(Some(outcome(Err(e)))),
            },
            (Some("replayed"), _) => match opt("value") {
                Some(value) => Some(json!(self.web.int("isReplayed", &[value])? != 0)),
                None => return Ok(None),
            },
            (Some("reuses_key"), _) => match (
                opt("held"),
                opt("payload"),
                opt("held_if_match"),
                opt("if_match"),
            ) {
                (Some(held), Some(payload), Some(held_if_match), Some(if_match)) => Some(json!(
                    self.web
                        .int("reusesKey", &[held, payload, held_if_match, if_match])?
                        != 0
                )),
                _ => return Ok(None),
            },
            (Some("token_target"), _) => {
                match (field("endpoint"), field("method"), field("path")) {
                    (Some(e), Some(m), Some(p)) => Some(Value::String(
                        self.web
                            .string_result("tokenTarget", &[text(e), text(m), text(p)])?,
                    )),
                    _ => return Ok(None),
                }
            }
            (Some("token_fresh"), _) => {
                let ms = |name: &str| input.get(name).and_then(Value::as_u64);
                let (Some(expires_at), Some(now)) = (ms("expires_at"), ms("now")) else {
                    return Ok(None);
                };
                let args = [Arg::F64(expires_at as f64), Arg::F64(now as f64)];
                match self.web.boolean("tokenIsFresh", &args)? {
                    Ok(fresh) => Some(json!(fresh)),
                    Err(e) => return Ok(Some(outcome(Err(e)))),
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(outcome(Ok(answer.unwrap_or(Value::Null)))))
    }

    /// The module's defaults (`defaults()`, JSON).
    fn defaults(&mut self) -> Result<Value> {
        let text = self.web.string_result("defaults", &[])?;
        serde_json::from_str(&text).map_err(|e| {
            crate::error::HarnessError::Interface(format!("defaults() is not JSON: {e}"))
        })
    }

    /// A `StateTable`: a table given as data through `StateTable.declare` (the outline of the
    /// parsed value, as `StateTable.fromJSON` passes it: see [`outline`]), `"submit"` through `StateTable.submit`; then `answer`
    /// (`on` and `arrival`) or `describe` (`declare`). `if_match` and `version` are the origin's
    /// and the edge's, not the browser's.
    fn transition(&mut self, input: &Value) -> Result<Option<Value>> {
        let op = input.get("op").and_then(Value::as_str);
        let arrival = match op {
            None | Some("declare") => false,
            Some("arrival") => true,
            Some(_) => return Ok(None),
        };
        let handle = match input.get("table") {
            Some(Value::String(name)) if name == "submit" => {
                self.web.handle("statetable_submit", &[])?
            }
            Some(table) if op == Some("declare") || table.is_object() => {
                let (mut text, mut shape) = (Vec::new(), Vec::new());
                outline(table, &mut text, &mut shape);
                let args = [Arg::Bytes(text), Arg::U32s(shape)];
                self.web.handle("statetable_declare", &args)?
            }
            _ => return Ok(None),
        };
        let handle = match handle {
            Ok(handle) => handle,
            Err(e) => return Ok(Some(outcome(Err(e)))),
        };
        let answer = self.table_answer(handle, input, op, arrival);
        self.web.free("statetable", handle)?;
        answer
    }

    fn table_answer(
        &mut self,
        handle: i32,
        input: &Value,
        op: Option<&str>,
        arrival: bool,
    ) -> Result<Option<Value>> {
        if op == Some("declare") {
            // `{initial, states, terminal}`, as the vectors spell a declaration's shape.
            let shape = self
                .web
                .object("statetable_describe", &[Arg::I32(handle)])?;
            return Ok(Some(outcome(shape)));
        }
        let field = |name: &str| input.get(name).and_then(Value::as_str);
        let (Some(state), Some(event)) = (field("state"), field("event")) else {
            return Ok(None);
        };
        // `{outcome: "apply", state: next}` or `{outcome: <name>, state}` (the state unchanged).
        let args = [
            Arg::I32(handle),
            text(state),
            text(event),
            Arg::I32(i32::from(arrival)),
        ];
        let result = self.web.object("statetable_answer", &args)?;
        Ok(Some(outcome(result.map(|answer| {
            match (
                answer.get("outcome").and_then(Value::as_str),
                answer.get("state"),
            ) {
                (Some("apply"), Some(to)) => json!({ "apply": to }),
                (Some(name @ ("already_applied" | "early" | "illegal")), Some(at))
                    if at == state =>
                {
                    Value::String(name.into())
                }
                _ => json!({ "unexpected": answer }),
            }
        }))))
    }

    /// Browser–edge parity: `{method, path}` from `requestTarget` and the fingerprint from a
    /// `Fingerprinter`, both given the request as the app writes it and the route's case rule.
    /// A request no route guards (`null`) is the edge's alone: the browser does not route.
    fn target(&mut self, case: &Case) -> Result<Option<Value>> {
        if case.expect == json!({ "ok": null }) {
            return Ok(None);
        }
        let input = &case.input;
        let policy = match input.get("policy") {
            None | Some(Value::Null) => Policy::defaults(),
            Some(config) => match Policy::from_json(&config.to_string(), &|_| None) {
                Ok(policy) => policy,
                Err(_) => return Ok(None),
            },
        };
        // The route's case rule, as an app configures its fingerprint (one route per vector).
        let case_sensitive = input
            .pointer("/policy/routes/0/case_sensitive")
            .and_then(Value::as_bool);
        let Some((method, path, headers)) = request_parts(input) else {
            return Ok(None);
        };
        let body = match input.get("body") {
            Some(Value::String(s)) => s.as_bytes().to_vec(),
            None => Vec::new(),
            _ => return Ok(None),
        };
        let args = [text(method), text(path), Arg::OptBool(case_sensitive)];
        let seen = match self.web.object("requestTarget", &args)? {
            Ok(seen) => seen,
            Err(e) => return Ok(Some(outcome(Err(e)))),
        };
        let spec = &policy.fingerprint;
        let mut parts: Vec<&[u8]> = vec![method.as_bytes(), path.as_bytes()];
        parts.extend(spec.headers.iter().map(|n| n.as_bytes()));
        for (name, value) in &headers {
            parts.extend([name.as_bytes(), value.as_bytes()]);
        }
        let lengths = parts.iter().map(|p| p.len() as u32).collect();
        let limits = &spec.json_limits;
        let args = [
            text(spec.mode.name()),
            Arg::OptU16(Some(limits.max_depth)),
            Arg::OptU16(Some(limits.max_number_len)),
            Arg::OptBool(case_sensitive),
            Arg::Bytes(parts.concat()),
            Arg::U32s(lengths),
            Arg::I32(0),
            Arg::OptU32(Some(spec.headers.len() as u32)),
        ];
        let handle = match self.web.handle("fingerprinter_new", &args)? {
            Ok(handle) => handle,
            Err(e) => return Ok(Some(outcome(Err(e)))),
        };
        let print = self.fingerprint_with(handle, &[body.as_slice()])?;
        self.web.free("fingerprinter", handle)?;
        Ok(Some(outcome(print.map(|fingerprint| {
            json!({ "method": seen.get("method"), "path": seen.get("path"), "fingerprint": fingerprint })
        }))))
    }
}

/// A request's headers, as `(name, value)` pairs.
type Headers = Vec<(String, String)>;

/// A vector's request — `method`, `path` and `headers` as `[name, value]` pairs — or `None`
/// when it is not one this runner can send.
fn request_parts(input: &Value) -> Option<(&str, &str, Headers)> {
    let method = input.get("method").and_then(Value::as_str)?;
    let path = input.get("path").and_then(Value::as_str)?;
    let mut headers = Vec::new();
    for pair in input
        .get("headers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        match pair.as_array().map(Vec::as_slice) {
            Some([Value::String(n), Value::String(v)]) => headers.push((n.clone(), v.clone())),
            _ => return None,
        }
    }
    Some((method, path, headers))
}
