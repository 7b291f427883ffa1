//! Vectors through the filter `.wasm`: one VM (no configuration needed beyond the defaults) whose
//! `idemgate_conformance` export evaluates each case with the core compiled into the filter.

use super::{parse_answer, Case};
use crate::envoy::{VmSetup, Worker, World};
use crate::error::Result;
use crate::runtime::FilterModule;
use serde_json::Value;

pub struct FilterVectors {
    worker: Worker,
}

impl FilterVectors {
    pub fn start(module: &FilterModule) -> Result<Self> {
        let worker = Worker::start(module, World::new(0), 0, VmSetup::default())?;
        Ok(FilterVectors { worker })
    }

    /// The filter's answer to `case`.
    pub fn answer(&mut self, case: &Case) -> Result<Value> {
        let text = self.worker.conformance(&case.request())?;
        parse_answer(&text)
    }
}
