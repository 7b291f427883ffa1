//! Every write checked against the record it replaced: the record lifecycle's transitions only.

use super::*;

/// Checks every write against the record it replaced.
/// `forwarded` lists the workers whose request reached the upstream: a claim whose owner never
/// acted on it (a tentative create that lost its read-back) may be replaced; one whose owner
/// forwarded may not, while its lease lives.
pub fn transitions(writes: &[Write], forwarded: &[usize]) -> Result<(), String> {
    let mut owners: HashMap<[u8; 16], usize> = HashMap::new();
    for (n, write) in writes.iter().enumerate().filter(|(_, w)| is_cell(w)) {
        let before = decode(write.before.as_deref().unwrap_or_default())?;
        let after = decode(&write.value)?;
        let at = idemgate_core::time::UnixMillis(write.at_ms);
        let mut keys: Vec<_> = before
            .entries
            .iter()
            .chain(after.entries.iter())
            .map(|(k, _)| *k)
            .collect();
        keys.sort_by_key(|k| *k.as_bytes());
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
