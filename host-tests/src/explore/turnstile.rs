//! A turnstile that lets exactly one simulated worker run at a time. Every worker runs on its own
//! thread (its own `Store`); it parks at each interleaving point (before every shared-data call,
//! between callbacks) and goes on only when the controller grants it the next step. So the order
//! of the workers' host calls is exactly the schedule the controller chose. A worker may park with
//! alternatives (e.g. "sends its next body chunk" or "the client goes away"): the controller then
//! picks the step and the alternative together.

use crate::envoy::world::lock;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

#[derive(Debug, Default)]
struct Turns {
    /// The actor allowed to take its next step, and the alternative it takes (cleared as it wakes).
    granted: Option<(usize, usize)>,
    /// Parked actors and what they may do next (one entry: no choice).
    parked: BTreeMap<usize, Vec<String>>,
    finished: BTreeSet<usize>,
    /// Stop controlling: parks return at once (used when a run is abandoned).
    open: bool,
}

#[derive(Debug)]
pub struct Turnstile {
    actors: usize,
    turns: Mutex<Turns>,
    changed: Condvar,
}

impl Turnstile {
    pub fn new(actors: usize) -> Self {
        Turnstile {
            actors,
            turns: Mutex::new(Turns::default()),
            changed: Condvar::new(),
        }
    }

    /// Called by actor `actor` before its next step: waits for the controller's grant.
    pub fn park(&self, actor: usize, what: &str) {
        self.park_choice(actor, &[what]);
    }

    /// Called by actor `actor` before a step that can go several ways: waits for the
    /// controller's grant and returns the index of the alternative it picked (0 once the run is
    /// abandoned).
    pub fn park_choice(&self, actor: usize, alternatives: &[&str]) -> usize {
        let mut turns = lock(&self.turns);
        let listed = alternatives.iter().map(|a| a.to_string()).collect();
        turns.parked.insert(actor, listed);
        self.changed.notify_all();
        while !turns.open && turns.granted.is_none_or(|(a, _)| a != actor) {
            turns = self
                .changed
                .wait(turns)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        turns.parked.remove(&actor);
        match turns.granted {
            Some((a, choice)) if a == actor => {
                turns.granted = None;
                choice.min(alternatives.len().saturating_sub(1))
            }
            _ => 0,
        }
    }

    /// Called by an actor when it has nothing more to do (also when it failed).
    pub fn finish(&self, actor: usize) {
        let mut turns = lock(&self.turns);
        turns.finished.insert(actor);
        turns.parked.remove(&actor);
        self.changed.notify_all();
    }

    /// Waits until no actor is running (each is parked or finished) and returns the parked ones
    /// with what they may do next, by actor id; `None` on timeout (an actor hangs).
    pub fn settle(&self, timeout: Duration) -> Option<Vec<(usize, Vec<String>)>> {
        let turns = lock(&self.turns);
        let (turns, result) = self
            .changed
            .wait_timeout_while(turns, timeout, |t| {
                t.granted.is_some() || t.parked.len() + t.finished.len() < self.actors
            })
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if result.timed_out() {
            return None;
        }
        Some(turns.parked.iter().map(|(a, w)| (*a, w.clone())).collect())
    }

    /// Lets `actor` take its next step, the way `alternative` says.
    pub fn grant(&self, actor: usize, alternative: usize) {
        let mut turns = lock(&self.turns);
        turns.granted = Some((actor, alternative));
        self.changed.notify_all();
    }

    /// Releases every actor to run freely to its end (the run is being abandoned).
    pub fn open(&self) {
        let mut turns = lock(&self.turns);
        turns.open = true;
        self.changed.notify_all();
    }
}
