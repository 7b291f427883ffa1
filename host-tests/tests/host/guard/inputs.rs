//! The route shapes explored and the inputs a host can hand the machine: store answers, ordering
//! decisions, sends, upstream heads, body chunks, ends, clock failures, the client leaving.

use idemgate_core::client::scope::StorageKey;
use idemgate_core::guard::sequencer::{Ordered, Probe};
use idemgate_core::guard::{Guarded, VerifiedToken};
use idemgate_core::policy::{FailureMode, Policy, RouteKind};
use idemgate_core::record::seal::SealError;
use idemgate_core::record::{OwnerToken, StoredBody, StoredResponse};
use idemgate_core::time::{Span, UnixMillis};
use idemgate_core::{ClaimOutcome, ConsumeOutcome, ProtocolError};

/// The host's resource claim (a number the model hands out) and kept request.
pub(crate) type Machine = Guarded<u32, &'static str>;

pub(crate) const KEY: StorageKey = StorageKey::from_stored([1; 32]);
pub(crate) const OWNER: OwnerToken = OwnerToken([2; 16]);
pub(crate) const RESOURCE: u32 = 77;
pub(crate) const TOKEN: VerifiedToken = VerifiedToken {
    expires_at: UnixMillis(9_000),
    use_key: StorageKey::from_stored([3; 32]),
};

/// One route shape.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    /// `false`: a request without a key on an optional-key route.
    pub(crate) keyed: bool,
    pub(crate) kind: RouteKind,
    pub(crate) ordered: bool,
    pub(crate) token: bool,
    pub(crate) detached: bool,
    pub(crate) failure: FailureMode,
}

/// What a host can hand the machine.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Input {
    Claim(u8),
    Consume(u8),
    Order(u8),
    Sent(u8),
    Head(Option<u16>),
    Chunk(bool),
    Ended(bool),
    ClockFailed,
    /// The client left.
    Gone,
}

pub(crate) const INPUTS: &[Input] = &[
    Input::Claim(0),
    Input::Claim(1),
    Input::Claim(2),
    Input::Claim(3),
    Input::Claim(4),
    Input::Claim(5),
    Input::Claim(6),
    Input::Claim(7),
    Input::Consume(0),
    Input::Consume(1),
    Input::Consume(2),
    Input::Consume(3),
    Input::Order(0),
    Input::Order(1),
    Input::Order(2),
    Input::Sent(0),
    Input::Sent(1),
    Input::Sent(2),
    Input::Head(Some(201)),
    Input::Head(Some(500)),
    Input::Head(None),
    Input::Chunk(true),
    Input::Chunk(false),
    Input::Ended(true),
    Input::Ended(false),
    Input::ClockFailed,
    Input::Gone,
];

pub(crate) fn claim_outcome(case: u8) -> Result<ClaimOutcome, ProtocolError> {
    let retry_after = Span::from_secs(2);
    Ok(match case {
        0 => ClaimOutcome::Forward {
            owner: OWNER,
            takeover: false,
        },
        1 => ClaimOutcome::Forward {
            owner: OWNER,
            takeover: true,
        },
        2 => ClaimOutcome::Conflict { retry_after },
        3 => ClaimOutcome::Replay(StoredResponse {
            status: 201,
            headers: Vec::new(),
            body: StoredBody::Kept(b"{}".to_vec()),
            seal: None,
        }),
        4 => ClaimOutcome::Mismatch,
        5 => ClaimOutcome::StoreFull { retry_after },
        6 => return Err(ProtocolError::Contention),
        _ => return Err(ProtocolError::Tampered(SealError::Missing)),
    })
}

pub(crate) fn consume_outcome(case: u8) -> Result<ConsumeOutcome, ProtocolError> {
    Ok(match case {
        0 => ConsumeOutcome::Consumed,
        1 => ConsumeOutcome::AlreadyUsed,
        2 => ConsumeOutcome::QuotaExceeded {
            retry_after: Span::from_secs(1),
            share: None,
        },
        _ => return Err(ProtocolError::Contention),
    })
}

pub(crate) fn ordered_event() -> Ordered {
    let json = r#"{"routes": [{"prefix": "/hooks", "kind": "callback", "key_from": [{"header": "x-delivery"}],
        "order": {"unsigned": "allow", "resource": {"header": "x-order"}, "event": {"header": "x-topic"},
                  "table": {"initial": "new", "transitions": [["new", "pay", "paid"]]}}}]}"#;
    let policy = Policy::from_json(json, &|_| None).unwrap();
    let headers = [("x-topic", &b"pay"[..]), ("x-order", b"o-1")];
    Probe::start(&policy.routes[0], headers)
        .unwrap()
        .finish()
        .unwrap()
        .unwrap()
}
