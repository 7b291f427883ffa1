//! What must hold after every schedule:
//! - no worker trapped, nothing suspicious happened at the host;
//! - at most `max_upstream_calls` requests reached the upstream (one per key, plus one per lease
//!   that legitimately expired), and at least one;
//! - every client got the original answer, a replay of a stored answer, or a 409;
//! - the records went only through legal transitions (no stale owner overwrote a newer record, no
//!   live lease was taken over, nothing completed without a claim);
//! - no lease is stuck: after the lease, the same request is answered (replayed or forwarded), not
//!   refused with 409; no in-flight record has a lease longer than its TTL.

use super::run::{Plan, Run};
use crate::envoy::{ClientAnswer, Write};
use crate::scenario::{Response, Upstream};
use idemgate_core::record::{Bucket, Record};
use std::collections::HashMap;

/// The first invariant that fails, described.
pub fn check(plan: &Plan, run: &Run) -> Result<(), String> {
    for actor in &run.actors {
        if let Some(error) = &actor.error {
            return Err(format!("worker {} failed: {error}", actor.actor));
        }
    }
    if !run.anomalies.is_empty() {
        return Err(format!("host anomalies: {:?}", run.anomalies));
    }
    let calls = run.upstream_calls.len();
    if calls == 0 || calls > plan.max_upstream_calls {
        return Err(format!(
            "{calls} requests reached the upstream (allowed: 1..={}): {:?}",
            plan.max_upstream_calls, run.upstream_calls
        ));
    }
    answers(plan, run)?;
    let forwarded: Vec<usize> = run
        .actors
        .iter()
        .filter(|a| a.forwarded)
        .map(|a| a.actor)
        .collect();
    transitions(&run.writes, &forwarded)?;
    match &run.followup {
        Err(e) => return Err(format!("the follow-up request failed: {e}")),
        Ok(Some(answer)) if answer.status == 409 => {
            return Err(
                "a lease is stuck: after the lease ended the same request still got 409".into(),
            )
        }
        Ok(_) => {}
    }
    Ok(())
}

fn is_original(answer: &ClientAnswer, upstream: &Upstream) -> bool {
    match upstream {
        Upstream::Respond(response) if response.cut_after.is_none() => {
            !answer.local
                && answer.complete
                && answer.status == response.status
                && answer.body == response.body
        }
        Upstream::Respond(_) | Upstream::ClientGone => !answer.complete,
        Upstream::Fail(failure) => answer.local && answer.status == failure.envoy_reply().0,
    }
}

fn is_replay_of(answer: &ClientAnswer, response: &Response) -> bool {
    answer.header("idempotent-replayed") == Some("true")
        && answer.status == response.status
        && answer.body == response.body
}

fn is_conflict(answer: &ClientAnswer) -> bool {
    answer.status == 409 && answer.header("content-type") == Some("application/problem+json")
}

fn answers(plan: &Plan, run: &Run) -> Result<(), String> {
    let stored: Vec<&Response> = run
        .actors
        .iter()
        .filter(|a| a.forwarded)
        .filter_map(|a| match plan.upstream_for(a.actor) {
            Some(Upstream::Respond(r)) => Some(r),
            _ => None,
        })
        .collect();
    for actor in &run.actors {
        let upstream = plan.upstream_for(actor.actor);
        let ok = match (&actor.answer, actor.forwarded, upstream) {
            (Some(answer), true, Some(upstream)) => is_original(answer, upstream),
            (None, true, Some(Upstream::ClientGone)) => true,
            (Some(answer), false, _) => {
                is_conflict(answer) || stored.iter().any(|r| is_replay_of(answer, r))
            }
            _ => false,
        };
        if !ok {
            let got = actor
                .answer
                .as_ref()
                .map(|a| format!("{} {}", a.status, a.body_text()))
                .unwrap_or_else(|| "no answer".into());
            return Err(format!(
                "worker {} (forwarded: {}) got {got}: neither its original answer, a replay, nor a 409",
                actor.actor, actor.forwarded
            ));
        }
    }
    Ok(())
}

fn decode(bytes: &[u8]) -> Result<Bucket, String> {
    Bucket::decode(bytes).map_err(|e| format!("a cell holds bytes that are not a bucket: {e:?}"))
}

/// Checks every write against the record it replaced.
/// `forwarded` lists the workers whose request reached the upstream: a claim whose owner never
/// acted on it (a tentative create that lost its read-back) may be replaced; one whose owner
/// forwarded may not, while its lease lives.
pub fn transitions(writes: &[Write], forwarded: &[usize]) -> Result<(), String> {
    let mut owners: HashMap<[u8; 16], usize> = HashMap::new();
    for (n, write) in writes.iter().enumerate() {
        // Record cells only: the filter also keeps its store layout (`idemgate/layout`, text).
        if !write.key.starts_with("idemgate/c/") {
            continue;
        }
        let before = decode(write.before.as_deref().unwrap_or_default())?;
        let after = decode(&write.value)?;
        let at = idemgate_core::time::UnixMillis(write.at_ms);
        let mut keys: Vec<_> = before
            .entries
            .iter()
            .chain(after.entries.iter())
            .map(|(k, _)| *k)
            .collect();
        keys.sort_by_key(|k| k.0);
        keys.dedup();
        let who = if write.worker == usize::MAX {
            "a concurrent writer".to_string()
        } else {
            format!("worker {}", write.worker)
        };
        for key in keys {
            let (old, new) = (before.get(&key), after.get(&key));
            if old == new {
                continue;
            }
            let fail = |what: String| Err(format!("write #{n} by {who} to {}: {what}", write.key));
            match (old, new) {
                (None, Some(Record::InFlight(claim))) => {
                    owners.insert(claim.owner.0, write.worker);
                }
                (None, Some(Record::Completed(_))) => {
                    return fail("completed a record that had no claim".into())
                }
                (Some(Record::InFlight(old)), Some(Record::InFlight(new)))
                    if old.owner != new.owner =>
                {
                    let acted = owners
                        .get(&old.owner.0)
                        .is_some_and(|w| forwarded.contains(w));
                    if acted && old.lease_until > at && !old.is_expired_at(at) {
                        return fail(format!(
                            "replaced a live claim of worker {:?} (lease until {}, now {}): two owners at once",
                            owners.get(&old.owner.0),
                            old.lease_until.0,
                            at.0
                        ));
                    }
                    owners.insert(new.owner.0, write.worker);
                }
                (Some(Record::InFlight(old)), Some(Record::Completed(_)) | None) => {
                    let owner = owners.get(&old.owner.0).copied();
                    let reclaimed = new.is_none() && old.expires_at <= at;
                    if owner != Some(write.worker) && !reclaimed {
                        return fail(format!(
                            "ended a claim held by worker {owner:?}: a stale owner overwrote a newer record"
                        ));
                    }
                }
                (Some(Record::Completed(done)), _) if done.expires_at > at => {
                    return fail("replaced or removed a completed record before it expired".into())
                }
                (Some(Record::InFlight(old)), Some(new)) => {
                    return fail(format!("changed a claim in place ({old:?} → {new:?})"));
                }
                _ => {}
            }
        }
        for (_, record) in &after.entries {
            if let Record::InFlight(claim) = record {
                if claim.lease_until > claim.expires_at {
                    return Err(format!("write #{n}: a lease outlives its record's TTL"));
                }
            }
        }
    }
    Ok(())
}

trait Expiry {
    fn is_expired_at(&self, at: idemgate_core::time::UnixMillis) -> bool;
}

impl Expiry for idemgate_core::record::InFlight {
    fn is_expired_at(&self, at: idemgate_core::time::UnixMillis) -> bool {
        self.expires_at <= at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use idemgate_core::decision::new_claim;
    use idemgate_core::fingerprint::Fingerprint;
    use idemgate_core::policy::Policy;
    use idemgate_core::record::{Completed, OwnerToken, StoredBody, StoredResponse};
    use idemgate_core::scope::StorageKey;
    use idemgate_core::time::UnixMillis;

    const NOW: u64 = 1_000_000;

    fn claim(owner: u8) -> Vec<u8> {
        let mut bucket = Bucket::default();
        let record = new_claim(
            Fingerprint([1; 32]),
            OwnerToken([owner; 16]),
            UnixMillis(NOW),
            &Policy::defaults(),
        );
        bucket.put(StorageKey([9; 32]), Record::InFlight(record));
        bucket.encode()
    }

    fn completed() -> Vec<u8> {
        let mut bucket = Bucket::default();
        let done = Completed {
            fingerprint: Fingerprint([1; 32]),
            response: StoredResponse {
                status: 201,
                headers: vec![],
                body: StoredBody::Kept(b"ok".to_vec()),
            },
            expires_at: UnixMillis(NOW + 86_400_000),
        };
        bucket.put(StorageKey([9; 32]), Record::Completed(done));
        bucket.encode()
    }

    fn write(worker: usize, before: Option<Vec<u8>>, value: Vec<u8>, at_ms: u64) -> Write {
        Write {
            worker,
            key: "idemgate/c/0".into(),
            before,
            value,
            cas_given: 0,
            cas: 1,
            at_ms,
        }
    }

    #[test]
    fn a_naive_second_claim_over_a_live_one_is_caught() {
        let writes = [
            write(0, None, claim(1), NOW),
            write(1, Some(claim(1)), claim(2), NOW),
        ];
        let err = transitions(&writes, &[0, 1]).unwrap_err();
        assert!(err.contains("two owners at once"), "{err}");
        // The same writes are legal if worker 0 never acted on its (tentative) claim …
        assert!(transitions(&writes, &[1]).is_ok());
        // … or once its lease ended.
        let later = [
            write(0, None, claim(1), NOW),
            write(1, Some(claim(1)), claim(2), NOW + 61_000),
        ];
        assert!(transitions(&later, &[0, 1]).is_ok());
    }

    #[test]
    fn a_stale_owner_completing_a_newer_claim_is_caught() {
        let writes = [
            write(0, None, claim(1), NOW),
            write(1, Some(claim(1)), claim(2), NOW + 61_000),
            write(0, Some(claim(2)), completed(), NOW + 62_000),
        ];
        let err = transitions(&writes, &[0, 1]).unwrap_err();
        assert!(err.contains("stale owner"), "{err}");
        let own = [
            write(0, None, claim(1), NOW),
            write(0, Some(claim(1)), completed(), NOW + 1),
        ];
        assert!(transitions(&own, &[0]).is_ok());
    }

    #[test]
    fn replacing_a_completed_record_is_caught() {
        let writes = [write(3, Some(completed()), claim(4), NOW + 10)];
        assert!(transitions(&writes, &[3]).is_err());
        let nothing = [write(3, None, completed(), NOW)];
        assert!(transitions(&nothing, &[3])
            .unwrap_err()
            .contains("no claim"));
    }
}
