//! What the sequencer reads of a request (decided in the core, not the filter):
//! the values of the rule's header sources at the start, the body while it streams when a source
//! is in it, and at the end the event and its resource — before the delivery id's claim, so a
//! refused event writes nothing. [`applies`] says which upstream answers applied the event.

use crate::answer::order::{order_answer, OrderAnswer};
use crate::answer::HttpAnswer;
use crate::client::scope::ROUTE_SCOPE_SOURCE;
use crate::client::scope::{Scope, StorageKey};
use crate::order::{OrderFacts, OrderRule};
use crate::policy::ProblemStyle;
use crate::policy::Route;
use crate::request::key_source::KeySource;
use alloc::borrow::ToOwned;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

/// What the guard keeps of a request until its body is complete.
#[derive(Debug)]
pub struct Probe {
    rule: Arc<OrderRule>,
    /// The route's own scope (callback routes are their own scope): part of the resource's key.
    scope_value: String,
    /// Every value of the rule's header sources, read at the start.
    headers: Vec<(String, Vec<u8>)>,
    /// The body, when a source is in it (bounded by `max_request_body` like the hashing).
    body: Vec<u8>,
}

/// A tracked event for one resource, before the store has seen it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ordered {
    pub(crate) rule: Arc<OrderRule>,
    /// The resource's record.
    pub(crate) key: StorageKey,
    pub(crate) event: String,
}

/// A tracked event without a resource id: refused before any store write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceMissing;

impl ResourceMissing {
    /// 400 `order_resource_missing`, written in `style`.
    pub(crate) fn answer(&self, style: &ProblemStyle) -> HttpAnswer {
        order_answer(&OrderAnswer::ResourceMissing, style)
    }
}

impl Probe {
    /// The probe of a request on `route`, if the route orders its events; `headers` are the
    /// request's, as `(lowercase name, value)`.
    pub fn start<'h>(
        route: &Route,
        headers: impl IntoIterator<Item = (&'h str, &'h [u8])>,
    ) -> Option<Probe> {
        let rule = route.order.as_ref()?;
        let names: Vec<&str> = [&rule.resource, &rule.event]
            .into_iter()
            .filter_map(|s| match s {
                KeySource::Header(name) => Some(name.as_str()),
                _ => None,
            })
            .collect();
        let kept = headers
            .into_iter()
            .filter(|(name, _)| names.contains(name))
            .map(|(name, value)| (name.to_owned(), value.to_vec()))
            .collect();
        Some(Probe {
            rule: Arc::clone(rule),
            scope_value: route.prefix.clone(),
            headers: kept,
            body: Vec::new(),
        })
    }

    /// Whether [`Probe::update`] keeps the body (a source is in it): a copy a host's memory
    /// budget counts.
    pub(crate) fn keeps_body(&self) -> bool {
        self.rule.needs_body()
    }

    /// A piece of the body, in order.
    pub fn update(&mut self, chunk: &[u8]) {
        if self.rule.needs_body() {
            self.body.extend_from_slice(chunk);
        }
    }

    /// The body is complete: `Ok(None)` is an event the route does not order (handled as
    /// without `order`), `Err` a tracked event without a resource id.
    pub fn finish(self) -> Result<Option<Ordered>, ResourceMissing> {
        let Probe {
            rule,
            scope_value,
            headers,
            body,
        } = self;
        let lookup = |name: &str| -> Vec<&[u8]> {
            headers
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| v.as_slice())
                .collect()
        };
        match rule.read(&lookup, &body) {
            OrderFacts::NotOrdered => Ok(None),
            OrderFacts::ResourceMissing => Err(ResourceMissing),
            OrderFacts::Ordered { resource, event } => {
                let scope = Scope {
                    source: ROUTE_SCOPE_SOURCE,
                    value: scope_value.as_bytes(),
                };
                Ok(Some(Ordered {
                    key: StorageKey::resource(scope, &resource),
                    rule,
                    event,
                }))
            }
        }
    }
}

/// Whether an upstream answer with `status` applied the event: a 2xx.
pub fn applies(status: u16) -> bool {
    (200..300).contains(&status)
}

/// What an event's outcome does to its resource's claim (`docs/semantics.md` §5): `Some(applied)`
/// settles it — applied only by the upstream's own 2xx (`upstream_status`), given back otherwise —
/// and `None` keeps it when the outcome is in doubt (sent, no whole answer: a reset, a timeout, the
/// client gone), since the event may still be running: until the claim's lease ends a second event
/// for the resource is busy (409), never forwarded beside it, like the delivery id.
pub(crate) fn settlement(in_doubt: bool, upstream_status: Option<u16>) -> Option<bool> {
    (!in_doubt).then(|| upstream_status.is_some_and(applies))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    fn policy() -> Policy {
        let json = r#"{"routes": [
            {"prefix": "/hooks/shop", "kind": "callback", "key_from": [{"header": "x-delivery"}],
             "order": {"unsigned": "allow", "resource": {"json": "/order/id"}, "event": {"header": "x-topic"},
                       "table": {"initial": "new", "transitions": [["new", "pay", "paid"]]}}},
            {"prefix": "/plain"}]}"#;
        Policy::from_json(json, &|_| None).unwrap_or_else(|e| panic!("{e}"))
    }

    fn probe(
        policy: &Policy,
        topic: &str,
        body: &[u8],
    ) -> Result<Option<Ordered>, ResourceMissing> {
        let headers = [("x-topic", topic.as_bytes()), ("x-other", b"1")];
        let mut probe =
            Probe::start(&policy.routes[0], headers).unwrap_or_else(|| panic!("no probe"));
        assert!(probe.keeps_body(), "the resource is in the body");
        for piece in body.chunks(3) {
            probe.update(piece);
        }
        probe.finish()
    }

    #[test]
    fn the_event_and_its_resource_are_read_at_the_end_of_the_body() {
        let policy = policy();
        let ordered = probe(&policy, "pay", br#"{"order":{"id":"o-1"}}"#)
            .unwrap()
            .unwrap();
        assert_eq!(ordered.event, "pay");
        let scope = Scope {
            source: ROUTE_SCOPE_SOURCE,
            value: b"/hooks/shop",
        };
        assert_eq!(ordered.key, StorageKey::resource(scope, "o-1"));
        let other = probe(&policy, "pay", br#"{"order":{"id":"o-2"}}"#)
            .unwrap()
            .unwrap();
        assert_ne!(other.key, ordered.key);
    }

    #[test]
    fn an_event_without_its_resource_is_refused_and_an_unknown_one_is_not_ordered() {
        let policy = policy();
        let missing = probe(&policy, "pay", b"{}").unwrap_err();
        assert_eq!(missing.answer(&ProblemStyle::DEFAULT).status, 400);
        assert_eq!(
            probe(&policy, "refund", br#"{"order":{"id":"o-1"}}"#),
            Ok(None)
        );
        assert!(
            Probe::start(&policy.routes[1], []).is_none(),
            "a route without order"
        );
    }

    #[test]
    fn only_a_2xx_applies_the_event() {
        for (status, applied) in [
            (199, false),
            (200, true),
            (204, true),
            (299, true),
            (300, false),
            (409, false),
        ] {
            assert_eq!(applies(status), applied, "{status}");
        }
    }
}
