//! Who pays for a record on the wire, and where it is counted: a claim's or a token use's payers
//! with their shares, and the fill shard its record is counted in with the pressure from which
//! shares bind there (the filter's `capacity` places the key, as the local store would; the
//! service holds no policy). A finish names the shard its claim was counted in.
//!
//! A refusal for a share names the share and the payer, so that the filter counts and logs it as
//! the local store's.
//!
//! ```text
//! bill    = count(1, 0 to 2) { tag(8) share_records(8) share_bytes(8) }* [ shard pressure(1) ]
//! shard   = tag(8) records(8)
//! refusal = reason(1) [ tag(8) ]    reason 0 = none named, 1 identity, 2 address, 3 route, 4 bytes
//! ```

use super::WireError;
use crate::codec::{Reader, Writer};
use crate::store::share::{Billed, Fill, FillShard, PayerTag, Share, ShareReason, ShareRefusal};
use alloc::vec::Vec;

/// The bill of a claim or a token use: absent when nobody pays and nothing is counted; a count
/// of 0 only when a shard follows (one spelling per request).
pub(super) fn put_bill(w: &mut Writer, payers: &[Billed], fill: &Option<Fill>) {
    if payers.is_empty() && fill.is_none() {
        return;
    }
    w.u8(payers.len() as u8);
    for payer in payers {
        w.bytes(&payer.tag.0);
        w.u64(payer.share.records);
        w.u64(payer.share.bytes);
    }
    if let Some(fill) = fill {
        put_shard(w, &fill.shard);
        w.u8(fill.pressure);
    }
}

/// At most two payers, none twice; a pressure of at most 100 %.
pub(super) fn get_bill(r: &mut Reader<'_>) -> Result<(Vec<Billed>, Option<Fill>), WireError> {
    if r.is_empty() {
        return Ok((Vec::new(), None));
    }
    let count = r.u8()?;
    if count > 2 {
        return Err(WireError::OutOfRange);
    }
    let mut payers: Vec<Billed> = Vec::new();
    for _ in 0..count {
        let tag = PayerTag(r.array()?);
        let share = Share {
            records: r.u64()?,
            bytes: r.u64()?,
        };
        if payers.iter().any(|p| p.tag == tag) {
            return Err(WireError::OutOfRange);
        }
        payers.push(Billed { tag, share });
    }
    if r.is_empty() {
        return match count {
            0 => Err(WireError::OutOfRange),
            _ => Ok((payers, None)),
        };
    }
    let shard = get_shard(r)?;
    let pressure = r.u8()?;
    if pressure > 100 {
        return Err(WireError::OutOfRange);
    }
    Ok((payers, Some(Fill { shard, pressure })))
}

pub(super) fn put_shard(w: &mut Writer, shard: &FillShard) {
    w.bytes(&shard.tag.0);
    w.u64(shard.capacity);
}

/// A shard that holds at least one record.
pub(super) fn get_shard(r: &mut Reader<'_>) -> Result<FillShard, WireError> {
    let tag = PayerTag(r.array()?);
    match r.u64()? {
        0 => Err(WireError::OutOfRange),
        capacity => Ok(FillShard { tag, capacity }),
    }
}

/// Which share refused a record, and whose (`None`: not named).
pub(super) fn put_refusal(w: &mut Writer, refusal: &Option<ShareRefusal>) {
    let Some(refusal) = refusal else {
        w.u8(0);
        return;
    };
    w.u8(match refusal.reason {
        ShareReason::Identity => 1,
        ShareReason::Address => 2,
        ShareReason::Route => 3,
        ShareReason::Bytes => 4,
    });
    w.bytes(&refusal.payer.0);
}

pub(super) fn get_refusal(r: &mut Reader<'_>) -> Result<Option<ShareRefusal>, WireError> {
    let reason = match r.u8()? {
        0 => return Ok(None),
        1 => ShareReason::Identity,
        2 => ShareReason::Address,
        3 => ShareReason::Route,
        4 => ShareReason::Bytes,
        tag => return Err(WireError::UnknownTag(tag)),
    };
    let payer = PayerTag(r.array()?);
    Ok(Some(ShareRefusal { reason, payer }))
}
