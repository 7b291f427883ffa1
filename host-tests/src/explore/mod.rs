//! Interleaving exploration: concurrent requests with one key, every ordering of their host-call
//! steps (a step is a worker's run up to its next shared-data call; with a clock jump in the plan,
//! also up to the start of its request and of its response, where it reads the clock) (depth-first, each schedule run once from scratch) or a large seeded sample where that
//! explodes, each checked against the invariants of [`invariants`]. A failure names the schedule
//! (and seed) that reproduces it and the steps in order.

pub mod chooser;
pub mod invariants;
pub mod order;
pub mod plan;
pub mod run;
pub mod turnstile;

pub use chooser::{Chooser, DepthFirst, Seeded};
pub use plan::Plan;
pub use run::{ActorReport, Run};

use crate::error::Result;
use crate::runtime::FilterModule;
use std::fmt;

/// A schedule that broke an invariant.
#[derive(Debug, Clone)]
pub struct Violation {
    pub message: String,
    /// Depth-first choices, or the sampler's seed, that reproduce it.
    pub reproduce: String,
    pub trace: Vec<String>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.message)?;
        writeln!(f, "reproduce with: {}", self.reproduce)?;
        writeln!(f, "steps:")?;
        for (i, step) in self.trace.iter().enumerate() {
            writeln!(f, "  {i:>3}. {step}")?;
        }
        Ok(())
    }
}

/// How much was explored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coverage {
    pub schedules: usize,
    /// Every schedule was run (false: the limit stopped the enumeration).
    pub exhaustive: bool,
}

/// Runs every schedule of `plan` (up to `limit`), checking each.
pub fn every_schedule(
    plan: &Plan,
    module: &FilterModule,
    limit: usize,
) -> Result<std::result::Result<Coverage, Violation>> {
    every_schedule_checked(plan, module, limit, invariants::check)
}

/// What must hold after a schedule: `Err` describes the first thing that does not.
pub type Check = fn(&Plan, &Run) -> std::result::Result<(), String>;

/// [`every_schedule`] with other invariants (e.g. [`order::check`] for events on one resource).
pub fn every_schedule_checked(
    plan: &Plan,
    module: &FilterModule,
    limit: usize,
    check: Check,
) -> Result<std::result::Result<Coverage, Violation>> {
    let mut prefix = Vec::new();
    let mut schedules = 0;
    loop {
        let mut chooser = DepthFirst::new(prefix);
        let run = run::run(plan, module, &mut chooser)?;
        schedules += 1;
        if let Err(message) = check(plan, &run) {
            let choices: Vec<usize> = chooser.taken.iter().map(|(c, _)| *c).collect();
            return Ok(Err(Violation {
                message,
                reproduce: format!("DepthFirst::new(vec!{choices:?})"),
                trace: run.trace,
            }));
        }
        match chooser.next_prefix() {
            None => {
                return Ok(Ok(Coverage {
                    schedules,
                    exhaustive: true,
                }))
            }
            Some(_) if schedules >= limit => {
                return Ok(Ok(Coverage {
                    schedules,
                    exhaustive: false,
                }))
            }
            Some(next) => prefix = next,
        }
    }
}

/// Runs `runs` random schedules from seeds `seed`, `seed + 1`, …, checking each.
pub fn sampled_schedules(
    plan: &Plan,
    module: &FilterModule,
    seed: u64,
    runs: usize,
) -> Result<std::result::Result<Coverage, Violation>> {
    for i in 0..runs as u64 {
        let run_seed = seed.wrapping_add(i);
        let mut chooser = Seeded::new(run_seed);
        let run = run::run(plan, module, &mut chooser)?;
        if let Err(message) = invariants::check(plan, &run) {
            return Ok(Err(Violation {
                message,
                reproduce: format!(
                    "Seeded::new({run_seed}) (IDEMGATE_EXPLORE_SEED={seed}, run {i})"
                ),
                trace: run.trace,
            }));
        }
    }
    Ok(Ok(Coverage {
        schedules: runs,
        exhaustive: false,
    }))
}
