//! A request's headers and body, handed to the core: its headers decided by [`guard::head`]
//! (Envoy's facts through [`Edge`]), then each body chunk charged and taken in by the core's
//! machine, until the claim.

use super::*;

/// What only Envoy gives for a request's headers ([`guard::Host`]).
struct Edge<'a>(&'a Shared);

impl guard::Host for Edge<'_> {
    fn property(&self, path: &[&str]) -> Result<Option<Vec<u8>>, Unreadable> {
        host::property_read(path).ok_or(Unreadable)
    }
    fn now(&self) -> Option<UnixMillis> {
        host::now()
    }
    fn nonce(&self) -> [u8; 16] {
        crate::entropy::random16()
    }
    fn owner(&self) -> OwnerToken {
        self.0.owners.next()
    }
    fn scopes(&self) -> &ScopeHashes {
        &self.0.scopes
    }
    fn budget(&self) -> Rc<Budget> {
        Rc::clone(&self.0.hashing)
    }
    fn relay_budget(&self) -> Rc<Budget> {
        Rc::clone(&self.0.relay)
    }
}

impl Filter {
    /// The request's headers, decided by the core ([`guard::head`]): on untouched, answered,
    /// forwarded unguarded, or keyed — its machine then takes the body in.
    pub(super) fn start(&mut self, end_of_stream: bool) -> Action {
        let policy = self.policy();
        // One host call: the pseudo-headers come with the rest (a guarded request needs them all).
        let Some(headers) = host::headers(MapType::HttpRequestHeaders) else {
            // Read as a request without headers it would have no key and go unguarded.
            return self.reply(&EdgeAnswer::RequestUnreadable);
        };
        let edge = Edge(&self.shared);
        // The core scans the headers once per rule that reads one: a slice, walked cheaply.
        let pairs = headers.pairs();
        let (headed, events) = guard::head(&policy, pairs.iter().copied(), !end_of_stream, &edge);
        self.count_all(events);
        let keyed = match headed {
            Headed::Pass => return Action::Continue,
            Headed::Answer(http) => return self.send(&http),
            Headed::Unguarded { token, payers } => {
                return self.run(Box::new(Guarded::unguarded(&policy, token, payers)))
            }
            Headed::Keyed(keyed) => keyed,
        };
        let route = keyed.route();
        // A client must not steer a guarded execution: Envoy's control headers
        // (`x-envoy-retry-on`, `x-envoy-upstream-rq-timeout-ms`, ...) leave the request before the
        // router sees it. A detached exchange never forwards them (`detached::forward_headers`).
        if route.forward == Forward::Router {
            for (name, _) in pairs
                .iter()
                .filter(|(name, _)| idemgate_core::headers::steers_proxy(name))
            {
                if !host::remove_request_header(name) {
                    return self.reply(&EdgeAnswer::Relay(RelayProblem::NotSent));
                }
            }
        }
        let kind = route.kind;
        let keep = |detached: &Detached| {
            Box::new(Held {
                route: detached.clone(),
                kind,
                headers,
            })
        };
        let mut machine = Box::new(keyed.take(&policy, keep));
        if end_of_stream {
            machine.body_end();
            return self.run(machine);
        }
        self.stage = Stage::Guarded {
            machine,
            call: None,
        };
        // Headers go on to the buffer filter, which holds the request until its body is complete.
        Action::Continue
    }

    /// A body chunk: charged by the core's machine before it is read, then handed to it.
    pub(super) fn hash_chunk(&mut self, size: usize, end_of_stream: bool) -> Action {
        if self.waits() {
            // Held (Envoy buffers the chunk) until the answer lets the request on, or answers it.
            return Action::Pause;
        }
        let Stage::Guarded {
            machine,
            call: None,
        } = &mut self.stage
        else {
            return Action::Continue;
        };
        if !machine.is_taking() {
            return Action::Continue;
        }
        if machine.body_wants(size as u64) {
            machine.body_chunk(host::body(BufferType::HttpRequestBody, size).as_deref());
        }
        if !end_of_stream && machine.is_taking() {
            return Action::Continue;
        }
        self.body_end()
    }

    /// The request is complete (its last chunk, or its trailers): the machine's claim is made,
    /// or the request answered for its body.
    pub(super) fn body_end(&mut self) -> Action {
        if self.waits() {
            return Action::Pause;
        }
        let Some(mut machine) = self.take_machine() else {
            return Action::Continue;
        };
        if machine.is_taking() {
            machine.body_end();
        }
        self.run(machine)
    }
}
