//! `routes[i].order` and its defaults, compiled into an [`OrderRule`]. The table is
//! read by [`DeclaredTable`], the one reader of the format, and a bad one is refused with its own
//! `transition_table_*` code and the route's field, so the message says which route to fix.

use super::{header_name, item, refuse, span, ConfigError, KeySourceConfig, OrderConfig, Refusal};
use crate::order::transition::DeclaredTable;
use crate::order::{defaults, OrderRule};
use crate::policy::RouteKind;
use crate::request::json::JsonPointer;
use crate::request::key_source::KeySource;
use alloc::boxed::Box;
use alloc::sync::Arc;

/// The route's ordering rule, if it has one. Only callback routes carry provider events, and
/// only a `signed` route's are the provider's word: on a route that checks no signature anyone
/// can make up events for resources, each keeping a resource record for the TTL, so the guard
/// there takes the operator's explicit `unsigned: "allow"`.
pub(super) fn compile(
    route: usize,
    order: Option<&OrderConfig>,
    kind: RouteKind,
    signed: bool,
) -> Result<Option<Arc<OrderRule>>, Refusal> {
    let Some(order) = order else {
        return Ok(None);
    };
    let at = |field: &str| item("routes", route, &[".order", field].concat());
    if kind != RouteKind::Callback {
        return Err(refuse(
            at(""),
            &["only applies to routes of kind \"callback\" (or with a `preset`)"],
        ));
    }
    if !signed && !order.allow_unsigned {
        return Err(refuse(
            at(""),
            &["on a route without a `signature` anyone can make up events, each keeping a resource record for `ttl`: give the route its sender's `signature`, or set `order.unsigned: \"allow\"` to keep the guard on unsigned deliveries"],
        ));
    }
    if signed && order.allow_unsigned {
        return Err(refuse(
            at(".unsigned"),
            &["only applies to a route without a `signature`"],
        ));
    }
    let source = |field: &str, config: Option<&KeySourceConfig>| -> Result<KeySource, Refusal> {
        let field = at(field);
        match config {
            Some(KeySourceConfig::Header(name)) => {
                Ok(KeySource::Header(header_name(&field, name)?))
            }
            Some(KeySourceConfig::Json(pointer)) => JsonPointer::parse(pointer)
                .map(KeySource::Json)
                .map_err(|e| refuse(field, &[&e.message()])),
            Some(KeySourceConfig::Form(name)) if !name.is_empty() => {
                Ok(KeySource::Form(super::copy(name)))
            }
            Some(KeySourceConfig::Form(_)) => {
                Err(refuse(field, &["the form field name may not be empty"]))
            }
            Some(KeySourceConfig::CloudEvent) | None => Err(refuse(
                field,
                &["expected {\"header\": name}, {\"json\": pointer} or {\"form\": field}"],
            )),
        }
    };
    let resource = source(".resource", order.resource.as_ref())?;
    let event = source(".event", order.event.as_ref())?;
    let Some(table) = &order.table else {
        return Err(refuse(at(".table"), &["missing field"]));
    };
    let table = DeclaredTable::from_value(table).map_err(|error| {
        Refusal(Box::new(ConfigError::Table {
            field: at(".table"),
            error,
        }))
    })?;
    let retry_after = span(
        &at(".early.retry_after"),
        order.retry_after.as_deref(),
        defaults::RETRY_AFTER,
    )?;
    if retry_after.as_millis() == 0 {
        return Err(refuse(
            at(".early.retry_after"),
            &["must be longer than zero"],
        ));
    }
    let forward_after = match order.forward_after.as_deref() {
        None => None,
        Some(text) => Some(span(&at(".early.forward_after"), Some(text), "")?),
    };
    Ok(Some(Arc::new(OrderRule {
        resource,
        event,
        table,
        retry_after,
        forward_after,
    })))
}
