//! The upstream's answer on the router path: captured (status, allow-listed headers, body within
//! `max_response_body`) and settled at its end; a detached exchange's answer relayed.

use super::*;

impl Filter {
    /// Ends the forwarded request with what is known now (response complete, or the stream is over).
    pub(super) fn end(&mut self, complete: bool) {
        let Stage::Forwarded(forwarded) = core::mem::replace(&mut self.stage, Stage::Idle) else {
            return;
        };
        if let Some(claim) = forwarded.order {
            let applied = matches!(
                (complete, &forwarded.answer),
                (true, Some(Capture { status: Some(status), .. })) if order::applies(*status)
            );
            order::settle(&self.shared, claim, applied, true);
        }
        let (facts, cause) = match (complete, forwarded.answer) {
            (true, Some(capture)) => match capture.status {
                Some(status) => (
                    ResponseFacts::Upstream {
                        status,
                        headers: capture.headers,
                        body: capture.body,
                    },
                    DoubtCause::Other,
                ),
                // An answer whose status cannot be read cannot be replayed, and the upstream may
                // have acted: in doubt, so the claim holds until its lease ends.
                None => {
                    host::log(LogLevel::Error, "the upstream answer could not be read whole (no valid :status, or a part the host did not hand over)");
                    (ResponseFacts::InDoubt, DoubtCause::Other)
                }
            },
            // The stream ended without a complete upstream answer: what the final details say.
            (_, _) => {
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
                // One host call for the status and the headers (`:status` is in the map).
                let mut status = None;
                // Headers the host cannot hand over leave the status unknown: in doubt.
                let headers = host::headers(MapType::HttpResponseHeaders).unwrap_or_default();
                let headers = headers
                    .iter()
                    .filter(|(name, value)| {
                        if *name == ":status" {
                            status = idemgate_core::answer::parse_status(value);
                        }
                        policy.replays_header(name)
                    })
                    .filter_map(|(name, value)| {
                        let value = core::str::from_utf8(value).ok()?;
                        Some((name.to_owned(), value.to_owned()))
                    })
                    .collect();
                if forwarded.order.is_some() && status.is_some_and(order::applies) {
                    order::mark_response();
                }
                forwarded.answer = Some(Capture {
                    status,
                    headers,
                    body: Some(Vec::new()),
                });
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
        let limit = self.policy().max_response_body;
        let Stage::Forwarded(Forwarded {
            answer: Some(capture),
            ..
        }) = &mut self.stage
        else {
            return Action::Continue;
        };
        if let Some(body) = &mut capture.body {
            if (body.len() as u64).saturating_add(size as u64) > limit {
                capture.body = None;
            } else {
                match host::body(BufferType::HttpResponseBody, size) {
                    Some(chunk) => body.extend_from_slice(&chunk),
                    // A body the edge cannot keep whole is an answer it cannot replay, and the
                    // upstream has acted: in doubt, like an unreadable status (issue 22); the
                    // rest of it is not copied for nothing.
                    None => {
                        capture.status = None;
                        capture.body = None;
                    }
                }
            }
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
