//! Waking the duplicates that wait for a record's answer, in every worker: each VM that has a
//! route that waits registers its own shared queue and lists the queue's id in shared data; a VM
//! that completes or releases a record enqueues its storage key to every listed queue, and each VM
//! wakes its waiters on that key when its queue is ready (`proxy_on_queue_ready`). Only a key
//! moves: every waiter asks the store again, which alone decides.

use crate::abi::{self, LogLevel};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::shared_data_abi;
use idemgate_core::client::scope::StorageKey;

/// The shared-data entry listing the queues' ids (4 bytes each, big-endian).
const QUEUES: &str = "idemgate.waiting.queues";

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
    // Compare-and-set: another worker may be listing its own queue at the same time.
    for _ in 0..8 {
        let (mut ids, cas) = match shared_data_abi::get(QUEUES) {
            Ok(Some((bytes, cas))) => (bytes, cas),
            Ok(None) => (Vec::new(), 0),
            Err(_) => break,
        };
        ids.extend_from_slice(&id.to_be_bytes());
        let excess = ids.len().saturating_sub(MAX_QUEUES * 4);
        ids.drain(..excess - excess % 4);
        if let Ok(true) = shared_data_abi::set(QUEUES, &ids, cas) {
            return Some(id);
        }
    }
    abi::log(
        LogLevel::Warn,
        "could not list this worker's shared queue: its waiters are woken once a tick",
    );
    Some(id)
}

/// `key`'s record was completed or released: every listed queue is told.
pub fn announce(key: &StorageKey) {
    let Ok(Some((ids, _))) = shared_data_abi::get(QUEUES) else {
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
