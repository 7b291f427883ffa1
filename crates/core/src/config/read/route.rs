//! A route's section of the document, read: its fields, key sources, signature, pass-through,
//! ordering rule and upstream.

use super::*;

pub(super) fn route(path: &str, value: &Value) -> Result<RouteConfig, Shape> {
    let mut r = RouteConfig {
        prefix: String::new(),
        methods: None,
        key: None,
        token: None,
        case_sensitive: None,
        forward: None,
        cluster: None,
        upstream_timeout: None,
        kind: None,
        key_from: None,
        signature: None,
        preset: None,
        pass_through: None,
        order: None,
        precondition: None,
        share: None,
        keys: Default::default(),
        in_flight: None,
    };
    // `prefix` has no "not given": it must be there.
    let mut has_prefix = false;
    for (key, value) in members(path, value)? {
        let at = join(path, key);
        let slot = match ROUTE_FIELDS.iter().position(|name| name == key) {
            // `prefix`
            Some(0) => {
                r.prefix = string(&at, value)?;
                has_prefix = true;
                continue;
            }
            // `methods`
            Some(1) => Slot::Texts(&mut r.methods),
            // `key`
            Some(2) => {
                r.key = opt_pick(&at, value, &KEYS)?;
                continue;
            }
            // `token`
            Some(3) => {
                r.token = opt_pick(&at, value, &TOKENS)?;
                continue;
            }
            // `case_sensitive`
            Some(7) => Slot::Bool(&mut r.case_sensitive),
            // `forward`
            Some(4) => {
                r.forward = opt_pick(&at, value, &FORWARDS)?;
                continue;
            }
            // `cluster`
            Some(5) => Slot::Text(&mut r.cluster),
            // `upstream_timeout`
            Some(6) => Slot::Text(&mut r.upstream_timeout),
            // `kind`
            Some(8) => {
                r.kind = opt_pick(&at, value, &ROUTE_KINDS)?;
                continue;
            }
            // `key_from`
            Some(9) => {
                r.key_from = match opt_array(&at, value)? {
                    None => None,
                    Some(items) => {
                        let mut sources = Vec::new();
                        for (i, item) in items.iter().enumerate() {
                            sources.push(key_source(&index(&at, i), item)?);
                        }
                        Some(sources)
                    }
                };
                continue;
            }
            // `signature`
            Some(10) => {
                r.signature = if value.is_null() {
                    None
                } else {
                    Some(signature(&at, value)?)
                };
                continue;
            }
            // `preset`
            Some(11) => {
                r.preset = opt_pick(&at, value, &PRESETS)?;
                continue;
            }
            // `pass_through`
            Some(12) => {
                r.pass_through = if value.is_null() {
                    None
                } else {
                    Some(pass_through(&at, value)?)
                };
                continue;
            }
            // `order`
            Some(13) => {
                r.order = if value.is_null() {
                    None
                } else {
                    Some(order(&at, value)?)
                };
                continue;
            }
            // `precondition`
            Some(14) => {
                r.precondition = opt_pick(&at, value, &PRECONDITIONS)?;
                continue;
            }
            // `share`
            Some(15) => {
                r.share = opt_share(&at, value)?;
                continue;
            }
            // `key_format`, `key_mismatch`, `key_scope`
            Some(i @ 16..=18) => {
                super::keys::key_rule(&at, i - 16, value, &mut r.keys)?;
                continue;
            }
            // `in_flight`
            Some(19) => {
                r.in_flight = super::in_flight::in_flight(&at, value)?;
                continue;
            }
            _ => return Err(unknown(path, key, ROUTE_FIELDS)),
        };
        fill(&at, value, slot)?;
    }
    if !has_prefix {
        return Err(shape(&join(path, "prefix"), &["missing field"]));
    }
    Ok(r)
}

pub(super) fn upstream(path: &str, value: &Value) -> Result<UpstreamConfig, Shape> {
    let mut u = UpstreamConfig::default();
    for (key, value) in members(path, value)? {
        let slot = match UPSTREAM_FIELDS.iter().position(|name| name == key) {
            // `reentry`
            Some(0) => Slot::Text(&mut u.reentry),
            // `cluster_skipping_routes_and_filters`
            Some(1) => Slot::Text(&mut u.cluster_skipping_routes_and_filters),
            // `timeout`
            Some(2) => Slot::Text(&mut u.timeout),
            // `max_body`
            Some(3) => Slot::Size(&mut u.max_body),
            // `cluster` (read to be refused with the way forward)
            Some(4) => Slot::Text(&mut u.cluster),
            _ => return Err(unknown(path, key, UPSTREAM_FIELDS)),
        };
        fill(&join(path, key), value, slot)?;
    }
    Ok(u)
}

/// `{"header": name}`, `{"json": pointer}`, `{"form": field}` or `{"cloudevents": true}`.
pub(super) fn key_source(path: &str, value: &Value) -> Result<KeySourceConfig, Shape> {
    const EXPECTED: &str = "expected {\"header\": name}, {\"json\": pointer}, {\"form\": field} or {\"cloudevents\": true}";
    let Value::Object(members) = value else {
        return Err(found(path, EXPECTED, value));
    };
    let [(key, value)] = members.as_slice() else {
        return Err(shape(path, &[EXPECTED]));
    };
    let at = join(path, key);
    if key == "cloudevents" {
        return match value {
            Value::Bool(true) => Ok(KeySourceConfig::CloudEvent),
            _ => Err(found(&at, "expected true", value)),
        };
    }
    let make = match key.as_str() {
        "header" => KeySourceConfig::Header,
        "json" => KeySourceConfig::Json,
        "form" => KeySourceConfig::Form,
        _ => return Err(shape(&at, &["unknown key source; ", EXPECTED])),
    };
    Ok(make(string(&at, value)?))
}

/// The `scheme` may be left to the route's preset; `compile` refuses a rule without one.
pub(super) fn signature(path: &str, value: &Value) -> Result<SignatureConfig, Shape> {
    let mut sig = SignatureConfig::default();
    for (key, value) in members(path, value)? {
        let at = join(path, key);
        let slot = match SIGNATURE_FIELDS.iter().position(|name| name == key) {
            // `scheme`
            Some(0) => {
                sig.scheme = opt_pick(&at, value, &SCHEMES)?;
                continue;
            }
            // `secret`
            Some(1) => Slot::Text(&mut sig.secret),
            // `secret_env`
            Some(2) => Slot::Text(&mut sig.secret_env),
            // `tolerance`
            Some(3) => Slot::Text(&mut sig.tolerance),
            // `secrets`
            Some(4) => Slot::Texts(&mut sig.secrets),
            // `secrets_env`
            Some(5) => Slot::Texts(&mut sig.secrets_env),
            _ => return Err(unknown(path, key, SIGNATURE_FIELDS)),
        };
        fill(&at, value, slot)?;
    }
    Ok(sig)
}

/// `{"header": name, "values": [value, ...]}` or `{"json": pointer, "values": [...]}`; which of
/// `header` and `json` is given is checked when the route is compiled.
pub(super) fn pass_through(path: &str, value: &Value) -> Result<PassThroughConfig, Shape> {
    let mut header = None;
    let mut json = None;
    let mut values = None;
    for (key, value) in members(path, value)? {
        let slot = match PASS_THROUGH_FIELDS.iter().position(|name| name == key) {
            // `header`
            Some(0) => Slot::Text(&mut header),
            // `json`
            Some(1) => Slot::Text(&mut json),
            // `values`
            Some(2) => Slot::Texts(&mut values),
            _ => return Err(unknown(path, key, PASS_THROUGH_FIELDS)),
        };
        fill(&join(path, key), value, slot)?;
    }
    match values {
        Some(values) => Ok(PassThroughConfig {
            header,
            json,
            values,
        }),
        None => Err(shape(&join(path, "values"), &["missing field"])),
    }
}

/// `{"resource": source, "event": source, "table": {...}, "early"?: {...}}`; the table is kept
/// as JSON for [`crate::order::transition::DeclaredTable`] to read (the one reader of that format).
pub(super) fn order(path: &str, value: &Value) -> Result<OrderConfig, Shape> {
    let mut o = OrderConfig::default();
    for (key, value) in members(path, value)? {
        let at = join(path, key);
        match ORDER_FIELDS.iter().position(|name| name == key) {
            // `resource`, `event`
            Some(i @ (0 | 1)) if !value.is_null() => {
                let source = key_source(&at, value)?;
                if matches!(source, KeySourceConfig::CloudEvent) {
                    return Err(shape(
                        &at,
                        &["expected {\"header\": name}, {\"json\": pointer} or {\"form\": field}"],
                    ));
                }
                *(if i == 0 {
                    &mut o.resource
                } else {
                    &mut o.event
                }) = Some(source);
            }
            Some(0 | 1) => {}
            // `table`
            Some(2) => o.table = (!value.is_null()).then(|| value.clone()),
            // `early`
            Some(3) if value.is_null() => {}
            Some(3) => {
                for (key, value) in members(&at, value)? {
                    let slot = match EARLY_FIELDS.iter().position(|name| name == key) {
                        Some(0) => Slot::Text(&mut o.retry_after),
                        Some(1) => Slot::Text(&mut o.forward_after),
                        _ => return Err(unknown(&at, key, EARLY_FIELDS)),
                    };
                    fill(&join(&at, key), value, slot)?;
                }
            }
            // `unsigned`
            Some(4) => o.allow_unsigned = opt_pick(&at, value, &UNSIGNED)?.is_some(),
            _ => return Err(unknown(path, key, ORDER_FIELDS)),
        }
    }
    for (name, given) in [
        ("resource", o.resource.is_some()),
        ("event", o.event.is_some()),
        ("table", o.table.is_some()),
    ] {
        if !given {
            return Err(shape(&join(path, name), &["missing field"]));
        }
    }
    Ok(o)
}
