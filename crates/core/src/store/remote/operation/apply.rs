//! What an operation does to the record under its key, decided on the record the engine holds
//! ([`apply`]), and the answer when the engine has no memory left for the write ([`full`]).

use super::*;

/// Decides `request` on the record found under its key (`None` when the key is absent), at `now`
/// on the engine's clock: the rules of the core's `rule` module, the same the local store applies.
/// A claim's record names the payers it is charged to (their ledgers are the [`Operation`]'s next
/// steps), so its finish knows whose charge to move.
#[must_use = "the response must be sent and the change written"]
pub fn apply(request: &Request, current: Option<&Record>, now: UnixMillis) -> (Response, Change) {
    let live = current.filter(|record| !record.is_expired(now));
    match request {
        Request::Claim {
            fingerprint,
            owner,
            lease,
            ttl,
            payers,
            ..
        } => {
            let mut tags = payers.iter().map(|p| p.tag);
            let payers = Payers::from_tags(tags.next(), tags.next());
            let (outcome, change) =
                rule::claim(live, *fingerprint, *owner, payers, now, (*lease, *ttl));
            (Response::Claim(outcome), change)
        }
        Request::Replay { fingerprint, .. } => {
            let (outcome, change) = rule::replay(live, *fingerprint, now);
            (Response::Claim(outcome), change)
        }
        Request::Finish {
            owner, ttl, end, ..
        } => {
            let verdict = match end {
                End::Release => Verdict::Release,
                End::Store(response) => Verdict::Store(response.clone()),
            };
            let (outcome, change) = rule::finish(live, *owner, verdict, now, *ttl);
            (Response::Finish(outcome), change)
        }
        Request::OrderBegin {
            owner,
            lease,
            ttl,
            retry_after,
            forward_after,
            event,
            table,
            ..
        } => {
            let current = match live {
                None => None,
                Some(Record::Resource(r)) => Some(r),
                // Resource keys are a hash domain of their own: anything else is not ours.
                Some(_) => return (Response::Failed(Failure::Corrupt), Change::Keep),
            };
            let begin = crate::order::Begin {
                table,
                event,
                owner: *owner,
                lease: *lease,
                ttl: *ttl,
                retry_after: *retry_after,
                forward_after: *forward_after,
            };
            let (outcome, write) = crate::order::begin(current, &begin, now);
            // The state the outcome was decided on, for the filter to check its seal.
            let read = current
                .filter(|r| now < r.expires_at)
                .map(crate::order::Resource::read_state);
            let change = write.map_or(Change::Keep, |r| Change::Put(Record::Resource(r)));
            (Response::Begin(outcome, read), change)
        }
        Request::OrderSettle {
            owner,
            ttl,
            to,
            applied,
            seal,
            ..
        } => {
            let current = match live {
                Some(Record::Resource(r)) => Some(r),
                _ => None,
            };
            let (outcome, write) = crate::order::settle(current, *owner, to, *applied, *ttl, now);
            let change = write.map_or(Change::Keep, |mut r| {
                if let SettleOutcome::Advanced { .. } = outcome {
                    // The settling filter sealed the new state; the service holds no secret.
                    r.seal = *seal;
                }
                Change::Put(Record::Resource(r))
            });
            (Response::Settle(outcome), change)
        }
        Request::Consume { expires_at, .. } => {
            let (outcome, change) = rule::consume(live, *expires_at, now);
            (Response::Consume(outcome), change)
        }
    }
}

/// How long a client is told to wait when the engine is out of memory: the engine frees memory as
/// keys expire, and there is no one record whose expiry to point at.
pub(crate) const FULL_RETRY_AFTER: Span = Span::from_secs(5);

/// The answer when the engine refuses a write for lack of memory: claims and token uses are told
/// the store is full (the filter's `on_store_full` applies); a finish fails (the claim stays in
/// flight until its lease ends, as for any finish that cannot land).
#[must_use = "the response must be sent"]
pub fn full(request: &Request) -> Response {
    match request {
        Request::Claim { .. } => Response::Claim(ClaimOutcome::StoreFull {
            retry_after: FULL_RETRY_AFTER,
        }),
        Request::Consume { .. } => Response::Consume(ConsumeOutcome::StoreFull {
            retry_after: FULL_RETRY_AFTER,
        }),
        Request::OrderBegin { .. } => Response::Begin(
            crate::order::BeginOutcome::StoreFull {
                retry_after: FULL_RETRY_AFTER,
            },
            None,
        ),
        Request::Finish { .. } | Request::OrderSettle { .. } => Response::Failed(Failure::Full),
        // A look-up writes nothing, so the engine never refuses it a write.
        Request::Replay { .. } => Response::Failed(Failure::Full),
    }
}
