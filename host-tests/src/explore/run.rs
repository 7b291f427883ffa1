//! One run of a plan under one schedule: every request on its own worker thread, the turnstile
//! deciding whose host call comes next, then a follow-up request after the lease to prove nothing
//! is stuck.

use super::chooser::Chooser;
pub use super::plan::Plan;
use super::turnstile::Turnstile;
use crate::envoy::Clock;
use crate::envoy::{
    CalloutRecord, ClientAnswer, Gate, Phase, UpstreamCall, VmSetup, Worker, World, Write,
};
use crate::error::{HarnessError, Result};
use crate::runtime::FilterModule;
use crate::scenario::{Orders, StoreService, Upstream};
use std::sync::Arc;
use std::time::Duration;

/// What one request's client saw.
#[derive(Debug, Clone)]
pub struct ActorReport {
    pub actor: usize,
    /// The request reached the upstream.
    pub forwarded: bool,
    pub answer: Option<ClientAnswer>,
    /// A trap or harness error.
    pub error: Option<String>,
    /// The client went away before its answer.
    pub left: bool,
}

/// Everything a run produced, for the invariants.
#[derive(Debug, Clone)]
pub struct Run {
    /// The steps in the order they ran.
    pub trace: Vec<String>,
    pub actors: Vec<ActorReport>,
    pub upstream_calls: Vec<UpstreamCall>,
    /// Every callout answered (or failed), in order.
    pub callouts: Vec<CalloutRecord>,
    pub writes: Vec<Write>,
    /// A fleet's store operations, in the order the store decided them (request, response).
    pub store_log: Vec<(
        idemgate_core::store::remote::Request,
        idemgate_core::store::remote::Response,
    )>,
    /// The same request as actor 0's, sent after everything ended and the lease passed.
    pub followup: std::result::Result<Option<ClientAnswer>, String>,
    /// Detached execution: the follow-up's callout reached the app (it ran).
    pub followup_ran: bool,
    pub anomalies: Vec<String>,
    pub clock_jumped: bool,
}

/// Marks the actor finished however its thread ends.
struct Finished<'t>(&'t Turnstile, usize);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.0.finish(self.1);
    }
}

fn actor(
    plan: &Plan,
    module: &FilterModule,
    world: World,
    turnstile: Arc<Turnstile>,
    actor: usize,
) -> ActorReport {
    let _finished = Finished(&turnstile, actor);
    let mut report = ActorReport {
        actor,
        forwarded: false,
        answer: None,
        error: None,
        left: false,
    };
    if let Err(e) = drive(plan, module, world, turnstile.clone(), actor, &mut report) {
        report.error = Some(e.to_string());
    }
    report
}

fn drive(
    plan: &Plan,
    module: &FilterModule,
    world: World,
    turnstile: Arc<Turnstile>,
    actor: usize,
    report: &mut ActorReport,
) -> Result<()> {
    let gate_turnstile = turnstile.clone();
    let gate: Gate = Arc::new(move |_worker, what| gate_turnstile.park(actor, what));
    let setup = VmSetup {
        plugin_config: plan.config.clone().into_bytes(),
        env: plan.env.clone(),
        gate: Some(gate),
        chain: plan.chain,
        ..VmSetup::default()
    };
    let mut worker = Worker::start(module, world, actor, setup)?;
    let request = plan
        .requests
        .get(actor)
        .ok_or_else(|| HarnessError::Usage(format!("no request for actor {actor}")))?;
    // Between shared-data calls a worker only touches its own VM, so the order of that work does
    // not matter — except for when it reads the clock, which matters only if the clock can jump.
    let timed = plan.clock_jump.is_some();
    if timed {
        turnstile.park(actor, "sends its request");
    }
    let context = worker.open(request.stream_properties())?;
    let chunks = request.chunks();
    worker.request_headers(context, request.header_map(), chunks.is_empty())?;
    let live = |worker: &Worker| {
        worker
            .stream(context)
            .is_some_and(|s| s.phase != Phase::Done)
    };
    for (i, chunk) in chunks.iter().enumerate() {
        if plan.client_may_leave && live(&worker) {
            let next = format!("sends body chunk {}", i + 1);
            if turnstile.park_choice(actor, &[&next, "client goes away"]) == 1 {
                worker.reset(context, "downstream_remote_disconnect")?;
                report.left = true;
                break;
            }
        }
        worker.request_body(context, chunk, i + 1 == chunks.len())?;
    }
    // Detached execution: the callouts this request made are answered — possibly after its
    // client went away (they belong to the root context).
    while let Some(token) = worker.pending_callouts().first().map(|c| c.token) {
        if plan.client_may_leave && live(&worker) {
            if turnstile.park_choice(actor, &["gets its callout's answer", "client goes away"]) == 1
            {
                worker.reset(context, "downstream_remote_disconnect")?;
                report.left = true;
            }
        } else if timed || plan.client_may_leave {
            turnstile.park(actor, "gets its callout's answer");
        }
        worker.deliver_callout(token)?;
        // A detached execution; a store's answer is not one.
        report.forwarded |= plan.callouts.is_some();
    }
    // The router path: the upstream was contacted when the request passed the filter.
    if worker.stream(context).is_some_and(|s| s.upstream_started) {
        report.forwarded = true;
        if let Some(upstream) = plan.upstream_for(actor) {
            if timed {
                turnstile.park(actor, "gets the upstream's answer");
            }
            crate::scenario::upstream::deliver(&mut worker, context, upstream)?;
        }
    }
    // The remote store: the finish waits in the worker's queue until its tick sends it (with any
    // other queued), then its resends.
    if plan.store.is_some() {
        if timed || plan.client_may_leave {
            turnstile.park(actor, "its worker's tick sends the queued finishes");
        }
        let delay = idemgate_core::store::remote::BATCH_DELAY.as_millis();
        worker.world().clock().advance(Duration::from_millis(delay));
        worker.tick_if_due()?;
    }
    while let Some(token) = worker.pending_callouts().first().map(|c| c.token) {
        if timed || plan.client_may_leave {
            turnstile.park(actor, "gets its store callout's answer");
        }
        worker.deliver_callout(token)?;
    }
    report.answer = worker.stream(context).and_then(|s| s.answer.clone());
    Ok(())
}

/// After the run: the lease passes, and actor 0's request is sent again on a fresh worker. It must
/// not meet a live claim (a 409 here is a lease stuck past its end).
fn followup(plan: &Plan, module: &FilterModule, world: &World) -> Result<Option<ClientAnswer>> {
    let Some(request) = plan.requests.first() else {
        return Ok(None);
    };
    world.clock().advance(plan.lease + Duration::from_secs(1));
    let setup = VmSetup {
        plugin_config: plan.config.clone().into_bytes(),
        env: plan.env.clone(),
        chain: plan.chain,
        ..VmSetup::default()
    };
    let mut worker = Worker::start(module, world.clone(), plan.requests.len(), setup)?;
    let context = worker.open(request.stream_properties())?;
    let chunks = request.chunks();
    worker.request_headers(context, request.header_map(), chunks.is_empty())?;
    for (i, chunk) in chunks.iter().enumerate() {
        worker.request_body(context, chunk, i + 1 == chunks.len())?;
    }
    // The remote store's claim.
    worker.deliver_all_callouts()?;
    if worker.stream(context).is_some_and(|s| s.upstream_started) {
        if let Some(Upstream::Respond(response)) = plan.upstream.first() {
            crate::scenario::upstream::respond(&mut worker, context, response)?;
        }
    }
    if plan.store.is_some() {
        let delay = idemgate_core::store::remote::BATCH_DELAY.as_millis();
        world.clock().advance(Duration::from_millis(delay));
        worker.tick_if_due()?;
    }
    worker.deliver_all_callouts()?;
    Ok(worker.stream(context).and_then(|s| s.answer.clone()))
}

/// How long the controller waits for a worker to reach its next step before calling it hung.
const STEP_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs `plan` once, in the order `chooser` picks.
pub fn run(plan: &Plan, module: &FilterModule, chooser: &mut dyn Chooser) -> Result<Run> {
    let actors = plan.requests.len();
    // One world (one Envoy) for every worker, or one per worker for a fleet.
    let clock = Clock::default();
    let store = plan
        .store
        .as_ref()
        .map(|cluster| (cluster, Arc::new(StoreService::new(clock.clone()))));
    let worlds: Vec<World> = match &store {
        None => vec![World::new(plan.seed)],
        Some((cluster, service)) => (0..actors)
            .map(|i| {
                let world = World::with_clock(plan.seed + i as u64, clock.clone());
                world.add_cluster(cluster, service.clone());
                world
            })
            .collect(),
    };
    let world_of = |actor: usize| worlds[actor.min(worlds.len() - 1)].clone();
    let world = world_of(0);
    if let Some((cluster, outcomes)) = &plan.callouts {
        let orders = Arc::new(Orders::with_outcomes(outcomes.clone()));
        world.add_destination(cluster, orders, plan.forwarding.path());
    }
    if let Some(cluster) = plan.callouts.as_ref().map(|c| &c.0).or(plan.store.as_ref()) {
        for (fault, times) in &plan.callout_faults {
            world.faults().callout(cluster, *fault, *times);
        }
    }
    // Envoy configures its VMs before the listener takes traffic, so the store's cells (which the
    // filter creates when configured) exist before the first request. A VM configured here first
    // makes that so before the CAS counter is set: the forced values then land on request writes.
    for world in &worlds {
        Worker::start(
            module,
            world.clone(),
            actors + 1,
            VmSetup {
                plugin_config: plan.config.clone().into_bytes(),
                env: plan.env.clone(),
                chain: plan.chain,
                ..VmSetup::default()
            },
        )?;
    }
    if let Some(cas) = plan.first_cas {
        world.shared_data().set_next_cas(cas);
    }
    let turnstile = Arc::new(Turnstile::new(actors));
    let mut trace = Vec::new();
    let mut jump = plan.clock_jump;
    let mut hung = false;
    let reports = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..actors)
            .map(|i| {
                let (world, turnstile) = (world_of(i), turnstile.clone());
                scope.spawn(move || actor(plan, module, world, turnstile, i))
            })
            .collect();
        loop {
            let Some(parked) = turnstile.settle(STEP_TIMEOUT) else {
                hung = true;
                turnstile.open();
                break;
            };
            if parked.is_empty() {
                break;
            }
            let mut steps: Vec<(usize, usize)> = Vec::new();
            let mut options: Vec<String> = Vec::new();
            for (actor, alternatives) in &parked {
                for (i, what) in alternatives.iter().enumerate() {
                    steps.push((*actor, i));
                    options.push(format!("w{actor} {what}"));
                }
            }
            if let Some(by) = jump {
                options.push(format!("clock +{}s", by.as_secs()));
            }
            let pick = chooser.choose(&options);
            trace.push(options.get(pick).cloned().unwrap_or_default());
            match steps.get(pick) {
                Some((who, alternative)) => turnstile.grant(*who, *alternative),
                None => {
                    if let Some(by) = jump.take() {
                        world.clock().advance(by);
                    }
                }
            }
        }
        handles
            .into_iter()
            .enumerate()
            .map(|(i, h)| {
                h.join().unwrap_or_else(|_| ActorReport {
                    actor: i,
                    forwarded: false,
                    answer: None,
                    error: Some("the actor thread panicked".into()),
                    left: false,
                })
            })
            .collect::<Vec<_>>()
    });
    if hung {
        return Err(HarnessError::Usage(format!(
            "a worker did not reach its next step in {STEP_TIMEOUT:?}; trace: {trace:?}"
        )));
    }
    let upstream_calls = worlds.iter().flat_map(|w| w.upstream_calls()).collect();
    let callouts = worlds.iter().flat_map(|w| w.callouts()).collect();
    let writes = world.shared_data().log().to_vec();
    let anomalies = worlds.iter().flat_map(|w| w.anomalies()).collect();
    let clock_jumped = plan.clock_jump.is_some() && jump.is_none();
    // The store's decisions during the run (the follow-up's are its own).
    let store_log = store.as_ref().map(|(_, s)| s.log()).unwrap_or_default();
    if let Some((cluster, _)) = &store {
        // The fault plan is the run's: one its requests left unused is not the follow-up's.
        while world.faults().take_callout(cluster).is_some() {}
    }
    if let Some((cluster, _)) = &plan.callouts {
        // Likewise for the app's cluster: the follow-up is a request of its own.
        while world.faults().take_callout(cluster).is_some() {}
    }
    let followup = followup(plan, module, &world).map_err(|e| e.to_string());
    let followup_ran = plan.callouts.as_ref().is_some_and(|(origin, _)| {
        let worker = plan.requests.len();
        world
            .callouts()
            .iter()
            .any(|c| c.request.worker == worker && c.request.cluster == *origin && c.reached)
    });
    Ok(Run {
        trace,
        actors: reports,
        upstream_calls,
        callouts,
        writes,
        store_log,
        followup,
        followup_ran,
        anomalies,
        clock_jumped,
    })
}
