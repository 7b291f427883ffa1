//! A detached exchange's answer, on the root context that owns the callout: where it came from
//! (the upstream, a reply Envoy made, no answer), the claim settled under the core's rules, and
//! the relay the client's stream gets if it still exists.

use super::*;
use idemgate_core::guard::ordering::settlement;

/// Where a callout's answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CalloutOrigin {
    /// The upstream answered: its status, headers and body are the result.
    Upstream,
    /// Envoy's async client answered because the request never reached an upstream (no healthy
    /// upstream, connection refused): a retry is safe.
    NeverReached,
    /// No answer from the upstream after the request may have been sent.
    InDoubt(DoubtCause),
}

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
    /// The status of the upstream's own answer, if one came (relayed with or without its body).
    pub upstream_status: Option<u16>,
    /// Sent, but no whole answer came back: the request may still be running.
    pub in_doubt: bool,
}

/// The exchange's answer has come (`num_headers == 0`: the call failed without one). Reads it,
/// settles the key, and returns what the client gets if its stream still exists. Must run before
/// any `set_effective_context`: the answer's headers and body belong to the root context.
pub fn answered(
    exchange: Exchange,
    num_headers: usize,
    body_size: usize,
    client_waits: bool,
) -> Relay {
    let shared = Rc::clone(&exchange.shared);
    let order = exchange.order.clone();
    let mut relay = answered_exchange(exchange, num_headers, body_size, client_waits);
    // The core's rule: only the upstream's own 2xx applied the event; a reply Envoy made leaves
    // the resource's state and frees it; an outcome in doubt keeps it claimed until its lease
    // ends (the claim is dropped unsettled).
    let settled = order.map(|claim| (claim, settlement(relay.in_doubt, relay.upstream_status)));
    if let Some((claim, Some(applied))) = settled {
        crate::order::settle(&shared, claim, applied, false);
        if applied && relay.from_upstream {
            relay
                .answer
                .headers
                .push(idemgate_core::answer::order::applied_header());
        }
    }
    relay
}

/// [`answered`] for the delivery id's claim.
fn answered_exchange(
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
        ..
    } = exchange;
    let policy = Rc::clone(&shared.policy);
    if !client_waits {
        shared.metrics.bump(Counter::DetachedClientGone);
    }
    let no_answer = |shared: &Rc<Shared>, cause: DoubtCause| {
        let outcome = settle(shared, key, owner, ResponseFacts::InDoubt, cause, false);
        let answer = match outcome {
            Some(FinishOutcome::Released) => answer(&EdgeAnswer::Relay(RelayProblem::NotSent)),
            _ => {
                // Without a clock reading (now or at the claim), the whole lease: the longest
                // the claim can still hold, so a retry that waits that long is never early.
                let retry_after = match (host::now(), claimed_at) {
                    (Some(now), Some(at)) => now.until(at.after(policy.lease)),
                    _ => policy.lease,
                };
                answer(&EdgeAnswer::Relay(RelayProblem::NoAnswer { retry_after }))
            }
        };
        // Released means the core found it never sent: nothing can be running.
        let in_doubt = !matches!(outcome, Some(FinishOutcome::Released));
        Relay {
            answer,
            from_upstream: false,
            outcome,
            upstream_status: None,
            in_doubt,
        }
    };
    if num_headers == 0 {
        return no_answer(&shared, DoubtCause::UpstreamReset);
    }
    // An answer the host cannot hand over whole is no answer the edge can relay or store, and
    // the upstream may have acted: in doubt (never a body nobody sent).
    let Some(headers) = host::headers(MapType::HttpCallResponseHeaders) else {
        return no_answer(&shared, DoubtCause::Other);
    };
    // What the record keeps of it: the core's, as on the router path.
    let mut capture = Capture::head(headers.iter(), &policy);
    // An answer whose status cannot be read is no answer the edge can relay or store, and the
    // upstream may have acted: in doubt (no status 0 stored or relayed).
    let Some(status) = capture.status() else {
        host::log(LogLevel::Error, "the detached answer has no valid :status");
        return no_answer(&shared, DoubtCause::Other);
    };
    let relay_limit = usize::try_from(policy.max_relay_body).unwrap_or(usize::MAX);
    let body = if body_size <= relay_limit {
        match host::body(BufferType::HttpCallResponseBody, body_size) {
            Some(body) => Some(body),
            None => return no_answer(&shared, DoubtCause::Other),
        }
    } else {
        None
    };
    if shared.debug.get() {
        host::log(
            LogLevel::Debug,
            &format!(
                "key {} detached answer: status {status}, {body_size} body bytes, upstream mark: {}",
                key.log_label(),
                headers.iter().any(|(n, _)| n == UPSTREAM_MARK)
            ),
        );
    }
    let seen = body.as_deref().unwrap_or(&[]);
    let origin = match via {
        Via::Reentry => match classify_reentry(status, &headers, seen) {
            ReentryOrigin::Marked(origin) => origin,
            ReentryOrigin::Unmarked => {
                shared.metrics.bump(Counter::ReentryUnmarked);
                host::log(LogLevel::Warn, UNMARKED);
                CalloutOrigin::InDoubt(DoubtCause::Other)
            }
        },
        Via::SkippingRoutesAndFilters => classify_answer(status, &headers, seen),
    };
    match origin {
        CalloutOrigin::NeverReached => {
            let outcome = crate::settle::release(&shared, key, owner);
            // On re-entry this is Envoy's own reply on the inner pass (a direct response, an
            // authorization denial, a rate limit): the client gets exactly what the same request
            // without a key gets. The direct path's never-reached replies are the async client's
            // and say nothing a client can use.
            let answer = match (via, body) {
                (Via::Reentry, Some(body)) => HttpAnswer {
                    status,
                    headers: relayed_headers(&headers),
                    body,
                },
                _ => answer(&EdgeAnswer::Relay(RelayProblem::NotSent)),
            };
            Relay {
                answer,
                from_upstream: false,
                outcome,
                upstream_status: None,
                in_doubt: false,
            }
        }
        CalloutOrigin::InDoubt(cause) => no_answer(&shared, cause),
        CalloutOrigin::Upstream => {
            match &body {
                Some(body) if capture.wants(body.len() as u64) => capture.chunk(Some(body)),
                Some(_) => {}
                None => capture.pass(),
            }
            // On a callback route only a 2xx settles the key (the core's screen); else released.
            let facts = kind.screen(capture.facts());
            let in_doubt = facts == ResponseFacts::InDoubt;
            let outcome = settle(&shared, key, owner, facts, DoubtCause::Other, false);
            let Some(body) = body else {
                // Over `upstream.max_body`: the upstream's status and headers, without the body
                // and saying so (the core's mapping) — a success is never turned into a 5xx.
                shared.metrics.bump(Counter::RelayTooLarge);
                let headers = relayed_headers(&headers);
                return Relay {
                    answer: answer(&EdgeAnswer::RelayWithoutBody {
                        status,
                        headers: &headers,
                    }),
                    from_upstream: true,
                    outcome,
                    upstream_status: Some(status),
                    in_doubt,
                };
            };
            Relay {
                answer: HttpAnswer {
                    status,
                    headers: relayed_headers(&headers),
                    body,
                },
                from_upstream: true,
                outcome,
                upstream_status: Some(status),
                in_doubt,
            }
        }
    }
}

/// The warning for an answer of the re-entry listener without [`REENTRY_MARK`].
const UNMARKED: &str = "an answer from the re-entry cluster has no x-idemgate-reentry header: the internal listener must start its http_filters with the header_mutation filter that sets it (README, Deploy); the outcome is in doubt until the lease ends";

/// The answer headers a client is sent: end-to-end headers only, without Envoy's own and without
/// the re-entry mark.
pub(super) fn relayed_headers(headers: &Headers) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| {
            !name.starts_with(':') && !NOT_RELAYED.contains(name) && !name.starts_with("x-envoy-")
        })
        .filter_map(|(name, value)| {
            let value = core::str::from_utf8(value).ok()?;
            Some((name.to_owned(), value.to_owned()))
        })
        .collect()
}
