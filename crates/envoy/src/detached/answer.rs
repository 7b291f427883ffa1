//! A detached exchange's answer, on the root context that owns the callout: where it came from
//! (the upstream, a reply Envoy made, no answer), the claim settled under the core's rules, and
//! the relay the client's stream gets if it still exists.

use super::*;
use crate::shared::OrderClaim;
use idemgate_core::guard::{Callout, CalloutOrigin, Ending, Finish};

/// Classifies the answer of an exchange sent back into Envoy ([`Via::Reentry`]). The inner pass's
/// first filter marks every answer it passes with [`REENTRY_MARK`] (`details;attempts`), which is
/// classified by the router path's own table ([`classify_attempts`]): one rule for both paths.
/// The marker overwrites whatever the app sent; a second value, or one not of the marker's shape,
/// is an app's (behind a marker that appends) and makes the answer in doubt — read, it could have
/// had the app's own answer released and run again.
/// Without the mark, an answer from the re-entry listener (it has [`UPSTREAM_MARK`], set by the
/// async client's router) means the listener lacks the marking filter: in doubt — never stored,
/// never released — and [`Unmarked`](ReentryOrigin::Unmarked) so the filter says so in Envoy's
/// log. An unmarked answer without [`UPSTREAM_MARK`] is the async client's own reply (the
/// re-entry listener was never reached), classified as on the direct path.
pub fn classify_reentry(status: u16, headers: &Headers, body: &[u8]) -> ReentryOrigin {
    let mut marks = headers.iter().filter(|(name, _)| *name == REENTRY_MARK);
    if let Some((_, value)) = marks.next() {
        let mark = match marks.next() {
            None => core::str::from_utf8(value).ok().and_then(reentry_mark),
            Some(_) => None,
        };
        let Some((details, attempts)) = mark else {
            return ReentryOrigin::Marked(CalloutOrigin::InDoubt(DoubtCause::Other));
        };
        return ReentryOrigin::Marked(match classify_attempts(Some(details), || attempts) {
            Origin::Upstream => CalloutOrigin::Upstream,
            Origin::NeverReached => CalloutOrigin::NeverReached,
            Origin::InDoubt => CalloutOrigin::InDoubt(doubt_cause(Some(details))),
        });
    }
    if headers.iter().any(|(name, _)| name == UPSTREAM_MARK) {
        return ReentryOrigin::Unmarked;
    }
    ReentryOrigin::Marked(classify_answer(status, headers, body))
}

/// What [`classify_reentry`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReentryOrigin {
    /// The answer says where it came from.
    Marked(CalloutOrigin),
    /// An answer of the re-entry listener without its mark: the listener is misconfigured.
    Unmarked,
}

/// Classifies a callout's answer. The upstream's answers carry [`UPSTREAM_MARK`]; the replies
/// Envoy's router makes itself (inside the async client) do not, and say why in their body.
/// An unmarked answer that is none of the known replies is in doubt: wrongly calling it "never
/// reached" could cost a second execution, wrongly calling it in doubt only a 409 until the lease
/// ends.
pub fn classify_answer(status: u16, headers: &Headers, body: &[u8]) -> CalloutOrigin {
    if headers.iter().any(|(name, _)| name == UPSTREAM_MARK) {
        return CalloutOrigin::Upstream;
    }
    let text = core::str::from_utf8(body).unwrap_or("");
    const RESET: &str = "upstream connect error or disconnect/reset before headers. ";
    if status == 503 && text == "no healthy upstream" {
        return CalloutOrigin::NeverReached;
    }
    if let Some(rest) = text.strip_prefix(RESET) {
        // What follows the first "reset reason: " up to the next one (if any), up to a comma.
        const REASON: &str = "reset reason: ";
        let after = crate::origin::find(rest, REASON)
            .and_then(|i| rest.get(i + REASON.len()..))
            .unwrap_or("");
        let segment = match crate::origin::find(after, REASON) {
            Some(j) => after.get(..j).unwrap_or(""),
            None => after,
        };
        let reason = segment.split(',').next().unwrap_or("").trim();
        if NEVER_REACHED_RESETS.iter().any(|r| reason.starts_with(r)) {
            return CalloutOrigin::NeverReached;
        }
        return CalloutOrigin::InDoubt(DoubtCause::UpstreamReset);
    }
    if status == 504 && text == "upstream request timeout" {
        return CalloutOrigin::InDoubt(DoubtCause::UpstreamTimeout);
    }
    CalloutOrigin::InDoubt(DoubtCause::Other)
}

/// What the client's stream is sent when the exchange ends.
pub struct Relay {
    pub answer: HttpAnswer,
    /// The upstream's own answer (else a problem answer the edge made).
    pub from_upstream: bool,
    /// What the core did with the key (`None`: the store failed), for the stream's access log.
    pub outcome: Option<FinishOutcome>,
}

/// The exchange's answer has come (`num_headers == 0`: the call failed without one). Reads it,
/// has the core decide its ending ([`Ending`]), settles the key and the ordering claim as the
/// core says, and returns what the client gets if its stream still exists. Must run before any
/// `set_effective_context`: the answer's headers and body belong to the root context.
pub fn answered(
    exchange: Exchange,
    num_headers: usize,
    body_size: usize,
    client_waits: bool,
) -> Relay {
    let Exchange {
        shared,
        key,
        owner,
        claimed_at,
        kind,
        via,
        order,
        ..
    } = exchange;
    let callout = Callout {
        key,
        owner,
        claimed_at,
        kind,
        via,
        order,
    };
    let mut ending = Ending::new(callout, &shared.policy, client_waits);
    let headers = match num_headers {
        0 => None,
        _ => host::headers(MapType::HttpCallResponseHeaders),
    };
    let Finish {
        key,
        owner,
        facts,
        cause,
    } = read(
        &shared,
        &mut ending,
        num_headers,
        headers.as_ref(),
        body_size,
    );
    let outcome = settle(&shared, key, owner, facts, cause, false);
    let relayed = headers.iter().flat_map(|headers| headers.iter());
    let ended = ending.finished(outcome, relayed, host::now);
    for event in ended.events.iter() {
        shared.metrics.bump(Counter::from(event));
    }
    if let Some((claim, applied)) = ended.settle {
        crate::sequencer::settle(&shared, claim, applied, false);
    }
    Relay {
        answer: ended.answer,
        from_upstream: ended.from_upstream,
        outcome,
    }
}

/// Reads what only the filter can of the answer — whether one came whole, its head, its body
/// within the core's relay bound, where it came from — and hands it to the core.
fn read(
    shared: &Rc<Shared>,
    ending: &mut Ending<OrderClaim>,
    num_headers: usize,
    headers: Option<&Headers>,
    body_size: usize,
) -> Finish {
    if num_headers == 0 {
        return ending.no_answer(DoubtCause::UpstreamReset);
    }
    // An answer the host cannot hand over whole is no answer the edge can relay or store.
    let Some(headers) = headers else {
        return ending.no_answer(DoubtCause::Other);
    };
    let capture = Capture::head(headers.iter(), &shared.policy);
    let Some(status) = capture.status() else {
        host::log(LogLevel::Error, "the detached answer has no valid :status");
        return ending.no_answer(DoubtCause::Other);
    };
    let body = if ending.relays_whole(body_size) {
        match host::body(BufferType::HttpCallResponseBody, body_size) {
            Some(body) => Some(body),
            None => return ending.no_answer(DoubtCause::Other),
        }
    } else {
        None
    };
    if shared.debug.get() {
        host::log(
            LogLevel::Debug,
            &format!(
                "key {} detached answer: status {status}, {body_size} body bytes, upstream mark: {}",
                ending.key().log_label(),
                headers.iter().any(|(n, _)| n == UPSTREAM_MARK)
            ),
        );
    }
    let seen = body.as_deref().unwrap_or(&[]);
    let origin = match ending.via() {
        Via::Reentry => match classify_reentry(status, headers, seen) {
            ReentryOrigin::Marked(origin) => origin,
            ReentryOrigin::Unmarked => {
                shared.metrics.bump(Counter::ReentryUnmarked);
                host::log(LogLevel::Warn, UNMARKED);
                CalloutOrigin::InDoubt(DoubtCause::Other)
            }
        },
        Via::SkippingRoutesAndFilters => classify_answer(status, headers, seen),
    };
    ending.answered(origin, capture, body)
}

/// The warning for an answer of the re-entry listener without [`REENTRY_MARK`].
const UNMARKED: &str = "an answer from the re-entry cluster has no x-idemgate-reentry header: the internal listener must start its http_filters with the header_mutation filter that sets it (docs/deploy/envoy.md); the outcome is in doubt until the lease ends";
