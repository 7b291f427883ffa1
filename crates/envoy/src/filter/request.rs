//! A request's headers and body: route match, key, scope and storage key from the headers, then
//! each body chunk fingerprinted (and kept where a key source, the ordering guard or a detached
//! exchange needs it) within `max_request_body` and the hashing budget, until the claim.

use super::*;

impl Filter {
    pub(super) fn start(&mut self, end_of_stream: bool) -> Action {
        let policy = self.policy();
        // One host call: the pseudo-headers come with the rest (a guarded request needs them all).
        let Some(headers) = host::headers(MapType::HttpRequestHeaders) else {
            // Read as a request without headers it would have no key and go unguarded.
            return self.reply(&EdgeAnswer::RequestUnreadable);
        };
        let (Some(method), Some(path)) = (
            header_text(&headers, ":method"),
            header_text(&headers, ":path"),
        ) else {
            return Action::Continue;
        };
        if guard::asks_for_token(&policy, method, path) {
            return self.issue_token(&headers, path);
        }
        // Matched on the normalised path; `guarded` is the spelling the storage key and the
        // fingerprint use, so every spelling of one path is one request (issue 14).
        let Some(matched) = policy.match_request(method, path) else {
            return Action::Continue;
        };
        let route = matched.route;
        if let Some((http, events)) = order::precondition(route, method, &headers) {
            self.count_all(events);
            return self.send(&http);
        }
        // The core's spelling, the one the browser module fingerprints with too (issue 22).
        let guarded = matched.target(path);
        self.kind = route.kind;
        // What the request must show, and in which order, is the core's call.
        // `admit` reads the clock only for a signature's time window: a route without one costs
        // no clock read here.
        let now = match route.signature {
            Some(_) => match host::now() {
                Some(now) => now,
                None => return self.reply(&EdgeAnswer::ClockUnavailable),
            },
            None => UnixMillis(0),
        };
        let admission = match admit(route, &|name: &str| header_values(&headers, name), now) {
            Ok(admission) => admission,
            Err(refusal) => return self.refuse(&refusal),
        };
        let facts = HeaderFacts::new(&headers);
        // A callback route is its own scope (the provider is the client).
        let client = match route.own_scope() {
            Some(scope) => Some(ClientIdentity {
                source: scope.source.to_owned(),
                value: scope.value.to_vec(),
                verified: true,
            }),
            None => match identify(&policy, &facts) {
                Ok(client) => client,
                // Never the next scope source because a read failed (issue 22).
                Err(Unreadable) => return self.reply(&EdgeAnswer::RequestUnreadable),
            },
        };
        if let Some(client) = &client {
            match client.payers(&policy, &facts) {
                Ok(payers) => self.payers = payers,
                // Not "no address": the record would go uncharged to the client's address.
                Err(Unreadable) => return self.reply(&EdgeAnswer::RequestUnreadable),
            }
        }
        let token = match self.verify_token(client.as_ref(), route, method, &headers) {
            Ok(token) => token,
            Err(action) => return action,
        };
        let tag = |scope: Scope<'_>| self.shared.scope_tag.of(scope);
        let key = match guard::start(admission, client, tag, method, &matched.path) {
            Start::Keyed(key) => key,
            // Optional key, none given: no idempotency, but a required token still applies.
            Start::Unguarded => return self.unguarded(token),
            Start::Unscoped => return self.unscoped(&policy),
        };
        // A client must not steer a guarded execution (issue 21): Envoy's control headers
        // (`x-envoy-retry-on`, `x-envoy-upstream-rq-timeout-ms`, ...) leave the request before the
        // router sees it. A detached exchange never forwards them (`detached::forward_headers`).
        if route.forward == Forward::Router {
            for (name, _) in headers
                .iter()
                .filter(|(name, _)| detached::steers_envoy(name))
            {
                if !host::remove_request_header(name) {
                    return self.reply(&EdgeAnswer::Relay(RelayProblem::NotSent));
                }
            }
        }
        // The peer is looked up only for a body to come (its bytes are charged to its address
        // group; streams without an address share the empty group). A failed read is not "no
        // address" (issue 22).
        let peer: Rc<[u8]> = if end_of_stream {
            Rc::from(&[][..])
        } else {
            match idemgate_core::identity::peer_group(&policy, &facts) {
                Ok(group) => Rc::from(group.unwrap_or_default()),
                Err(Unreadable) => return self.reply(&EdgeAnswer::RequestUnreadable),
            }
        };
        let fingerprint =
            FingerprintBuilder::new(&policy.fingerprint, method, &guarded, headers.iter());
        let probe = Probe::start(route, headers.iter());
        let held = match &route.forward {
            Forward::Detached(detached) => Some(Box::new(Held {
                route: detached.clone(),
                headers,
            })),
            Forward::Router => None,
        };
        // Each copy of the body the machine keeps until the claim is charged (issue 23).
        let keeps_order = probe.as_ref().is_some_and(Probe::keeps_body);
        let host_copies = u64::from(keeps_order) + u64::from(held.is_some());
        let intaking = Intaking {
            intake: Intake::new(key, fingerprint, host_copies, &policy),
            reservation: Reservation::new(Rc::clone(&self.shared.hashing), peer),
            probe,
            token,
            owner: self.shared.owners.next(),
            payers: self.payers,
        };
        let mut machine = Box::new(Guarded::take(&policy, self.kind, intaking, held));
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
        let Some(mut machine) = self.take_machine() else {
            return Action::Continue;
        };
        if machine.is_taking() {
            machine.body_end();
        }
        self.run(machine)
    }
}
