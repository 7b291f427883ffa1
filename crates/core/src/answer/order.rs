//! The HTTP meaning of the sequencer's outcomes and of a route's precondition,
//! next to every other answer the edge makes: the host sends what it gets here, and adds
//! [`applied_header`] to an upstream answer that applied an event.

use super::{json_string, problem, HttpAnswer};
use crate::order::{BeginOutcome, PreconditionProblem, ORDER_HEADER};
use crate::policy::ProblemStyle;
use crate::time::Span;
use alloc::string::String;
use alloc::vec::Vec;

/// What the edge answers for an ordered event it does not simply forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum OrderAnswer<'a> {
    /// Applied before, or stale: 200, never forwarded.
    AlreadyApplied { state: &'a str },
    /// No later state accepts it: 200, never forwarded (counted and logged by the host).
    Illegal { state: &'a str },
    /// 409 `order_event_early`: deliver it again after `retry_after`.
    Early { retry_after: Span },
    /// 409 `order_resource_busy`: another event for the resource is in flight.
    Busy { retry_after: Span },
    /// 400 `order_resource_missing`: a tracked event without a resource id.
    ResourceMissing,
    /// 500 `order_state_unknown`: the stored state is not in the route's table.
    StateUnknown,
    /// 503 `order_record_corrupt`: the remote store's record of the resource failed its seal
    /// check; the event is neither forwarded nor acknowledged, so its sender delivers it again.
    RecordCorrupt,
    /// A route's precondition does not hold (428 or 400).
    Precondition(PreconditionProblem),
}

impl<'a> OrderAnswer<'a> {
    /// The answer for a [`BeginOutcome`] the edge answers itself; `None` when the event goes on
    /// to the upstream (or the store's failure mode decides).
    pub(crate) fn of(outcome: &'a BeginOutcome) -> Option<OrderAnswer<'a>> {
        Some(match outcome {
            BeginOutcome::AlreadyApplied { state } => OrderAnswer::AlreadyApplied { state },
            BeginOutcome::Illegal { state, .. } => OrderAnswer::Illegal { state },
            BeginOutcome::Early { retry_after } => OrderAnswer::Early {
                retry_after: *retry_after,
            },
            BeginOutcome::Busy { retry_after } => OrderAnswer::Busy {
                retry_after: *retry_after,
            },
            BeginOutcome::UnknownState { .. } => OrderAnswer::StateUnknown,
            _ => return None,
        })
    }
}

/// The header an upstream's answer gets when it applied an event: `idemgate-order: applied`.
pub fn applied_header() -> (String, String) {
    (ORDER_HEADER.into(), "applied".into())
}

/// Maps an ordering or precondition answer to HTTP, its problems written in `style`.
pub(crate) fn order_answer(edge: &OrderAnswer<'_>, style: &ProblemStyle) -> HttpAnswer {
    let with_order = |mut http: HttpAnswer, value: &str| {
        http.headers.push((ORDER_HEADER.into(), value.into()));
        http
    };
    match edge {
        OrderAnswer::AlreadyApplied { state } => {
            acknowledged("already_applied", "already-applied", state)
        }
        OrderAnswer::Illegal { state } => acknowledged("illegal", "illegal", state),
        OrderAnswer::Early { retry_after } => with_order(
            problem(
                style,
                409,
                "order_event_early",
                "Event arrived early",
                "this event applies to a state the resource has not reached yet; it was not forwarded: deliver it again after the indicated time",
                Some(*retry_after),
            ),
            "early",
        ),
        OrderAnswer::Busy { retry_after } => problem(
            style,
            409,
            "order_resource_busy",
            "Resource busy",
            "another event for this resource is being processed; deliver this one again after the indicated time",
            Some(Span(retry_after.0.max(1000))),
        ),
        OrderAnswer::ResourceMissing => problem(
            style,
            400,
            "order_resource_missing",
            "Resource id missing",
            "this event type is ordered per resource on this route, but the request names no resource id where the route looks for it",
            None,
        ),
        OrderAnswer::StateUnknown => problem(
            style,
            500,
            "order_state_unknown",
            "Resource state unknown",
            "the state stored for this resource is not in the route's state table; the event was not forwarded. Ask the operator to remove the record",
            None,
        ),
        OrderAnswer::RecordCorrupt => problem(
            style,
            503,
            "order_record_corrupt",
            "Resource state failed its integrity check",
            "the state stored for this resource was not written by the edge, so it decides nothing; the event was not forwarded: deliver it again later, and ask the operator to remove the record",
            None,
        ),
        OrderAnswer::Precondition(PreconditionProblem::Required) => problem(
            style,
            428,
            "precondition_required",
            "Precondition required",
            "updates on this route must name the version they read: send If-Match with the ETag of the resource",
            None,
        ),
        OrderAnswer::Precondition(PreconditionProblem::VersionRequired) => problem(
            style,
            428,
            "precondition_version_required",
            "Precondition names no version",
            "updates on this route must name the version they read: send If-Match with the ETag of the resource, not \"*\"",
            None,
        ),
        OrderAnswer::Precondition(p) => problem(
            style,
            400,
            p.code(),
            "Malformed If-Match",
            "If-Match must be \"*\" or a comma-separated list of entity-tags such as \"v3\"",
            None,
        ),
    }
}

/// A 200 the edge makes for an event it acknowledges without forwarding.
fn acknowledged(outcome: &str, header: &str, state: &str) -> HttpAnswer {
    let mut body: Vec<u8> = Vec::new();
    body.extend_from_slice(b"{\"order\":");
    body.extend_from_slice(json_string(outcome).as_bytes());
    body.extend_from_slice(b",\"state\":");
    body.extend_from_slice(json_string(state).as_bytes());
    body.push(b'}');
    HttpAnswer {
        status: 200,
        headers: alloc::vec![
            ("content-type".into(), "application/json".into()),
            ("cache-control".into(), "no-store".into()),
            (ORDER_HEADER.into(), header.into()),
        ],
        body,
    }
}
