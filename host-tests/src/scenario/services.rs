//! Upstream models for HTTP callouts (the [`Service`]s a test registers as clusters): a scripted
//! upstream and an origin that creates one object per request. Both are shared by every worker
//! (and by two simulated Envoys given the same `Arc`), and count what they served.

use super::response::Response;
use crate::envoy::world::lock;
use crate::envoy::{Answer, CalloutRequest, Outcome, Service};
use std::sync::Mutex;

/// Answers callouts with scripted responses, in order (the last one repeats).
#[derive(Debug)]
pub struct Scripted {
    script: Vec<Response>,
    served: Mutex<Vec<CalloutRequest>>,
}

impl Scripted {
    pub fn new(script: Vec<Response>) -> Self {
        Scripted {
            script,
            served: Mutex::new(Vec::new()),
        }
    }

    /// Every callout it served, in order.
    pub fn served(&self) -> Vec<CalloutRequest> {
        lock(&self.served).clone()
    }
}

impl Service for Scripted {
    fn serve(&self, request: &CalloutRequest) -> Outcome {
        let mut served = lock(&self.served);
        let n = served.len();
        served.push(request.clone());
        self.script
            .get(n)
            .or_else(|| self.script.last())
            .map(Response::outcome)
            .unwrap_or_else(|| Outcome::Answer(Answer::new(200)))
    }
}

/// The checkout upstream: every request it serves creates order N (1, 2, …) and answers
/// `201 {"id":N}` with `location: /orders/N` — so a test can tell which execution an answer
/// came from. Requests from a worker given another outcome do that instead (still counted).
#[derive(Debug, Default)]
pub struct Orders {
    served: Mutex<Vec<CalloutRequest>>,
    /// Per worker: what that worker's executions do instead of creating an order.
    by_worker: Vec<Option<Outcome>>,
}

impl Orders {
    pub fn new() -> Self {
        Orders::default()
    }

    /// Requests from worker `i` get `by_worker[i]` (if `Some`) instead of a created order.
    pub fn with_outcomes(by_worker: Vec<Option<Outcome>>) -> Self {
        Orders {
            served: Mutex::new(Vec::new()),
            by_worker,
        }
    }

    /// The answer for order `id`.
    pub fn created(id: usize) -> Response {
        Response::new(201)
            .json(&format!(r#"{{"id":{id}}}"#))
            .header("location", format!("/orders/{id}"))
    }

    /// Every request it served (each one an execution), in order.
    pub fn served(&self) -> Vec<CalloutRequest> {
        lock(&self.served).clone()
    }
}

impl Service for Orders {
    fn serve(&self, request: &CalloutRequest) -> Outcome {
        let mut served = lock(&self.served);
        served.push(request.clone());
        match self.by_worker.get(request.worker) {
            Some(Some(outcome)) => outcome.clone(),
            _ => Orders::created(served.len()).outcome(),
        }
    }
}
