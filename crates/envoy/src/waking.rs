//! Waking the duplicates that wait for a record's answer, in every worker: each VM that has a
//! route that waits registers its own shared queue and, while some stream of it is parked, lists
//! the queue's id in shared data; a VM that completes or releases a record enqueues its storage key
//! to every listed queue, and each VM wakes its waiters on that key when its queue is ready
//! (`proxy_on_queue_ready`). Only a key moves: every waiter asks the store again, which alone
//! decides.
//!
//! Listed only while parked: a completion then costs one read of the list and no enqueue while
//! nobody waits anywhere (the common case), where it cost one enqueue per worker. A waiter whose
//! VM lists its queue just after a completion read the list is not lost: it asks the store again
//! on its first tick ([`idemgate_core::guard::Waiters::TICK`]), as every parked request does.

use crate::abi::{self, LogLevel};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::shared_data_abi;
use idemgate_core::client::scope::StorageKey;

/// The shared-data entry listing every registered queue's id (4 bytes each, big-endian): kept
/// for a previous build's VMs during a configuration reload, which announce to it.
const QUEUES: &str = "idemgate.waiting.queues";

/// The ids of the queues whose VM has a stream parked now (as [`QUEUES`]): what a completion
/// announces to.
const PARKED: &str = "idemgate.waiting.parked";

/// The most queues listed: the newest are kept (a VM gone with an old configuration leaves an id
/// that no longer answers, which costs one failed enqueue until it falls off the list).
const MAX_QUEUES: usize = 64;

/// Registers this VM's queue and lists it; its id, or `None` if the host has no queues (waiters
/// are then woken on the tick only).
pub fn register() -> Option<u32> {
    let seed = crate::entropy::random16();
    let name = format!(
        "idemgate.waiting.{}",
        idemgate_core::hash::to_hex(&seed[..8])
    );
    let id = match abi::register_queue(&name) {
        Ok(id) => id,
        Err(status) => {
            abi::log(
                LogLevel::Warn,
                &format!(
                    "no shared queue ({}): waiters are woken once a tick",
                    status.0
                ),
            );
            return None;
        }
    };
    if !list(QUEUES, id, true) {
        abi::log(
            LogLevel::Warn,
            "could not list this worker's shared queue: its waiters are woken once a tick",
        );
    }
    Some(id)
}

/// Lists (`listed`) or unlists queue `id` in the shared-data entry `entry`; `false` if it could
/// not be written.
fn list(entry: &str, id: u32, listed: bool) -> bool {
    // Compare-and-set: another worker may be listing its own queue at the same time.
    for _ in 0..8 {
        let (ids, cas) = match shared_data_abi::get(entry) {
            Ok(Some((bytes, cas))) => (bytes, cas),
            Ok(None) => (Vec::new(), 0),
            Err(_) => return false,
        };
        let mut kept: Vec<u8> = ids
            .chunks_exact(4)
            .filter(|other| *other != id.to_be_bytes())
            .flatten()
            .copied()
            .collect();
        if listed {
            kept.extend_from_slice(&id.to_be_bytes());
        } else if kept.len() == ids.len() {
            return true;
        }
        let excess = kept.len().saturating_sub(MAX_QUEUES * 4);
        kept.drain(..excess - excess % 4);
        if let Ok(true) = shared_data_abi::set(entry, &kept, cas) {
            return true;
        }
    }
    false
}

/// A stream of this VM is parked (`parked`), or none is any more: queue `id` is listed for
/// completions to announce to, or unlisted. A failed write leaves its waiters to their ticks
/// (unlisted) or costs completions an enqueue nobody needs (listed).
pub fn parked(id: u32, parked: bool) {
    let _ = list(PARKED, id, parked);
}

/// `key`'s record was completed or released: every queue with a parked stream is told.
pub fn announce(key: &StorageKey) {
    let Ok(Some((ids, _))) = shared_data_abi::get(PARKED) else {
        return;
    };
    for id in ids.chunks_exact(4) {
        let id = u32::from_be_bytes([id[0], id[1], id[2], id[3]]);
        // A queue gone with its VM: nobody waits there any more.
        let _ = abi::enqueue(id, &key.0);
    }
}

/// The keys announced to this VM's queue `id` since it was last read.
pub fn announced(id: u32) -> Vec<StorageKey> {
    let mut keys = Vec::new();
    while let Ok(Some(item)) = abi::dequeue(id) {
        if let Ok(bytes) = <[u8; 32]>::try_from(item.as_slice()) {
            keys.push(StorageKey::from_stored(bytes));
        }
    }
    keys
}
