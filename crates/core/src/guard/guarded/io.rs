//! What the host hands a [`Guarded`] machine and what it gets back: the store's questions and
//! answers, the sequencer's decision, whether a detached exchange went out, the actions to
//! carry out, the request a detached route keeps, and the warnings to log.

#[allow(unused_imports)] // named by the docs
use super::Guarded;
use crate::answer::HttpAnswer;
use crate::client::payer::PayerTag;
use crate::client::scope::StorageKey;
use crate::decision::{DoubtCause, ResponseFacts};
use crate::guard::sequencer::Ordered;
use crate::record::OwnerToken;
use crate::request::budget::Reservation;
use crate::request::fingerprint::Fingerprint;
use crate::store::protocol::{ClaimOutcome, ConsumeOutcome, ProtocolError};
use crate::store::share::{Payers, ShareRefusal};
use crate::time::UnixMillis;
use alloc::vec::Vec;
use core::fmt;

/// A question for the store (the host's local store answers at once, a remote one later); its
/// answer comes back through [`Guarded::answered`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ask {
    /// Claim the key for this request ([`crate::Protocol::claim`]).
    Claim(Claim),
    /// Look the key up for a late delivery, writing nothing
    /// ([`crate::Protocol::replay`]); answered as a claim is
    /// ([`Reply::Claim`]).
    Replay {
        key: StorageKey,
        fingerprint: Fingerprint,
    },
    /// Use the request's one-time token, once ([`crate::Protocol::consume`]).
    Consume {
        use_key: StorageKey,
        expires_at: UnixMillis,
        payers: Payers,
    },
}

/// A claim on a request's key, as [`crate::Protocol::claim`] takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    pub key: StorageKey,
    pub fingerprint: Fingerprint,
    /// The host's fresh owner token for this request.
    pub owner: OwnerToken,
    pub payers: Payers,
}

/// The store's answer to an [`Ask`], of the same kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Claim(Result<ClaimOutcome, ProtocolError>),
    Consume(Result<ConsumeOutcome, ProtocolError>),
}

/// What the sequencer decided for the request's event (the host asks it for
/// [`Action::Sequence`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ruling<O> {
    /// Let the request on; with the resource's claim, settled when the upstream answers.
    Forward(Option<O>),
    /// Answer it at the edge: nothing ran, so the delivery id's claim is released.
    Answer(HttpAnswer),
}

/// Whether a detached exchange went out ([`Action::Detach`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent<O> {
    /// It went out and its answer will find the exchange: the exchange settles the claim.
    Waiting,
    /// The host could not send it: the upstream never saw it. Its resource claim comes back.
    Failed { order: Option<O> },
    /// It went out, but its answer would find nothing to settle it with: in doubt.
    Lost,
}

/// Something for the host to do, in the order given.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "the host carries out every action"]
pub enum Action<O, H> {
    /// Ask the store; the request waits for the [`Reply`].
    Ask(Ask),
    /// Ask the sequencer about the event this claim delivers; the request waits for the
    /// [`Ruling`].
    Sequence {
        ordered: Ordered,
        key: StorageKey,
        owner: OwnerToken,
        /// Who pays for a new resource record: the delivery claim's payers.
        payers: Payers,
    },
    /// Let the request go on to the upstream as the key's owner; its answer comes back through
    /// [`Guarded::upstream_head`].
    Forward,
    /// Let the request go on without idempotency: no claim is held.
    Pass,
    /// Send the kept request on a detached exchange that settles the claim itself; report
    /// through [`Guarded::sent`].
    Detach {
        key: StorageKey,
        owner: OwnerToken,
        held: Kept<H>,
        order: Option<O>,
    },
    /// Park the request: a duplicate of one in flight on `key`, waiting for its answer. Say
    /// whether there was room for it with [`Guarded::parked`], then [`Guarded::wake`] it
    /// whenever `key`'s record may have changed (another request on it finished) and at least
    /// once a tick, until it gives an answer; it asks the store again each time. `payer` is the
    /// request's first payer, whose share of the host's waiters it takes
    /// ([`crate::guard::Waiters::admit`]).
    Park {
        key: StorageKey,
        payer: Option<PayerTag>,
    },
    /// Answer the client with this: the request is over.
    Answer(HttpAnswer),
    /// Finish the claim with these facts ([`crate::Protocol::finish`]); `cause` says
    /// why should they be in doubt.
    Finish {
        key: StorageKey,
        owner: OwnerToken,
        facts: ResponseFacts,
        cause: DoubtCause,
    },
    /// Settle the sequencer's claim on the resource: the event applied, or not.
    SettleResource { claim: O, applied: bool },
    /// Mark the upstream's answer as the one that applied the event (`idemgate-order: applied`).
    MarkApplied,
    /// Log this at warning level.
    Warn(Warning),
}

/// The request a detached route keeps to send itself: the host's part of it (`held`: where it
/// goes, its headers) and its body as taken in, whose bytes stay reserved from the hashing
/// budget (`reserved`) until the exchange that sends it ends: the host keeps the reservation
/// with the exchange, as the proxy keeps the body it sends. `relay` is the exchange's part of
/// the relay budget, empty until the claim is won and `upstream.max_body` from then on; the host
/// keeps it with the exchange until its answer has been read.
#[derive(Debug)]
pub struct Kept<H> {
    pub held: H,
    pub body: Vec<u8>,
    pub reserved: Option<Reservation>,
    pub relay: Reservation,
}

/// The same request kept: the same part and body, with as many bytes reserved.
impl<H: PartialEq> PartialEq for Kept<H> {
    fn eq(&self, other: &Self) -> bool {
        let bytes = |kept: &Self| {
            let body = kept.reserved.as_ref().map(Reservation::bytes);
            (body, kept.relay.bytes())
        };
        self.held == other.held && self.body == other.body && bytes(self) == bytes(other)
    }
}

impl<H: Eq> Eq for Kept<H> {}

/// A warning for the host's log.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// The store could not decide.
    StoreFailed(ProtocolError),
    /// A stored answer for `key` failed its seal: never replayed.
    RecordCorrupt {
        key: StorageKey,
        error: ProtocolError,
    },
    /// The upstream's answer could not be read whole: in doubt.
    AnswerUnreadable,
    /// The host handed in something the request was not waiting for (a host bug): ignored.
    OutOfOrder(&'static str),
    /// A payer was refused for its share (429): which share, and the payer's hashed label.
    OverShare(ShareRefusal),
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::StoreFailed(e) => write!(f, "store failed: {e}"),
            Warning::RecordCorrupt { key, error } => write!(
                f,
                "key {}: {error}; not replayed (502 record_corrupt)",
                key.log_label()
            ),
            Warning::AnswerUnreadable => f.write_str(
                "the upstream answer could not be read whole (no valid :status, or a part the host did not hand over)",
            ),
            Warning::OutOfOrder(what) => write!(f, "{what} came while the request did not wait for it"),
            Warning::OverShare(refusal) => write!(f, "{refusal}"),
        }
    }
}
