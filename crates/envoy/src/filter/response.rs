//! The upstream's answer on the router path, handed to the core's machine (status, headers, the
//! body it keeps) and settled at its end; a detached exchange's answer relayed.

use super::*;

impl Filter {
    /// Ends the forwarded request with what is known now (response complete, or the stream is
    /// over). A request paused for a callout is told its client is gone: its machine takes the
    /// answer when it comes (`crate::dispatch` keeps this filter until then) and gives back what
    /// it holds.
    pub(super) fn end(&mut self, complete: bool) {
        // A parked duplicate's client is gone (or it was answered): its slot is free.
        self.unpark_unless(false);
        if self.tell_waiting_gone() {
            return;
        }
        let Some(mut machine) = self.take_machine() else {
            return;
        };
        if !machine.is_forwarded() {
            // A body still being taken in: nothing was claimed, and its reservation goes now.
            return;
        }
        // The stream ended without a complete upstream answer: what the final details say.
        machine.ended(complete, || {
            let details = host::property_text(&["response", "code_details"]);
            (
                classify_end(details.as_deref()).facts_without_answer(),
                doubt_cause(details.as_deref()),
            )
        });
        self.run(machine);
    }

    pub(super) fn response_headers(&mut self, end_of_stream: bool) -> Action {
        let Some(mut machine) = self.take_machine() else {
            // A request let on holds no machine: one the store could not decide for is marked.
            if let Some(why) = self.degraded {
                mark_degraded(why);
            }
            return Action::Continue;
        };
        let details = host::property_text(&["response", "code_details"]);
        match classify_end(details.as_deref()) {
            Origin::Upstream => {
                // One host call for the status and the headers (`:status` is in the map); a head
                // the host cannot hand over leaves the status unknown: in doubt.
                let policy = &self.shared.policy;
                let capture = match host::headers(MapType::HttpResponseHeaders) {
                    Some(headers) => Capture::head(headers.iter(), policy),
                    None => Capture::unreadable(policy),
                };
                machine.upstream_head(capture);
            }
            // A reply Envoy or a later filter made: the upstream's outcome is known now.
            origin => machine.ended(false, || {
                (
                    origin.facts_without_answer(),
                    doubt_cause(details.as_deref()),
                )
            }),
        }
        self.run(machine);
        if end_of_stream {
            self.end(true);
        }
        Action::Continue
    }

    pub(super) fn response_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        let Stage::Guarded {
            machine,
            call: None,
        } = &mut self.stage
        else {
            return Action::Continue;
        };
        // Read only while the core keeps the body: past `max_response_body` it is passed on,
        // not copied for nothing. A chunk the host cannot hand over leaves it in doubt.
        if machine.upstream_wants(size as u64) {
            machine.upstream_chunk(host::body(BufferType::HttpResponseBody, size).as_deref());
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

/// Marks the answer of a request let on unprotected: the core's header, replacing any an upstream
/// sent, so the client reads this edge's word only.
fn mark_degraded(why: Degraded) {
    let (name, value) = why.header();
    let map = MapType::HttpResponseHeaders;
    let marked = crate::abi::remove_header(map, name)
        .and_then(|()| crate::abi::add_header(map, name, value));
    if marked.is_err() {
        host::log(
            LogLevel::Warn,
            "degraded: could not add the idempotent-degraded header",
        );
    }
}
