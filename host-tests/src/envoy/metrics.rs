//! Envoy's stats as the filter sees them through `proxy_define_metric` and friends: counters,
//! gauges and histograms by name, shared by every worker (one stats store per Envoy); ids are
//! per VM.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Counter,
    Gauge,
    Histogram,
}

impl MetricKind {
    pub fn from_abi(value: i32) -> Option<Self> {
        match value {
            0 => Some(MetricKind::Counter),
            1 => Some(MetricKind::Gauge),
            2 => Some(MetricKind::Histogram),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metric {
    pub kind: MetricKind,
    /// Counter and gauge value; for a histogram, the number of values recorded.
    pub value: i64,
    /// Histogram samples.
    pub samples: Vec<u64>,
}

/// The stats store of one Envoy.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    by_name: BTreeMap<String, Metric>,
}

impl Metrics {
    /// Defines (or finds) a metric; `None` if the name exists with another kind.
    pub fn define(&mut self, name: &str, kind: MetricKind) -> bool {
        let metric = self.by_name.entry(name.to_string()).or_insert(Metric {
            kind,
            value: 0,
            samples: Vec::new(),
        });
        metric.kind == kind
    }

    pub fn get(&self, name: &str) -> Option<&Metric> {
        self.by_name.get(name)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut Metric> {
        self.by_name.get_mut(name)
    }

    /// Every metric, by name.
    pub fn all(&self) -> impl Iterator<Item = (&str, &Metric)> {
        self.by_name.iter().map(|(k, v)| (k.as_str(), v))
    }
}
