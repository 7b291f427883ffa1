//! A request's headers: the guard's first input. The host hands over the
//! header list it read, pseudo-headers included, and the facts only it has ([`Host`]: its
//! connection's properties, its clock, fresh randomness, the scopes' kept hashes, its hashing
//! budget — each asked for only when a rule needs it). [`head`] decides what becomes of the
//! request before its body, in the one order the edge applies: the token endpoint, the route,
//! its precondition, admission (key, signature), the client's identity and payers, a required
//! token, then keyed or not. A keyed request's [`Keyed::take`] makes the machine
//! ([`Guarded`]) that takes its body in.

use super::{
    asks_for_token, check_token, issue_token, refused, start, unscoped, Events, Guarded, Intake,
    Intaking, Start, VerifiedToken,
};
use crate::answer::order::{order_answer, OrderAnswer};
use crate::answer::{answer_for, published, EdgeAnswer, HttpAnswer};
use crate::client::identity::{
    identify, peer_group, ClientIdentity, Facts, ScopeHashes, Unreadable,
};
use crate::client::payer::Payers;
use crate::decision::admission::admit;
use crate::guard::sequencer::Probe;
use crate::policy::{Detached, Forward, Policy, Route};
use crate::record::OwnerToken;
use crate::request::budget::{Budget, Reservation};
use crate::request::fingerprint::FingerprintBuilder;
use crate::request::key_format::KeyScope;
use crate::time::UnixMillis;
use alloc::borrow::ToOwned;
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::OnceCell;
use core::marker::PhantomData;

/// What only the host can give for a request's headers. The guard asks for each only when a
/// rule needs it: an unguarded request reads no clock, draws no owner token and no tag.
pub trait Host {
    /// A property of the request (`["source", "address"]`: the peer's address); `Ok(None)` when
    /// the host has none. The guard reads the peer's address at most once per request.
    fn property(&self, path: &[&str]) -> Result<Option<Vec<u8>>, Unreadable>;
    /// The host's clock; `None` when it could not be read (never the epoch instead).
    fn now(&self) -> Option<UnixMillis>;
    /// 16 fresh random bytes: an issued token's nonce.
    fn nonce(&self) -> [u8; 16];
    /// A fresh owner token for the request's claim.
    fn owner(&self) -> OwnerToken;
    /// The hashes of the last scopes this host saw (one per VM): a scope's tags are hashes of
    /// it, computed once per run of one client's requests; likewise its routes' fingerprint heads.
    fn scopes(&self) -> &ScopeHashes;
    /// The hashing budget a body's kept bytes are reserved from (one per VM).
    fn budget(&self) -> Rc<Budget>;
    /// The relay budget a detached exchange's answer is reserved from (one per VM).
    fn relay_budget(&self) -> Rc<Budget>;
}

/// What becomes of a request, decided on its headers.
// Returned once and taken apart at once: boxing the keyed request would cost an allocation per
// keyed request for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Headed<'p> {
    /// Not the guard's: no route matches, it has no method or path, or no client to scope its
    /// key to under `on_store_error: pass_through`. It goes on untouched.
    Pass,
    /// Answered at the edge before any store decision: the token endpoint's answer, or a
    /// refusal (precondition, admission, an unreadable identity, a token, a clock that failed,
    /// no client to scope its key to under `reject`).
    Answer(HttpAnswer),
    /// No key, and none required: forwarded without idempotency
    /// ([`Guarded::unguarded`]), after a required token's single use.
    Unguarded {
        token: Option<VerifiedToken>,
        payers: Payers,
    },
    /// Keyed: [`Keyed::take`] makes the machine that takes its body in and claims its key.
    Keyed(Keyed<'p>),
}

/// A keyed request, its headers read.
pub struct Keyed<'p> {
    route: &'p Route,
    intaking: Intaking,
    /// On a detached route: where it goes, and its exchange's part of the relay budget (charged
    /// to the same peer group as its body), reserved once its claim is won.
    detached: Option<(&'p Detached, Reservation)>,
}

impl core::fmt::Debug for Keyed<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Keyed")
            .field("route", &self.route.prefix)
            .finish_non_exhaustive()
    }
}

impl<'p> Keyed<'p> {
    /// The route it matched: where the claimed request goes (a router route's host removes the
    /// headers that would let a client steer Envoy first).
    pub fn route(&self) -> &'p Route {
        self.route
    }

    /// The machine that takes the body in. `keep` makes the host's part of a request a detached
    /// route sends itself (asked for only on such a route), so a router route never keeps one.
    pub fn take<O, H>(
        self,
        policy: &Policy,
        keep: impl FnOnce(&'p Detached) -> H,
    ) -> Guarded<O, H> {
        let held = self
            .detached
            .map(|(detached, relay)| (keep(detached), relay));
        Guarded::take_on(policy, self.route, self.intaking, held)
    }
}

/// Decides a request on its `headers` (every pair the host read, `:method` and `:path`
/// included); `body_follows` when the headers did not end the stream. Gives what becomes of it,
/// and the events to count.
pub fn head<'p, 'h, I>(
    policy: &'p Policy,
    headers: I,
    body_follows: bool,
    host: &impl Host,
) -> (Headed<'p>, Events)
where
    I: IntoIterator<Item = (&'h str, &'h [u8])> + Clone,
{
    let facts = HeadFacts {
        headers: headers.clone(),
        host,
        address: OnceCell::new(),
        group: OnceCell::new(),
        values: PhantomData,
    };
    let (Some(method), Some(path)) = (facts.text(":method"), facts.text(":path")) else {
        return (Headed::Pass, Events::default());
    };
    if asks_for_token(policy, method, path) {
        return token_endpoint(policy, path, &facts);
    }
    if let Some(document) = published(policy, method, path) {
        return (Headed::Answer(document), Events::default());
    }
    // Matched on the normalised path; the fingerprint hashes the route's spelling of it, so
    // every spelling of one path is one request, at the edge and in the browser.
    let Some(matched) = policy.match_request(method, path) else {
        return (Headed::Pass, Events::default());
    };
    let route = matched.route;
    if let Some(rule) = &route.precondition {
        if let Err(problem) = rule.check(method, &facts.header_values("if-match")) {
            let http = order_answer(&OrderAnswer::Precondition(problem), &policy.problems);
            return (Headed::Answer(http), problem.events());
        }
    }
    // The clock is read only for a signature's time window.
    let now = match route.signature {
        Some(_) => match host.now() {
            Some(now) => now,
            None => return edge(&EdgeAnswer::ClockUnavailable, policy),
        },
        None => UnixMillis(0),
    };
    let admission = match admit(route, &|name: &str| facts.header_values(name), now) {
        Ok(admission) => admission,
        Err(refusal) => {
            return (
                Headed::Answer(crate::answer::refusal(&refusal, &policy.problems)),
                refused(&refusal),
            )
        }
    };
    // A callback route is its own scope (the provider is the client). Never the next scope
    // source because a read failed: a failure would then pick the namespace. Only a signed
    // route's deliveries are the provider's word: an unsigned one's are charged to the
    // sender's address group too.
    let client = match route.own_scope() {
        Some(scope) => Some(ClientIdentity {
            source: scope.source.to_owned(),
            value: scope.value.to_vec(),
            verified: route.signature.is_some(),
        }),
        None => match identify(&policy.scope, &facts) {
            Ok(client) => client,
            Err(Unreadable) => return edge(&EdgeAnswer::RequestUnreadable, policy),
        },
    };
    let payers = match &client {
        // Not "no address" on a failed read: the record would go uncharged to the address.
        Some(client) => {
            match client.payers(
                &policy.shares,
                || facts.group(policy),
                host.scopes(),
                route.share,
            ) {
                Ok(payers) => payers,
                Err(Unreadable) => return edge(&EdgeAnswer::RequestUnreadable, policy),
            }
        }
        None => Payers::NONE,
    };
    let scope = client.as_ref().map(ClientIdentity::scope);
    let presented = |name: &str| facts.text(name);
    let token = match check_token(policy, route, method, scope, presented, || host.now()) {
        Ok(token) => token,
        Err(refusal) => {
            return (
                Headed::Answer(answer_for(&refusal.answer(), policy)),
                refusal.events(),
            )
        }
    };
    let (key_method, key_path) = route.keys.namespace(method, &matched.path);
    let key = match start(
        admission,
        client,
        |scope| host.scopes().key_prefix(scope),
        key_method,
        key_path,
    ) {
        Start::Keyed(key) => key,
        Start::Unguarded => return (Headed::Unguarded { token, payers }, Events::default()),
        Start::Unscoped => return unscoped_request(policy),
    };
    // A body's bytes, and a detached exchange's answer, are charged to the peer's address group
    // (streams without an address share the empty group); looked up only for a body to come or
    // an exchange to send, and a failed read is not "no address".
    let detached = match &route.forward {
        Forward::Detached(detached) => Some(detached),
        Forward::Router => None,
    };
    let peer: Rc<[u8]> = if body_follows || detached.is_some() {
        match facts.group(policy) {
            Ok(group) => Rc::from(group.unwrap_or_default()),
            Err(Unreadable) => return edge(&EdgeAnswer::RequestUnreadable, policy),
        }
    } else {
        Rc::from(&[][..])
    };
    let mut fingerprint = FingerprintBuilder::kept(
        &policy.fingerprint,
        method,
        &matched.target(path),
        headers.clone(),
        Some(host.scopes().heads()),
    );
    if let Some(rule) = &route.precondition {
        rule.bind(&mut fingerprint, headers.clone());
    }
    if route.keys.scope == KeyScope::Client {
        fingerprint.bind_endpoint(method, &matched.path);
    }
    let probe = Probe::start(route, headers);
    // Each copy of the body the machine keeps until the claim is charged: the
    // sequencer's, and a detached exchange's.
    let keeps_order = probe.as_ref().is_some_and(Probe::keeps_body);
    let copies = u64::from(keeps_order) + u64::from(detached.is_some());
    let detached = detached.map(|d| (d, Reservation::new(host.relay_budget(), Rc::clone(&peer))));
    let intaking = Intaking {
        intake: Intake::new(key, fingerprint, copies, policy),
        reservation: Reservation::new(host.budget(), peer),
        probe,
        token,
        owner: host.owner(),
        payers,
    };
    let keyed = Keyed {
        route,
        intaking,
        detached,
    };
    (Headed::Keyed(keyed), Events::default())
}

/// The token issuing endpoint: a token for the identified client.
fn token_endpoint<'p, 'h, I, H>(
    policy: &'p Policy,
    path: &str,
    facts: &HeadFacts<'_, 'h, I, H>,
) -> (Headed<'p>, Events)
where
    I: IntoIterator<Item = (&'h str, &'h [u8])> + Clone,
    H: Host,
{
    let client = match identify(&policy.scope, facts) {
        Ok(Some(client)) => client,
        Ok(None) => return unscoped_request(policy),
        Err(Unreadable) => return edge(&EdgeAnswer::RequestUnreadable, policy),
    };
    let Some(now) = facts.host.now() else {
        return edge(&EdgeAnswer::ClockUnavailable, policy);
    };
    let nonce = facts.host.nonce();
    let (http, events) = issue_token(policy, path, client.scope(), now, nonce);
    (Headed::Answer(http), events)
}

/// No client to scope the key to: the store-error failure mode's answer, or on untouched.
fn unscoped_request<'p>(policy: &Policy) -> (Headed<'p>, Events) {
    match unscoped(policy) {
        (Some(edge), events) => (Headed::Answer(answer_for(&edge, policy)), events),
        (None, events) => (Headed::Pass, events),
    }
}

/// An edge answer that counts nothing.
fn edge<'p>(edge: &EdgeAnswer<'_>, policy: &Policy) -> (Headed<'p>, Events) {
    (Headed::Answer(answer_for(edge, policy)), Events::default())
}

/// The request's headers and the host's properties, as the identity rules read them; the
/// peer's address is read from the host once (the scope, the payers and the hashing budget's
/// peer all ask for it).
struct HeadFacts<'a, 'h, I, H> {
    headers: I,
    host: &'a H,
    address: OnceCell<Result<Option<Vec<u8>>, Unreadable>>,
    /// The peer's address group, worked out once ([`HeadFacts::group`]).
    group: OnceCell<Result<Option<Vec<u8>>, Unreadable>>,
    /// The headers' values outlive the facts.
    values: PhantomData<&'h [u8]>,
}

impl<'h, I, H> HeadFacts<'_, 'h, I, H>
where
    I: IntoIterator<Item = (&'h str, &'h [u8])> + Clone,
{
    /// The first value of a header, if it is UTF-8.
    fn text(&self, name: &str) -> Option<&'h str> {
        let (_, value) = self.headers.clone().into_iter().find(|(n, _)| *n == name)?;
        core::str::from_utf8(value).ok()
    }
}

impl<'h, I, H> HeadFacts<'_, 'h, I, H>
where
    I: IntoIterator<Item = (&'h str, &'h [u8])> + Clone,
    H: Host,
{
    /// The peer's address group ([`peer_group`]), worked out once: the payers and a body's
    /// hashing budget both charge it.
    fn group(&self, policy: &Policy) -> Result<Option<&[u8]>, Unreadable> {
        match self.group.get_or_init(|| peer_group(&policy.shares, self)) {
            Ok(group) => Ok(group.as_deref()),
            Err(Unreadable) => Err(Unreadable),
        }
    }
}

impl<'h, I, H> Facts for HeadFacts<'_, 'h, I, H>
where
    I: IntoIterator<Item = (&'h str, &'h [u8])> + Clone,
    H: Host,
{
    fn header_values<'b>(&'b self, name: &str) -> Vec<&'b [u8]> {
        let named = self.headers.clone().into_iter();
        named
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, value)| value)
            .collect()
    }

    fn property(&self, path: &[&str]) -> Result<Option<Vec<u8>>, Unreadable> {
        if path == ["source", "address"] {
            return self
                .address
                .get_or_init(|| self.host.property(path))
                .clone();
        }
        self.host.property(path)
    }
}

#[cfg(test)]
mod tests;
