//! How the filter sends a detached exchange: back into Envoy through the re-entry listener (the
//! default deployment), or straight to a cluster, skipping Envoy's routes and the filters after
//! idemgate (the explicit opt-out). Each way has the cluster name the harness registers it under
//! and the filter configuration that selects it.

use crate::envoy::reentry::REENTRY_CLUSTER;
use crate::envoy::ClusterPath;

/// The two ways a detached exchange reaches the app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Forwarding {
    /// `upstream.reentry`: the cluster of the internal listener that carries the routes and the
    /// filters after idemgate; every answer carries the inner pass's mark.
    #[default]
    Reentry,
    /// `upstream.cluster_skipping_routes_and_filters`: the app's cluster, reached directly.
    SkippingRoutesAndFilters,
}

impl Forwarding {
    /// The cluster the harness registers for this way: `idemgate_reentry` (as the shipped
    /// configurations name it) or `upstream`.
    pub fn cluster(self) -> &'static str {
        match self {
            Forwarding::Reentry => REENTRY_CLUSTER,
            Forwarding::SkippingRoutesAndFilters => "upstream",
        }
    }

    /// How the simulated Envoy reaches the app behind [`Forwarding::cluster`].
    pub fn path(self) -> ClusterPath {
        match self {
            Forwarding::Reentry => ClusterPath::Reentry,
            Forwarding::SkippingRoutesAndFilters => ClusterPath::Direct,
        }
    }

    /// The field of the filter's `upstream` section that names the cluster.
    pub fn field(self) -> &'static str {
        match self {
            Forwarding::Reentry => "reentry",
            Forwarding::SkippingRoutesAndFilters => "cluster_skipping_routes_and_filters",
        }
    }

    /// The filter's `upstream` section for this way, as a JSON member:
    /// `"upstream": {"<field>": "<cluster>", "timeout": "<timeout>"}`.
    pub fn upstream(self, timeout: &str) -> String {
        format!(
            r#""upstream": {{"{}": "{}", "timeout": "{timeout}"}}"#,
            self.field(),
            self.cluster()
        )
    }
}
