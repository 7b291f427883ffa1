//! The decisions and the protocol on structured input (via `arbitrary`): policy knobs, an
//! arbitrary record (built field by field, or one of `vectors/decision.json` shifted to `now`),
//! a fingerprint, `now` and response facts (arbitrary, or one of `vectors/completion.json`), then
//! a sequence of operations on `protocol::Protocol` over a `MemoryStore`, including claims whose
//! sans-IO transactions interleave with other operations.
//!
//! `decide` / `complete` invariants: a claim's `lease_until <= expires_at` and it is born alive;
//! a live completed record is never turned into a claim; a live in-flight record only by a takeover
//! after its lease; a conflict's `retry_after > 0` (`Retry-After >= 1` on the wire); a stored
//! answer keeps only allowed, safe headers and survives the store (encode -> decode).
//!
//! Protocol invariants: every cell decodes and holds each key at most once and at most
//! `per_cell` records; a claim is granted only when the record it replaces is absent, expired or
//! an in-flight record whose lease ended, and afterwards the new owner alone holds the key;
//! refusals never write; `finish` by anyone but the current owner is `NotOwner` and never writes;
//! the owner's finish does exactly what `complete` says.
#![no_main]

use idemgate_core::decision::Decision;
use idemgate_core::record::{OwnerToken, Record};
use idemgate_core::store::MemoryStore;
use idemgate_core::time::{Span, UnixMillis};
use input::{FuzzInput, Now, BASE_NOW, MAX_OPS};
use libfuzzer_sys::fuzz_target;
use oracle::{check_complete, check_decide};
use records::{build_record, fingerprint};
use world::{storage_keys, World};

#[path = "decision/input.rs"]
mod input;
#[path = "decision/oracle.rs"]
mod oracle;
#[path = "decision/records.rs"]
mod records;
#[path = "decision/world.rs"]
mod world;

fuzz_target!(|input: FuzzInput| {
    let policy = input.knobs.policy();
    let pure = &input.pure;

    // decide / complete on an arbitrary record.
    let now = match pure.now {
        Now::Near(d) => UnixMillis(BASE_NOW + u64::from(d)),
        Now::Any(t) => UnixMillis(t),
    };
    let record = build_record(&pure.record, now);
    let fp = fingerprint(pure.fp);
    let owner = OwnerToken([pure.owner; 16]);
    let decision = check_decide(record.as_ref(), fp, owner, now, &policy);
    let claim = match (&decision, &record) {
        (Decision::Claim { claim, .. }, _) => Some(claim.clone()),
        (_, Some(Record::InFlight(f))) => Some(f.clone()),
        _ => None,
    };
    if let Some(claim) = claim {
        let at = now.after(Span(u64::from(pure.complete_after)));
        check_complete(&claim, pure.facts.resolve(), at, &policy);
    }

    // The protocol.
    let mut world = World {
        store: MemoryStore::new(),
        policy: &policy,
        now: UnixMillis(BASE_NOW),
        keys: storage_keys().clone(),
        owners: Vec::new(),
        next_owner: 0,
        pending: Vec::new(),
    };
    for op in input.ops.iter().take(MAX_OPS) {
        world.apply(op);
    }
});
