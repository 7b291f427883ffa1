//! The upstream's answer on the router path: captured (status, allow-listed headers, body within
//! `max_response_body`) and settled at its end; a detached exchange's answer relayed.

use super::*;

impl Filter {
    /// Ends the forwarded request with what is known now (response complete, or the stream is over).
    pub(super) fn end(&mut self, complete: bool) {
        let Stage::Forwarded(forwarded) = core::mem::replace(&mut self.stage, Stage::Idle) else {
            return;
        };
        let complete = if complete { forwarded.answer } else { None };
        if let Some(claim) = forwarded.order {
            let status = complete.as_ref().and_then(Capture::status);
            order::settle(
                &self.shared,
                claim,
                status.is_some_and(order::applies),
                true,
            );
        }
        let (facts, cause) = match complete {
            Some(capture) => {
                let facts = capture.facts();
                // An answer whose status cannot be read cannot be replayed, and the upstream may
                // have acted: in doubt, so the claim holds until its lease ends.
                if facts == ResponseFacts::InDoubt {
                    host::log(LogLevel::Error, "the upstream answer could not be read whole (no valid :status, or a part the host did not hand over)");
                }
                (facts, DoubtCause::Other)
            }
            // The stream ended without a complete upstream answer: what the final details say.
            None => {
                let details = host::property_text(&["response", "code_details"]);
                (
                    classify_end(details.as_deref()).facts_without_answer(),
                    doubt_cause(details.as_deref()),
                )
            }
        };
        self.finish_claim(forwarded.key, forwarded.owner, facts, cause);
    }

    pub(super) fn response_headers(&mut self, end_of_stream: bool) -> Action {
        let policy = self.policy();
        let Stage::Forwarded(forwarded) = &mut self.stage else {
            return Action::Continue;
        };
        let details = host::property_text(&["response", "code_details"]);
        match classify_end(details.as_deref()) {
            Origin::Upstream => {
                // One host call for the status and the headers (`:status` is in the map); a head
                // the host cannot hand over leaves the status unknown: in doubt.
                let capture = match host::headers(MapType::HttpResponseHeaders) {
                    Some(headers) => Capture::head(headers.iter(), &policy),
                    None => Capture::unreadable(&policy),
                };
                if forwarded.order.is_some() && capture.status().is_some_and(order::applies) {
                    order::mark_response();
                }
                forwarded.answer = Some(capture);
                if end_of_stream {
                    self.end(true);
                }
            }
            // A reply Envoy or a later filter made: the upstream's outcome is known now.
            origin => {
                let Stage::Forwarded(forwarded) = core::mem::replace(&mut self.stage, Stage::Idle)
                else {
                    return Action::Continue;
                };
                if let Some(claim) = forwarded.order {
                    order::settle(&self.shared, claim, false, true);
                }
                self.finish_claim(
                    forwarded.key,
                    forwarded.owner,
                    origin.facts_without_answer(),
                    doubt_cause(details.as_deref()),
                );
            }
        }
        Action::Continue
    }

    pub(super) fn response_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        let Stage::Forwarded(Forwarded {
            answer: Some(capture),
            ..
        }) = &mut self.stage
        else {
            return Action::Continue;
        };
        // Read only while the core keeps the body: past `max_response_body` it is passed on,
        // not copied for nothing. A chunk the host cannot hand over leaves it in doubt.
        if capture.wants(size as u64) {
            capture.chunk(host::body(BufferType::HttpResponseBody, size).as_deref());
        }
        if end_of_stream {
            self.end(true);
        }
        Action::Continue
    }

    /// Gives the client its detached exchange's outcome (the key is settled already). Called on
    /// the root context's callout answer, with this stream made the effective context.
    pub fn relay(&mut self, relay: &Relay) {
        self.stage = Stage::Idle;
        if let Some(outcome) = relay.outcome {
            crate::access_log::record_outcome(outcome);
        }
        if relay.from_upstream {
            host::send_with_details(&relay.answer, RELAY_DETAILS);
        } else {
            host::send(&relay.answer);
        }
    }
}
