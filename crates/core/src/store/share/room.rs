//! Whether a stored answer's body has room in the store: the byte side of a completion.
//!
//! A completion is never refused — the upstream has acted, and a refusal would run the request
//! again after the lease. What bytes decide is only whether the answer keeps its *body*: an
//! answer whose body would take its fill shard past its part of `max_memory` is stored without
//! it. The client that made the request was answered in full; its retry gets the honest no-body
//! replay (status, `Location`, and a header saying the body was not kept), never a second
//! execution. A payer's byte share is not checked here: it binds on the claim (429 while the
//! shard is under pressure, in records or in bytes), so that an answer of a claim admitted
//! within the share is kept as it is.

use super::{change, shift_tags, Bill, Shares, Space};
use crate::store::protocol::ProtocolError;
use crate::store::{Layout, Store};
use crate::time::UnixMillis;

/// Moves `bill`'s charge from `lease` (its claim's space, already counted) to its answer's:
/// `whole` (with the body) when the fill shard's bytes stay within the shard's part of the
/// store's byte bound, else `bare` (without it). The shard decides and moves in one
/// compare-and-set — the check costs no read of its own — then each payer moves to the same
/// space. `Ok(false)`: the body does not fit (and the charge is now `bare`'s); `Err`: the charge
/// could not be moved (the shard's, or a payer's after it), and the body is not kept either.
pub(crate) fn shift_answer<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    shares: &Shares,
    bill: Bill,
    (lease, whole, bare): (Space, Space, Space),
    now: UnixMillis,
) -> Result<bool, ProtocolError> {
    let mut fits = true;
    if let Some(shard) = bill.shard {
        let part = shares
            .memory_counted
            .then(|| shard.byte_part(layout, shares.memory));
        // What the record adds beyond what its claim already counts.
        let more = whole.bytes.saturating_sub(lease.bytes);
        change(store, layout, shard.tag, now, |usage| {
            fits = part.is_none_or(|part| usage.bytes().saturating_add(more) <= part);
            usage.shift((lease, if fits { whole } else { bare }), now);
            None::<()>
        })?;
    }
    let to = if fits { whole } else { bare };
    shift_tags(store, layout, bill.payers.tags(), (lease, to), now)?;
    Ok(fits)
}
