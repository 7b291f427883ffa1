//! What the explorer runs: concurrent requests with one key, what the upstream does with each,
//! the faults, the clock jump, and — for detached execution — the way the exchange goes
//! ([`Forwarding`]) and what the app does with each worker's execution.

use crate::envoy::{CalloutFault, Chain, Outcome};
use crate::scenario::{Forwarding, Request, Upstream};
use std::time::Duration;

/// What to explore: concurrent requests (request `i` on worker `i`), what the upstream does with
/// each forwarded one, and optionally a clock jump that can land between any two steps.
#[derive(Debug, Clone)]
pub struct Plan {
    pub config: String,
    pub chain: Chain,
    pub requests: Vec<Request>,
    /// What the upstream does with request `i` if it is forwarded (the last entry repeats).
    pub upstream: Vec<Upstream>,
    /// A scheduled step that moves the clock once by this much (e.g. past the lease).
    pub clock_jump: Option<Duration>,
    /// The configured lease: the follow-up request is sent after it.
    pub lease: Duration,
    /// At most this many requests may reach the upstream in one run.
    pub max_upstream_calls: usize,
    pub seed: u64,
    /// Sets Envoy's global CAS counter first (e.g. just below `u32::MAX`, to reach wrap-around).
    pub first_cas: Option<u32>,
    /// Detached execution: the cluster the filter's callouts reach (served by a fresh
    /// [`crate::scenario::Orders`] model per run, the way [`Plan::forwarding`] says), and what each
    /// worker's execution does instead of creating an order (`None`: it creates one).
    pub callouts: Option<(String, Vec<Option<Outcome>>)>,
    /// How the detached exchanges reach the app: through the re-entry listener, or directly.
    pub forwarding: Forwarding,
    /// Before each body chunk and each callout answer while its stream lives, a client may go
    /// away instead: the explorer tries both.
    pub client_may_leave: bool,
    /// Callout faults for the plan's cluster, in dispatch order (whichever worker dispatches
    /// first gets the first).
    pub callout_faults: Vec<(CalloutFault, usize)>,
    /// A fleet on the remote store: each request on its own simulated Envoy (nothing shared but
    /// the wall clock and one [`StoreService`] behind this cluster, fresh per run); the callout
    /// faults then hit the first Envoy's store callouts.
    pub store: Option<String>,
    /// Environment variables of every VM (e.g. the remote store's record secret).
    pub env: Vec<(String, String)>,
}

/// The explorations of one key take shares off: a step is a worker's run up to its next
/// shared-data call, and each charge, move and refund of a share is two more (a ledger cell read
/// and its compare-and-set) per payer, which multiplies the schedules of two requests by orders of
/// magnitude. What they prove — one execution per key, nothing lost — is the record cells'. The
/// pressure rule has an exploration of its own (two keys of one client at her share:
/// `interleavings::one_client_at_her_share_under_pressure_every_interleaving`); the ledger's races
/// are also tested in the core (`crates/core/src/tests/shares/`) and the shares in a real Envoy
/// (`crates/envoy/tests/envoy/floods.rs`).
pub const NO_SHARES: &str = r#""shares": {"identity": "off", "peer": "off"}"#;

impl Plan {
    /// `n` copies of `request` on `n` workers at once; the upstream answers `response`; the default
    /// configuration (lease 60 s) but a small store — every schedule starts fresh VMs, and each
    /// creates its store's cells when configured; exactly one may reach the upstream. Shares are
    /// off ([`NO_SHARES`]).
    pub fn concurrent(n: usize, request: Request, response: crate::scenario::Response) -> Plan {
        Plan {
            config: format!(r#"{{"capacity": 64, {NO_SHARES}}}"#),
            chain: Chain::default(),
            requests: vec![request; n],
            upstream: vec![Upstream::Respond(response)],
            clock_jump: None,
            lease: Duration::from_secs(60),
            max_upstream_calls: 1,
            seed: 7,
            first_cas: None,
            callouts: None,
            forwarding: Forwarding::default(),
            client_may_leave: false,
            callout_faults: Vec::new(),
            store: None,
            env: Vec::new(),
        }
    }

    /// `n` copies of `request`, each on its own simulated Envoy; the filters keep their records
    /// in the remote store (the cluster "store", served by one in-process [`StoreService`]); the
    /// upstream answers `response`; exactly one may reach the upstream.
    pub fn fleet(n: usize, request: Request, response: crate::scenario::Response) -> Plan {
        let mut plan = Plan::concurrent(n, request, response);
        plan.config = String::from(
            r#"{"capacity": 64, "store": {"kind": "remote", "cluster": "store", "timeout": "2s", "record_secret_env": "IDEMGATE_RECORD_SECRET"}}"#,
        );
        plan.store = Some("store".into());
        plan.env = vec![(
            "IDEMGATE_RECORD_SECRET".into(),
            crate::scenario::RECORD_SECRET.into(),
        )];
        plan
    }

    /// `n` copies of `request` on `n` workers, with detached execution through the re-entry
    /// listener (the shipped deployment): the filter sends each claimed request with a callout to
    /// the re-entry cluster, whose inner pass routes it to a model that creates one order per
    /// request it serves; at most one execution.
    pub fn detached(n: usize, request: Request) -> Plan {
        Plan::detached_via(Forwarding::Reentry, n, request)
    }

    /// As [`Plan::detached`], the exchange going the way `forwarding` says.
    pub fn detached_via(forwarding: Forwarding, n: usize, request: Request) -> Plan {
        let mut plan = Plan::concurrent(n, request, crate::scenario::Response::new(201));
        plan.config = format!(
            r#"{{"capacity": 64, {NO_SHARES}, {}}}"#,
            forwarding.upstream("15s")
        );
        plan.callouts = Some((forwarding.cluster().into(), Vec::new()));
        plan.forwarding = forwarding;
        plan
    }

    /// What worker `i`'s execution does (`None`: create an order); detached plans only.
    pub fn outcomes(mut self, outcomes: Vec<Option<Outcome>>) -> Plan {
        if let Some((_, by_worker)) = self.callouts.as_mut() {
            *by_worker = outcomes;
        }
        self
    }

    /// The next `times` callouts to the plan's cluster fail so (see [`CalloutFault`]).
    pub fn callout_fault(mut self, fault: CalloutFault, times: usize) -> Plan {
        self.callout_faults.push((fault, times));
        self
    }

    /// A client may go away before each of its body chunks and while it waits for its callout.
    pub fn clients_may_leave(mut self) -> Plan {
        self.client_may_leave = true;
        self
    }

    /// A clock jump past the lease can land between any two steps; one more request may then
    /// legitimately take over.
    pub fn with_lease_expiry(mut self) -> Plan {
        self.clock_jump = Some(self.lease + Duration::from_secs(1));
        self.max_upstream_calls += 1;
        self
    }

    /// What the upstream does with each forwarded request, in order (the last one repeats).
    pub fn upstream(mut self, upstream: Vec<Upstream>) -> Plan {
        self.upstream = upstream;
        self
    }

    pub fn max_upstream_calls(mut self, n: usize) -> Plan {
        self.max_upstream_calls = n;
        self
    }

    pub fn first_cas(mut self, cas: u32) -> Plan {
        self.first_cas = Some(cas);
        self
    }

    pub fn upstream_for(&self, actor: usize) -> Option<&Upstream> {
        self.upstream.get(actor).or_else(|| self.upstream.last())
    }
}
