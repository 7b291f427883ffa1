//! What the tests build their requests, answers and payers from, and the filter's side of a
//! claim and a finish with a remote store.

use super::engine::ModelEngine;
use crate::client::payer::{PayerTag, Payers, ShareReason, ShareRefusal, PEER_GROUP_SOURCE};
use crate::client::scope::{Scope, StorageKey};
use crate::decision::ResponseFacts;
use crate::policy::Policy;
use crate::record::seal::RecordSecrets;
use crate::record::{OwnerToken, StoredBody, StoredResponse};
use crate::request::fingerprint::Fingerprint;
use crate::store::protocol::{ClaimOutcome, ConsumeOutcome, FinishOutcome, ProtocolError};
use crate::store::remote::client::CalloutReply;
use crate::store::remote::{client, End, Failure, Request, Response};
use crate::time::{Span, UnixMillis};
use std::prelude::rust_2021::Vec;

pub(crate) fn skey(n: u8) -> StorageKey {
    StorageKey::from_stored([n; 32])
}

pub(crate) fn response(body: &[u8]) -> StoredResponse {
    StoredResponse {
        status: 201,
        headers: vec![("content-type".into(), "application/json".into())],
        body: StoredBody::Kept(body.to_vec()),
        seal: None,
    }
}

pub(crate) fn claim(key: u8, fp: u8, owner: u8) -> Request {
    Request::Claim {
        key: skey(key),
        fingerprint: Fingerprint([fp; 32]),
        owner: OwnerToken([owner; 16]),
        lease: Span::from_secs(60),
        ttl: Span::from_secs(86_400),
        payers: vec![],
        fill: None,
    }
}

pub(crate) fn samples() -> Vec<Request> {
    vec![
        claim(1, 2, 3),
        Request::Finish {
            key: skey(1),
            owner: OwnerToken([3; 16]),
            ttl: Span(5),
            end: End::Release,
            shard: None,
        },
        Request::Finish {
            key: skey(1),
            owner: OwnerToken([3; 16]),
            ttl: Span::from_secs(86_400),
            end: End::Store(response(b"{\"id\":1}")),
            shard: None,
        },
        Request::Finish {
            key: skey(1),
            owner: OwnerToken([3; 16]),
            ttl: Span(1),
            end: End::Store(StoredResponse {
                status: 500,
                headers: vec![],
                body: StoredBody::NotKept,
                seal: None,
            }),
            shard: None,
        },
        Request::Consume {
            key: skey(9),
            expires_at: UnixMillis(1_700_000_000_000),
            payers: vec![],
            fill: None,
        },
    ]
}

pub(crate) fn sample_responses() -> Vec<Response> {
    vec![
        Response::Claim(ClaimOutcome::Forward {
            owner: OwnerToken([7; 16]),
            takeover: true,
        }),
        Response::Claim(ClaimOutcome::Conflict {
            retry_after: Span(1234),
        }),
        Response::Claim(ClaimOutcome::Replay(response(b"hello"))),
        Response::Claim(ClaimOutcome::Mismatch),
        Response::Claim(ClaimOutcome::StoreFull {
            retry_after: Span(60_000),
        }),
        Response::Finish(FinishOutcome::Stored),
        Response::Finish(FinishOutcome::Released),
        Response::Finish(FinishOutcome::KeptInFlight),
        Response::Finish(FinishOutcome::NotOwner),
        Response::Consume(ConsumeOutcome::Consumed),
        Response::Consume(ConsumeOutcome::AlreadyUsed),
        Response::Consume(ConsumeOutcome::StoreFull {
            retry_after: Span(5000),
        }),
        Response::Claim(ClaimOutcome::QuotaExceeded {
            retry_after: Span(7),
            share: None,
        }),
        Response::Consume(ConsumeOutcome::QuotaExceeded {
            retry_after: Span(8),
            share: None,
        }),
        Response::Claim(ClaimOutcome::QuotaExceeded {
            retry_after: Span(9),
            share: Some(ShareRefusal {
                reason: ShareReason::Address,
                payer: PayerTag([1, 2, 3, 4, 5, 6, 7, 1]),
            }),
        }),
        Response::Claim(ClaimOutcome::QuotaExceeded {
            retry_after: Span(10),
            share: Some(ShareRefusal {
                reason: ShareReason::Route,
                payer: PayerTag([9, 2, 3, 4, 5, 6, 7, 3]),
            }),
        }),
        Response::Consume(ConsumeOutcome::QuotaExceeded {
            retry_after: Span(11),
            share: Some(ShareRefusal {
                reason: ShareReason::Identity,
                payer: PayerTag([8; 8]),
            }),
        }),
        Response::Consume(ConsumeOutcome::QuotaExceeded {
            retry_after: Span(12),
            share: Some(ShareRefusal {
                reason: ShareReason::Bytes,
                payer: PayerTag([7; 8]),
            }),
        }),
        Response::Failed(Failure::Timeout),
        Response::Failed(Failure::Corrupt),
    ]
}

pub(crate) fn finish_store(key: u8, owner: u8, body: &[u8]) -> Request {
    Request::Finish {
        key: skey(key),
        owner: OwnerToken([owner; 16]),
        ttl: Span::from_secs(86_400),
        end: End::Store(response(body)),
        shard: None,
    }
}

/// What the filter does at the end of a forwarded request with a remote store: the policy half
/// locally ([`client::finish`]), the record half through the service; a kept-in-flight outcome
/// sends nothing.
pub(crate) fn remote_finish(
    engine: &mut ModelEngine,
    policy: &Policy,
    key: StorageKey,
    owner: OwnerToken,
    facts: ResponseFacts,
    now: UnixMillis,
) -> FinishOutcome {
    match client::finish(key, owner, facts, policy, &secrets()) {
        None => FinishOutcome::KeptInFlight,
        Some(request) => {
            let response = engine.run(request, now);
            let body = response.encode();
            let status = if matches!(response, Response::Failed(_)) {
                503
            } else {
                200
            };
            client::finish_outcome(CalloutReply {
                status: Some(status),
                body: &body,
            })
            .unwrap()
        }
    }
}

/// The secrets the filters of these tests seal with.
pub(crate) fn secrets() -> RecordSecrets {
    RecordSecrets::new(&[b"remote-tests-record-secret-0123456789"]).unwrap()
}

/// A claim through the service model, its answer read as the filter reads it (seal checked).
pub(crate) fn remote_claim(
    engine: &mut ModelEngine,
    request: Request,
    now: UnixMillis,
) -> Result<ClaimOutcome, ProtocolError> {
    let key = *request.key();
    let body = engine.run(request, now).encode();
    client::claim_outcome(
        CalloutReply {
            status: Some(200),
            body: &body,
        },
        &key,
        &secrets(),
    )
}

/// A replay without its (checked) seal: what the local store replays.
pub(crate) fn unsealed(outcome: ClaimOutcome) -> ClaimOutcome {
    match outcome {
        ClaimOutcome::Replay(mut stored) => {
            assert!(
                stored.seal.take().is_some(),
                "a remote replay carries a seal"
            );
            ClaimOutcome::Replay(stored)
        }
        other => other,
    }
}

/// Who pays for a request of client `n`: nobody, an address group alone, or an identity with
/// its group (two groups, two identities, so payers share a ledger sometimes).
pub(crate) fn payers(n: u8) -> Payers {
    const GROUPS: [&[u8]; 2] = [&[4, 32, 10, 0, 0, 1], &[4, 32, 10, 0, 0, 2]];
    let identity = |i: &'static [u8]| Scope {
        source: "header:authorization",
        value: i,
    };
    match n {
        0 => Payers::NONE,
        1 => Payers::of(
            Scope {
                source: PEER_GROUP_SOURCE,
                value: GROUPS[0],
            },
            false,
            None,
        ),
        2 => Payers::of(identity(b"1"), false, Some(GROUPS[0])),
        _ => Payers::of(identity(b"2"), false, Some(GROUPS[1])),
    }
}
