//! The lines the sequencer's steps give the host's log, typed: the host picks the level
//! ([`OrderNote::is_warning`]) and writes the text ([`fmt::Display`]).

use crate::client::payer::ShareRefusal;
use crate::client::scope::StorageKey;
use crate::request::json::Quoted;
use crate::store::protocol::ProtocolError;
use alloc::string::String;
use core::fmt;

/// Something a begin or settle of the sequencer says to the host's log.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OrderNote {
    /// A new resource record was refused for a payer's share (429): which share, and whose.
    OverShare(ShareRefusal),
    /// The event is illegal in the resource's state: acknowledged, not forwarded.
    Illegal { event: String, state: String },
    /// The state a begin was decided on failed its seal: 503, never forwarded.
    RecordCorrupt {
        key: StorageKey,
        error: ProtocolError,
    },
    /// The store could not decide a begin.
    StoreFailed(ProtocolError),
    /// The store could not settle a claim: it holds until its lease ends.
    SettleFailed(ProtocolError),
    /// A settle found its claim lapsed and taken by another event: nothing written.
    Lapsed,
    /// A settle could not be made without the host's clock: the claim holds until its lease
    /// ends.
    NoClock,
}

impl OrderNote {
    /// A warning; otherwise news (an illegal event is the sender's business, not the edge's).
    pub fn is_warning(&self) -> bool {
        !matches!(self, OrderNote::Illegal { .. })
    }
}

impl fmt::Display for OrderNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OrderNote::OverShare(refusal) => write!(f, "{refusal}"),
            OrderNote::Illegal { event, state } => write!(
                f,
                "order: event {} is illegal in state {}: acknowledged, not forwarded",
                Quoted(event),
                Quoted(state)
            ),
            OrderNote::RecordCorrupt { key, error } => write!(
                f,
                "order: resource {}: {error}; event not decided (503 order_record_corrupt)",
                key.log_label()
            ),
            OrderNote::StoreFailed(e) => write!(f, "order: store failed: {e}"),
            OrderNote::SettleFailed(e) => write!(f, "order: store failed settling: {e}"),
            OrderNote::Lapsed => {
                f.write_str("order: the resource's claim had lapsed and was taken: nothing written")
            }
            OrderNote::NoClock => f.write_str("order: could not settle without a clock"),
        }
    }
}
