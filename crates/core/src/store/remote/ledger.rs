//! A payer's share in the remote store: its usage — how many records and bytes free
//! their space at which moment, the [`Usage`] the local ledger cells keep — under an engine key of
//! its own,
//! so each charge touches exactly one key, as every operation does (Redis Cluster shards it).
//!
//! ```text
//! value = version(16) ledger     ledger = the local ledger cell's codec with one payer
//! ```
//!
//! The key expires with the payer's last hold, so a payer that stops sending leaves nothing
//! behind; a charge, a shift or a refund is a read → decide → compare-and-set like a record's,
//! carried by the same [`super::Operation`].

use super::stored::{ValueVersion, VERSION_LEN};
use super::wire::WireError;
use crate::client::scope::{QuotaTag, StorageKey};
use crate::hash::PartsHasher;
use crate::record::DecodeError;
use crate::store::share::ledger::{Ledger, Usage};
use crate::store::share::{Fill, OverShare, PayerTag, Share, ShareRefusal, Space};
use crate::time::UnixMillis;
use alloc::vec::Vec;

/// The hash domain of ledger keys: never a record's storage key.
const LEDGER_KEY_TAG: &str = "idemgate-ledger-key-v1";

/// The engine key `tag`'s usage lives under.
pub(crate) fn ledger_key(tag: PayerTag) -> StorageKey {
    let mut hasher = PartsHasher::new(LEDGER_KEY_TAG);
    hasher.part(&tag.0);
    StorageKey::tagged(hasher.finish(), QuotaTag::LEDGER)
}

/// What one operation does to a payer's usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Job {
    /// One record that takes `space`, within `share` (`None`: beyond it, the store not under
    /// pressure; or a fill shard's count); refused when the payer is at it.
    Charge {
        tag: PayerTag,
        share: Option<Share>,
        space: Space,
    },
    /// Reads a fill shard's count: refused, as the payer at its share was (`over`), when the
    /// shard is under pressure ([`Fill::binds`]). Writes nothing.
    Gauge { fill: Fill, over: OverShare },
    /// A claim's lease charge becomes its stored answer's.
    Shift {
        tag: PayerTag,
        from: Space,
        to: Space,
    },
    /// A charge given back: its record was not written, or was released.
    Refund { tag: PayerTag, space: Space },
}

impl Job {
    pub(crate) fn tag(&self) -> PayerTag {
        match self {
            Job::Charge { tag, .. } | Job::Shift { tag, .. } | Job::Refund { tag, .. } => *tag,
            Job::Gauge { fill, .. } => fill.shard.tag,
        }
    }

    /// The job on `usage` at `now` (the rules of [`Usage`], as the local ledger applies them):
    /// `Err` is a refused charge, with how long until the payer has room and which share refused
    /// it ([`ShareRefusal::of`], as the local store names it).
    pub fn apply(&self, usage: &mut Usage, now: UnixMillis) -> Result<(), OverShare> {
        usage.prune(now);
        match *self {
            Job::Charge { tag, share, space } => {
                let refusal = share.map(|share| ShareRefusal::of(tag, usage.records(), share));
                match (usage.charge(share, space, now), refusal) {
                    (Err(retry_after), Some(refusal)) => Err(OverShare {
                        retry_after,
                        refusal,
                    }),
                    // Without a share a charge is never refused.
                    _ => Ok(()),
                }
            }
            Job::Gauge { fill, over } => match fill.binds(usage.records()) {
                true => Err(over),
                false => Ok(()),
            },
            Job::Shift { from, to, .. } => {
                usage.shift((from, to), now);
                Ok(())
            }
            Job::Refund { space, .. } => {
                usage.refund(space, now);
                Ok(())
            }
        }
    }
}

/// `usage` of `tag` as the value stored under its key.
pub fn encode(tag: PayerTag, version: ValueVersion, usage: &Usage) -> Vec<u8> {
    let ledger = Ledger {
        entries: alloc::vec![(tag, usage.clone())],
    };
    let mut out = Vec::with_capacity(VERSION_LEN + 64);
    out.extend_from_slice(&version.0);
    out.extend_from_slice(&ledger.encode());
    out
}

/// Decodes the value under `tag`'s ledger key. Untrusted bytes: a typed error, never a panic; a
/// value that names another payer is refused, as a record naming another key is.
pub fn decode(tag: PayerTag, bytes: &[u8]) -> Result<(ValueVersion, Usage), WireError> {
    let (version, rest) = bytes
        .split_first_chunk::<VERSION_LEN>()
        .ok_or(WireError::Truncated)?;
    let mut ledger = Ledger::decode(rest)?;
    match ledger.entries.pop() {
        Some((stored, usage)) if ledger.entries.is_empty() => {
            if stored != tag {
                return Err(WireError::KeyMismatch);
            }
            Ok((ValueVersion(*version), usage))
        }
        _ => Err(WireError::Record(DecodeError::InvalidLedger)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::payer::ShareReason;
    use crate::time::Span;

    const A: PayerTag = PayerTag([1, 2, 3, 4, 5, 6, 7, 1]);
    const B: PayerTag = PayerTag([1, 2, 3, 4, 5, 6, 7, 0]);

    fn space(until: u64) -> Space {
        Space {
            until: UnixMillis(until),
            bytes: 200,
        }
    }

    #[test]
    fn a_value_round_trips_and_names_its_payer() {
        let mut usage = Usage::default();
        usage.add(space(5_000));
        usage.add(space(9_000));
        let bytes = encode(A, ValueVersion([3; VERSION_LEN]), &usage);
        assert_eq!(
            decode(A, &bytes),
            Ok((ValueVersion([3; VERSION_LEN]), usage))
        );
        assert_eq!(decode(B, &bytes), Err(WireError::KeyMismatch));
        assert!(decode(A, &bytes[..VERSION_LEN - 1]).is_err());
        assert!(
            decode(A, &[0; VERSION_LEN]).is_err(),
            "an empty ledger is never written"
        );
        assert_ne!(ledger_key(A), ledger_key(B));
        assert!(
            ledger_key(A).is_ledger(),
            "an operator's tally tells it from records"
        );
    }

    #[test]
    fn a_charge_at_the_share_is_refused_until_the_first_hold_lapses() {
        let now = UnixMillis(1_000);
        let mut usage = Usage::default();
        let charge = |until| Job::Charge {
            tag: A,
            share: Some(Share {
                records: 2,
                bytes: 10_000,
            }),
            space: space(until),
        };
        assert_eq!(charge(4_000).apply(&mut usage, now), Ok(()));
        assert_eq!(charge(6_000).apply(&mut usage, now), Ok(()));
        let over = |retry_after, reason| OverShare {
            retry_after: Span(retry_after),
            refusal: ShareRefusal { reason, payer: A },
        };
        assert_eq!(
            charge(8_000).apply(&mut usage, now),
            Err(over(3_000, ShareReason::Address)),
            "an address group at its records"
        );
        assert_eq!(usage.records(), 2, "a refused charge changes nothing");
        // At 4 s the first hold has lapsed: room for one more.
        assert_eq!(charge(8_000).apply(&mut usage, UnixMillis(4_000)), Ok(()));
        let shift = Job::Shift {
            tag: A,
            from: space(6_000),
            to: Space {
                until: UnixMillis(90_000),
                bytes: 20_000,
            },
        };
        assert_eq!(shift.apply(&mut usage, UnixMillis(5_000)), Ok(()));
        let refund = Job::Refund {
            tag: A,
            space: space(8_000),
        };
        assert_eq!(refund.apply(&mut usage, UnixMillis(5_000)), Ok(()));
        assert_eq!(usage.holds.len(), 1);
        assert_eq!(usage.holds[0].until, UnixMillis(90_000));
        // One record, over the byte share by its answer: the next charge waits for it to lapse.
        assert_eq!(
            charge(95_000).apply(&mut usage, UnixMillis(6_000)),
            Err(over(84_000, ShareReason::Bytes)),
            "below its records, at its bytes"
        );
    }
}
