//! The filter's half of the remote store: which request each operation sends, and what the
//! callout's answer means. A host adapter (the Envoy filter, a test model) only moves these bytes:
//! it sends [`claim`], [`finish`] or [`consume`] as the body of `POST /v1/op` and feeds what came
//! back — or that nothing came back — to [`answer`], which returns the same outcomes the local
//! protocol returns, or a [`ProtocolError`] for the configured failure mode.
//!
//! The engine is not trusted with the answers it keeps: [`finish`] seals the answer it
//! stores with the Envoys' [`RecordSecrets`], and [`claim_outcome`] replays only an answer whose
//! seal checks out for its key — anything else is [`ProtocolError::Tampered`], never replayed.
//! The sequencer's resource states are sealed alike: `order_settle` seals the state it
//! advances to, and `begin_outcome` acts on a begin only if the state it was decided on checks
//! out.

use super::wire::{End, Request, Response};
use crate::client::scope::StorageKey;
use crate::decision::{verdict, ResponseFacts, Verdict};
use crate::policy::Policy;
use crate::record::seal::RecordSecrets;
use crate::record::OwnerToken;
use crate::request::fingerprint::Fingerprint;
use crate::store::protocol::{ClaimOutcome, ConsumeOutcome, FinishOutcome, ProtocolError};
use crate::store::share::{Fill, Payers};
use crate::store::Layout;
use crate::store::StoreError;
use crate::time::UnixMillis;
use alloc::string::String;

/// The path operations are posted to.
pub const PATH: &str = "/v1/op";

/// How many times a host sends a finish whose answer did not come back before it gives up (the
/// claim then stays in flight until its lease ends: retries get 409, then take it over).
pub(crate) const FINISH_ATTEMPTS: u32 = 3;

/// The claim a request makes, with the policy's lease and TTL, charged to `payers` within the
/// policy's shares.
#[must_use = "the request must be sent to the store service"]
pub fn claim(
    key: StorageKey,
    fingerprint: Fingerprint,
    owner: OwnerToken,
    payers: Payers,
    policy: &Policy,
) -> Request {
    Request::Claim {
        key,
        fingerprint,
        owner,
        lease: policy.lease,
        ttl: policy.ttl,
        payers: policy.shares.billed(payers),
        fill: fill(&key, policy),
    }
}

/// A late delivery's look-up of its key: read only, on every engine
/// (`crate::decision::decide_late`). Its answer is read as a claim's ([`claim_outcome`]): a
/// replay only if its seal checks out.
#[must_use = "the request must be sent to the store service"]
pub fn replay(key: StorageKey, fingerprint: Fingerprint) -> Request {
    Request::Replay { key, fingerprint }
}

/// What the end of a forwarded request sends: the policy decides here, on the filter's side,
/// which answers are stored and how (`verdict`), and a stored answer is sealed for `key` with
/// `secrets`. `None` when nothing is to be written (the outcome is in doubt: the claim stays in
/// flight), so no callout is made.
#[must_use = "the request must be sent to the store service"]
pub fn finish(
    key: StorageKey,
    owner: OwnerToken,
    facts: ResponseFacts,
    policy: &Policy,
    secrets: &RecordSecrets,
) -> Option<Request> {
    let end = match verdict(facts, policy) {
        Verdict::Store(response) => End::Store(secrets.seal(&key, response)),
        Verdict::Release => End::Release,
        Verdict::KeepInFlight => return None,
    };
    Some(Request::Finish {
        key,
        owner,
        ttl: policy.ttl,
        end,
        shard: fill(&key, policy).map(|fill| fill.shard),
    })
}

/// A one-time token's single use, charged to `payers` like a claim.
#[must_use = "the request must be sent to the store service"]
pub fn consume(
    key: StorageKey,
    expires_at: UnixMillis,
    payers: Payers,
    policy: &Policy,
) -> Request {
    Request::Consume {
        key,
        expires_at,
        payers: policy.shares.billed(payers),
        fill: fill(&key, policy),
    }
}

/// Where the record under `key` is counted, as the local store would count it: the fill shard
/// the policy's `capacity` (and `records_per_cell`) places it in, with the shares' pressure.
/// `None` when no share is counted.
fn fill(key: &StorageKey, policy: &Policy) -> Option<Fill> {
    let layout = Layout {
        capacity: policy.capacity,
    };
    policy.shares.counted().then(|| Fill {
        shard: layout.fill_shard(key),
        pressure: policy.shares.pressure,
    })
}

/// What a callout brought back. `None` when the host got no answer at all (connection refused,
/// reset, the callout's own timeout).
pub struct CalloutReply<'a> {
    pub status: Option<u16>,
    pub body: &'a [u8],
}

/// Decodes a callout's answer. No answer, a body that is not a response of this wire version
/// (a proxy's error page, a truncated body), or a status that does not match the body are all
/// store errors: the failure mode applies, never a guess.
#[must_use = "the store service's answer says what the host must do"]
pub fn answer(answer: CalloutReply<'_>) -> Result<Response, ProtocolError> {
    let unavailable = |why: &str| ProtocolError::Store(StoreError::Unavailable(String::from(why)));
    let Some(status) = answer.status else {
        return Err(unavailable("no answer from the store service"));
    };
    let response = Response::decode(answer.body).map_err(|e| unavailable(e.code()))?;
    match (status, &response) {
        (200, Response::Failed(_)) => Err(ProtocolError::UnexpectedReply),
        (200, _) | (400 | 503, Response::Failed(_)) => Ok(response),
        _ => Err(ProtocolError::UnexpectedReply),
    }
}

/// [`answer`] for the claim of `key`. A replay whose seal does not check out under `secrets`
/// (planted or altered in the engine, moved from another key, or unsealed) is
/// [`ProtocolError::Tampered`]: it is never replayed, and the failure mode does not apply
/// (`ProtocolError::allows_failure_mode`).
#[must_use = "the outcome says what the host must do with the request"]
pub fn claim_outcome(
    reply: CalloutReply<'_>,
    key: &StorageKey,
    secrets: &RecordSecrets,
) -> Result<ClaimOutcome, ProtocolError> {
    match answer(reply)?.into_claim()? {
        ClaimOutcome::Replay(stored) => match secrets.check(key, &stored) {
            Ok(()) => Ok(ClaimOutcome::Replay(stored)),
            Err(e) => Err(ProtocolError::Tampered(e)),
        },
        other => Ok(other),
    }
}

/// [`answer`] for a finish.
#[must_use = "the outcome says whether the answer was stored"]
pub(crate) fn finish_outcome(reply: CalloutReply<'_>) -> Result<FinishOutcome, ProtocolError> {
    answer(reply)?.into_finish()
}

/// [`answer`] for a token use.
#[must_use = "a token counts as consumed only if the outcome says so"]
pub fn consume_outcome(reply: CalloutReply<'_>) -> Result<ConsumeOutcome, ProtocolError> {
    answer(reply)?.into_consume()
}

/// The sequencer's begin for `event` at the resource `key`: the route's rule and
/// the policy's lease and TTL, as [`crate::order::begin`] takes them on the local store; a new
/// resource record is charged to `payers` (the delivery claim's), as a claim's record is.
pub(crate) fn order_begin(
    key: StorageKey,
    owner: OwnerToken,
    event: &str,
    rule: &crate::order::OrderRule,
    payers: Payers,
    policy: &crate::policy::Policy,
) -> Request {
    Request::OrderBegin {
        key,
        owner,
        lease: policy.lease,
        ttl: policy.ttl,
        retry_after: rule.retry_after,
        forward_after: rule.forward_after,
        event: String::from(event),
        table: rule.table.clone(),
        // A new resource record is charged as a claim's is.
        payers: policy.shares.billed(payers),
        fill: fill(&key, policy),
    }
}

/// The sequencer's settle of `owner`'s claim on the resource `key`, claimed at `version`
/// ([`begin_outcome`]): an applied event's new state is sealed at the version it advances to.
pub(crate) fn order_settle(
    key: StorageKey,
    owner: OwnerToken,
    to: &str,
    applied: bool,
    version: u64,
    policy: &crate::policy::Policy,
    secrets: &RecordSecrets,
) -> Request {
    let seal = applied
        .then(|| secrets.seal_state(&key, to, version.wrapping_add(1)))
        .flatten();
    Request::OrderSettle {
        key,
        owner,
        ttl: policy.ttl,
        to: String::from(to),
        applied,
        seal,
    }
}

/// What an ordering begin's answer for the resource `key` means, and the version the resource
/// was at (0 when it had no record): what [`order_settle`] seals from. A failure is a store error
/// for the failure mode; a state whose seal does not check out ([`RecordSecrets::check_state`],
/// `initial`: the route's table's) is [`ProtocolError::Tampered`], whatever the outcome — the
/// service decided on a state no filter wrote.
pub(crate) fn begin_outcome(
    reply: CalloutReply<'_>,
    key: &StorageKey,
    initial: &str,
    secrets: &RecordSecrets,
) -> Result<(crate::order::BeginOutcome, u64), ProtocolError> {
    let (outcome, read) = answer(reply)?.into_begin()?;
    let Some(read) = read else {
        return Ok((outcome, 0));
    };
    secrets
        .check_state(key, &read, initial)
        .map_err(ProtocolError::Tampered)?;
    Ok((outcome, read.version))
}

/// What an ordering settle's answer means.
pub(crate) fn settle_outcome(
    reply: CalloutReply<'_>,
) -> Result<crate::order::SettleOutcome, ProtocolError> {
    answer(reply)?.into_settle()
}
