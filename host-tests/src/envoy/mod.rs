//! The simulated Envoy: workers (filter VMs), what they share, and the stream flow around the
//! filter's callbacks.

pub mod callouts;
pub mod clock;
pub mod entropy;
pub mod faults;
mod flow;
pub mod headers;
pub mod metrics;
pub mod reentry;
pub mod shared_data;
pub mod stream;
pub mod vm;
pub mod worker;
pub mod world;

pub use callouts::{
    Answer, CalloutFault, CalloutRecord, CalloutRequest, Cluster, ClusterPath, Delivery,
    Destination, Outcome, Resolved, Service,
};
pub use clock::Clock;
pub use faults::{BufferFault, Effect, Faults, SharedOp};
pub use headers::HeaderMap;
pub use metrics::{Metric, MetricKind, Metrics};
pub use reentry::{InnerPass, InnerReply};
pub use shared_data::{SharedData, Write};
pub use stream::{ClientAnswer, Forwarded, LocalReply, Phase, StreamState, ATTEMPT_COUNT};
pub use vm::{Chain, Gate, HttpCallResponse, VmState};
pub use worker::{VmSetup, Worker};
pub use world::{LogLine, Queues, UpstreamCall, World};
