//! Shares of the whole store: who pays for a record's space, and how many records and
//! bytes each payer may hold at once, so that no client — however many identities it makes up —
//! can deny the store to others.
//!
//! **Who pays.** A scope the client writes itself (any request header) is its own word: a client
//! can send a new `Authorization` value with every request. Each record is therefore charged to
//! the scope *and* to the address group the request came from (the peer, after Envoy's
//! `xff_num_trusted_hops`; IPv6 grouped by its /64 by default, since one host holds a whole /64),
//! unless the scope source is verified — something before this filter established it (a JWT
//! claim in dynamic metadata, a header the operator declares Envoy sets). A record of a
//! peer-scoped request is charged to its address group alone.
//!
//! **Of the whole store, in records and in bytes.** Each payer's records, and the bytes they
//! take, are counted in a *ledger* ([`ledger`]): a fixed set of ledger cells beside the record
//! cells, the payer's tag choosing its cell, changed by compare-and-set like every cell. A payer below its share is never refused — the count is of
//! the whole store, not of the cell its key happens to hash to — and one at its share (in records
//! or in bytes) gets 429 with the moment its first records free their space. Bytes are what a
//! record takes in memory ([`Space::of`]): a stored answer's body and headers and the record's
//! own overhead, so a client whose answers are large reaches its share with fewer records.
//!
//! **For as long as the record holds space**: a claim until its lease ends (after that a retry may
//! take it over), a stored answer or a token use until it expires. A released claim gives its
//! space back at once.

pub mod fill;
pub mod ledger;
mod refusal;
mod room;
mod space;

pub use fill::{Fill, FillShard};
pub use refusal::{ShareReason, ShareRefusal};
pub(crate) use room::shift_answer;
pub use space::Space;

use crate::client::admission::ROUTE_SCOPE_SOURCE;
use crate::client::scope::{scope_hash, Scope, StorageKey};
use crate::store::protocol::{ProtocolError, MAX_ATTEMPTS};
use crate::store::{Expect, Layout, Store, WriteOutcome};
use crate::time::{Span, UnixMillis};
use alloc::string::String;
use alloc::vec::Vec;
use core::net::IpAddr;
use ledger::{Ledger, Usage};

/// What one payer may hold in the whole store at once: a new record is charged only while it
/// holds fewer records *and* fewer bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    pub records: u64,
    /// `u64::MAX` where bytes are not limited (`shares.*_bytes: "off"`): never reached.
    pub bytes: u64,
}

/// What each payer may hold in the whole store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shares {
    /// For a scope: a header or property identity; `None`: not counted (`"off"`).
    pub identity: Option<Share>,
    /// For an address group: every record its requests created, whatever identity they gave;
    /// `None`: not counted (`"off"`).
    pub peer: Option<Share>,
    /// Leading bits of an IPv4 address that make one peer.
    pub ipv4_prefix: u8,
    /// Leading bits of an IPv6 address that make one peer.
    pub ipv6_prefix: u8,
    /// The fill, in percent of the store's records, from which shares bind ([`fill`]): below it
    /// nobody is refused for a share. `0`: always (fixed caps); `100`: only a full store.
    pub pressure: u8,
    /// The store's byte bound (`max_memory`), split over the fill shards by their records
    /// ([`FillShard::byte_part`]); the pressure threshold applies to a shard's bytes as to its
    /// records.
    pub memory: u64,
    /// Whether the fill shards count bytes against `memory`: only where the store could pass it
    /// otherwise (`capacity` × the largest record above `memory`). Where it cannot, and no share
    /// is counted either, a record costs no ledger operation at all.
    pub memory_counted: bool,
}

impl Shares {
    /// The share that applies to `tag`; `None` when its kind is not counted. A callback route's
    /// share is its own (`routes[].share`), which the payers carry ([`Shares::limit_of`]).
    pub fn limit(&self, tag: PayerTag) -> Option<Share> {
        match tag.0[7] {
            ADDRESS_GROUP_KIND => self.peer,
            ROUTE_KIND => None,
            _ => self.identity,
        }
    }

    /// The share `tag` is charged within as one of `payers`: a callback route's own, or the
    /// share of its kind.
    pub fn limit_of(&self, payers: &Payers, tag: PayerTag) -> Option<Share> {
        if tag.is_route() {
            payers.route
        } else {
            self.limit(tag)
        }
    }

    /// [`Payers::of`] without the payers whose kind is not counted (`"off"`): nothing is
    /// charged to them, so their records cost no ledger write.
    pub fn payers(&self, scope: Scope<'_>, verified: bool, peer_group: Option<&[u8]>) -> Payers {
        self.payers_tagged(scope, verified, peer_group, &PayerTag::of, None)
    }

    /// [`Shares::payers`], each payer's tag made by `tag` (a host's kept hashes); `route` is the
    /// share of a callback route's own scope (`routes[].share`; `None`: the whole store, so the
    /// route itself is charged nothing).
    pub(crate) fn payers_tagged(
        &self,
        scope: Scope<'_>,
        verified: bool,
        peer_group: Option<&[u8]>,
        tag: &dyn Fn(Scope<'_>) -> PayerTag,
        route: Option<Share>,
    ) -> Payers {
        let all = Payers {
            route,
            ..Payers::tagged(scope, verified, peer_group, tag)
        };
        let mut counted = all.tags().filter(|tag| self.limit_of(&all, *tag).is_some());
        let tags = Payers::from_tags(counted.next(), counted.next());
        let charged = tags.tags().any(PayerTag::is_route);
        Payers {
            route: route.filter(|_| charged),
            ..tags
        }
    }

    /// `payers` with the share each is charged within, as a request to the remote store names
    /// them (the service holds no policy: the filter's shares travel with the request). A payer
    /// whose kind is not counted is left out.
    pub fn billed(&self, payers: Payers) -> Vec<Billed> {
        payers
            .tags()
            .filter_map(|tag| {
                self.limit_of(&payers, tag)
                    .map(|share| Billed { tag, share })
            })
            .collect()
    }

    /// Whether any kind of payer is counted: if not, no record is charged to anyone, nor
    /// counted in a fill shard.
    pub fn counted(&self) -> bool {
        self.identity.is_some() || self.peer.is_some()
    }

    /// The pressure, and the byte bound where the fill shards count bytes.
    fn pressure_of_memory(&self) -> (u8, Option<u64>) {
        (self.pressure, self.memory_counted.then_some(self.memory))
    }

    /// The address group of `host` (an address as `client::peer_host` gives it: `10.0.0.1`,
    /// `[2001:db8::1]`): the address with only its first `ipv4_prefix` / `ipv6_prefix` bits kept,
    /// as bytes (family, prefix length, masked address) — it is only ever hashed into a payer's
    /// tag, so it is never formatted (which would cost the filter kilobytes of code). Anything
    /// that is not an IP address (a Unix socket path) is its own group.
    pub fn peer_group(&self, host: &str) -> Vec<u8> {
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        // A zone (`fe80::1%eth0`) names the interface, not another peer.
        let bare = bare
            .split_once('%')
            .map_or(bare, |(address, _zone)| address);
        let v4 = |v4: core::net::Ipv4Addr| {
            let bits = u32::from(v4) & mask32(self.ipv4_prefix);
            let mut group = alloc::vec![4, self.ipv4_prefix];
            group.extend_from_slice(&bits.to_be_bytes());
            group
        };
        match bare.parse::<IpAddr>() {
            Ok(IpAddr::V4(address)) => v4(address),
            // An IPv4-mapped address is the IPv4 peer it maps.
            Ok(IpAddr::V6(address)) => match address.to_ipv4_mapped() {
                Some(mapped) => v4(mapped),
                None => {
                    let bits = u128::from(address) & mask128(self.ipv6_prefix);
                    let mut group = alloc::vec![6, self.ipv6_prefix];
                    group.extend_from_slice(&bits.to_be_bytes());
                    group
                }
            },
            Err(_) => {
                let mut group = alloc::vec![0];
                group.extend_from_slice(host.as_bytes());
                group
            }
        }
    }
}

fn mask32(prefix: u8) -> u32 {
    match prefix {
        0 => 0,
        p if p >= 32 => u32::MAX,
        p => u32::MAX << (32 - u32::from(p)),
    }
}

fn mask128(prefix: u8) -> u128 {
    match prefix {
        0 => 0,
        p if p >= 128 => u128::MAX,
        p => u128::MAX << (128 - u32::from(p)),
    }
}

/// A payer as the ledger and the records know it: 7 bytes of its scope's hash and whether it is
/// an address group. 56 bits, so that neither chance (thousands of clients) nor an attacker
/// choosing among its own addresses makes two payers share one share — the storage key's 24-bit
/// [`PayerTag`] is too short for that.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PayerTag(pub [u8; 8]);

impl PayerTag {
    pub fn of(scope: Scope<'_>) -> PayerTag {
        PayerTag::hashed(scope, &scope_hash(scope))
    }

    /// The tag of `scope`, whose [`scope_hash`] is `hash` (kept by
    /// [`crate::client::identity::ScopeHashes`]).
    pub(crate) fn hashed(scope: Scope<'_>, hash: &[u8; 32]) -> PayerTag {
        let mut tag = [0; 8];
        tag[..7].copy_from_slice(&hash[..7]);
        tag[7] = match scope.source {
            PEER_GROUP_SOURCE => ADDRESS_GROUP_KIND,
            ROUTE_SCOPE_SOURCE => ROUTE_KIND,
            _ => IDENTITY_KIND,
        };
        PayerTag(tag)
    }

    /// An address group (its share is `shares.peer`), not an identity.
    pub fn is_address_group(self) -> bool {
        self.0[7] == ADDRESS_GROUP_KIND
    }

    /// A callback route's own scope (its share is the route's `share`).
    pub fn is_route(self) -> bool {
        self.0[7] == ROUTE_KIND
    }
}

/// The kinds of payer, as a tag's last byte says (a fill shard's is [`fill`]'s own, 2).
const IDENTITY_KIND: u8 = 0;
const ADDRESS_GROUP_KIND: u8 = 1;
const ROUTE_KIND: u8 = 3;

/// A payer and its share (what it may hold in the whole store), as the remote store is asked
/// to charge it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Billed {
    pub tag: PayerTag,
    pub share: Share,
}

/// Who a record is charged to: one or two payers (none for records no share applies to, such as
/// those of the remote store, which counts its own way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Payers {
    tags: [Option<PayerTag>; 2],
    /// The share of the payer that is a callback route (`routes[].share`): the route's, not the
    /// policy's, so it travels with the payers to the charge. Not kept in a record: only a new
    /// charge is ever refused.
    route: Option<Share>,
}

/// The scope source of a peer's address group, as a payer.
pub const PEER_GROUP_SOURCE: &str = "peer";

impl Payers {
    /// Nobody: the record is not counted.
    pub const NONE: Payers = Payers {
        tags: [None, None],
        route: None,
    };

    /// The payers of a request in `scope`: the scope alone when it is `verified`, and the
    /// address group `peer_group` and the scope otherwise — the group first, so a group at its
    /// share is refused before anything is charged to an identity it may have made up. A
    /// peer-scoped request pays as its address group. With no address known (a host that has
    /// none), an unverified scope pays alone.
    pub fn of(scope: Scope<'_>, verified: bool, peer_group: Option<&[u8]>) -> Payers {
        Payers::tagged(scope, verified, peer_group, &PayerTag::of)
    }

    /// [`Payers::of`], each payer's tag made by `tag`.
    fn tagged(
        scope: Scope<'_>,
        verified: bool,
        peer_group: Option<&[u8]>,
        tag: &dyn Fn(Scope<'_>) -> PayerTag,
    ) -> Payers {
        let group = peer_group.map(|value| {
            tag(Scope {
                source: PEER_GROUP_SOURCE,
                value,
            })
        });
        if scope.source == PEER_GROUP_SOURCE {
            return Payers::from_tags(group.or_else(|| Some(tag(scope))), None);
        }
        let own = Some(tag(scope));
        match (verified, group) {
            (false, Some(group)) => Payers::from_tags(Some(group), own),
            _ => Payers::from_tags(own, None),
        }
    }

    /// The payers from their tags, as a record stores them.
    pub fn from_tags(first: Option<PayerTag>, second: Option<PayerTag>) -> Payers {
        let tags = match (first, second) {
            (None, second) => [second, None],
            (first, second) if first == second => [first, None],
            (first, second) => [first, second],
        };
        Payers { tags, route: None }
    }

    pub fn tags(&self) -> impl Iterator<Item = PayerTag> + '_ {
        self.tags.iter().flatten().copied()
    }

    pub fn is_empty(&self) -> bool {
        self.tags[0].is_none()
    }
}

impl Layout {
    /// Ledger cells: one for every 128 records the store holds (at least one), whatever the
    /// records per cell, so a ledger cell holds about as many payers at any layout. A payer's
    /// usage lives in the one its tag chooses.
    pub fn ledger_cells(&self) -> u32 {
        let cells = self.capacity.records().div_ceil(128).max(1);
        u32::try_from(cells).unwrap_or(u32::MAX)
    }

    pub fn ledger_cell_name(&self, tag: PayerTag) -> String {
        let head = u32::from_be_bytes([tag.0[0], tag.0[1], tag.0[2], tag.0[3]]);
        self.ledger_cell_name_at(head % self.ledger_cells())
    }

    /// The name of ledger cell `index` (`0..ledger_cells`).
    pub fn ledger_cell_name_at(&self, index: u32) -> String {
        alloc::format!("idemgate/s/{index}")
    }
}

/// A charge that was made: given back with [`refund`] if its record is not written after all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a charge whose record is not written must be refunded"]
pub(crate) struct Charge {
    pub bill: Bill,
    pub space: Space,
}

/// Who one record is charged to: its payers, and the fill shard its cell is counted in (none
/// when no share is counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bill {
    pub payers: Payers,
    pub shard: Option<FillShard>,
}

impl Bill {
    /// The bill of a record under `key` charged to `payers`. Its shard is counted when a share
    /// is (the shard's records tell the pressure) or when the shard's bytes are what bounds the
    /// store's memory ([`Shares::memory_counted`]).
    pub fn of(layout: &Layout, shares: &Shares, payers: Payers, key: &StorageKey) -> Bill {
        Bill {
            payers,
            shard: (shares.counted() || shares.memory_counted).then(|| layout.fill_shard(key)),
        }
    }

    fn tags(&self) -> impl Iterator<Item = PayerTag> + '_ {
        self.payers.tags().chain(self.shard.map(|shard| shard.tag))
    }
}

/// Why a payer was refused: how long until it holds less than its share, and which share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OverShare {
    pub retry_after: Span,
    pub refusal: ShareRefusal,
}

impl OverShare {
    pub(crate) fn new(retry_after: Span, refusal: ShareRefusal) -> OverShare {
        OverShare {
            retry_after,
            refusal,
        }
    }
}

/// Charges one record that takes `space` to each of `bill`'s payers, each within its share
/// while the record's fill shard is under pressure ([`fill`]) and without a limit otherwise, and
/// counts it in the shard. If one payer is over its share under pressure, nothing stays charged
/// and the answer says when it has room. The shard is read only then: a payer within its share
/// costs no read of it.
pub(crate) fn charge<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    shares: &Shares,
    bill: Bill,
    space: Space,
    now: UnixMillis,
) -> Result<Result<Charge, OverShare>, ProtocolError> {
    let within = |tag: PayerTag| shares.limit_of(&bill.payers, tag);
    if let Err(over) = charge_each(store, layout, bill.payers.tags(), &within, space, now)? {
        if fill::under_pressure(store, layout, bill.shard, shares.pressure_of_memory(), now)? {
            return Ok(Err(over));
        }
        // Not under pressure: the payers are charged all the same, to be counted once it is.
        if let Err(over) = charge_each(store, layout, bill.payers.tags(), &|_| None, space, now)? {
            return Ok(Err(over));
        }
    }
    if let Some(shard) = bill.shard {
        if let Err(e) = change(store, layout, shard.tag, now, |usage| {
            usage.add(space);
            None::<()>
        }) {
            let charged: Vec<PayerTag> = bill.payers.tags().collect();
            undo(store, layout, &charged, space, now);
            return Err(e);
        }
    }
    Ok(Ok(Charge { bill, space }))
}

/// Charges one record that takes `space` to each of `tags`, within `limit`: all, or (if one is
/// refused) none.
fn charge_each<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    tags: impl Iterator<Item = PayerTag>,
    limit: &dyn Fn(PayerTag) -> Option<Share>,
    space: Space,
    now: UnixMillis,
) -> Result<Result<(), OverShare>, ProtocolError> {
    let mut charged: Vec<PayerTag> = Vec::new();
    for tag in tags {
        let limit = limit(tag);
        let result = change(store, layout, tag, now, |usage| {
            let refusal = limit.map(|limit| ShareRefusal::of(tag, usage, limit));
            let retry_after = usage.charge(limit, space, now).err()?;
            refusal.map(|refusal| OverShare {
                retry_after,
                refusal,
            })
        });
        let refused = match result {
            Ok(refused) => refused,
            Err(e) => {
                undo(store, layout, &charged, space, now);
                return Err(e);
            }
        };
        if let Some(over) = refused {
            undo(store, layout, &charged, space, now);
            return Ok(Err(over));
        }
        charged.push(tag);
    }
    Ok(Ok(()))
}

/// Moves `bill`'s charge for one record from `from` to `to` (moment and bytes) in one
/// compare-and-set per payer and for its shard:
/// a claim's lease charge becomes its stored answer's, where adding one and refunding the other
/// took two. A hold that has already lapsed is not taken from a later one, and none is added for a
/// moment already past.
pub(crate) fn shift<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    bill: Bill,
    (from, to): (Space, Space),
    now: UnixMillis,
) -> Result<(), ProtocolError> {
    shift_tags(store, layout, bill.tags(), (from, to), now)
}

/// [`shift`] for each of `tags`, one compare-and-set each.
fn shift_tags<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    tags: impl Iterator<Item = PayerTag>,
    (from, to): (Space, Space),
    now: UnixMillis,
) -> Result<(), ProtocolError> {
    for tag in tags {
        change(store, layout, tag, now, |usage| {
            usage.shift((from, to), now);
            None::<()>
        })?;
    }
    Ok(())
}

/// Gives a charge back: its record was not written, or was released. A hold that has already
/// lapsed is not taken from a later one.
pub(crate) fn refund<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    charge: Charge,
    now: UnixMillis,
) -> Result<(), ProtocolError> {
    if now >= charge.space.until {
        return Ok(());
    }
    for tag in charge.bill.tags() {
        change(store, layout, tag, now, |usage| {
            usage.refund(charge.space, now);
            None::<()>
        })?;
    }
    Ok(())
}

/// Best-effort refund of the payers charged so far, when a later one refused or failed: an error
/// here leaves an over-count until the space's end, never an under-count.
fn undo<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    charged: &[PayerTag],
    space: Space,
    now: UnixMillis,
) {
    for tag in charged {
        let bill = Bill {
            payers: Payers::from_tags(Some(*tag), None),
            shard: None,
        };
        let _ = refund(store, layout, Charge { bill, space }, now);
    }
}

/// One compare-and-set change to `tag`'s usage: `decide` may modify it and returns `Some` to
/// refuse (nothing written).
fn change<S: Store + ?Sized, R>(
    store: &mut S,
    layout: &Layout,
    tag: PayerTag,
    now: UnixMillis,
    mut decide: impl FnMut(&mut Usage) -> Option<R>,
) -> Result<Option<R>, ProtocolError> {
    let cell = layout.ledger_cell_name(tag);
    for _ in 0..MAX_ATTEMPTS {
        let snapshot = store.read(&cell).map_err(ProtocolError::Store)?;
        let (mut ledger, expect) = match &snapshot {
            None => (Ledger::default(), Expect::Absent),
            Some(snap) => (
                Ledger::decode(&snap.bytes).map_err(ProtocolError::Corrupt)?,
                Expect::Version(snap.version),
            ),
        };
        ledger.prune(now);
        if let Some(refused) = decide(ledger.usage_mut(tag)) {
            return Ok(Some(refused));
        }
        match store
            .write(&cell, &ledger.encode(), expect)
            .map_err(ProtocolError::Store)?
        {
            WriteOutcome::Written => return Ok(None),
            WriteOutcome::Conflict => continue,
        }
    }
    Err(ProtocolError::Contention)
}

/// What `tag` holds in the store now (for tests, stats and logs): records and bytes.
pub fn held<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    tag: PayerTag,
    now: UnixMillis,
) -> Result<Held, ProtocolError> {
    let usage = usage(store, layout, tag, now)?;
    Ok(Held {
        records: usage.records(),
        bytes: usage.bytes(),
    })
}

/// `tag`'s usage at `now`, as its ledger cell holds it.
fn usage<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    tag: PayerTag,
    now: UnixMillis,
) -> Result<Usage, ProtocolError> {
    let cell = layout.ledger_cell_name(tag);
    let Some(snapshot) = store.read(&cell).map_err(ProtocolError::Store)? else {
        return Ok(Usage::default());
    };
    let mut ledger = Ledger::decode(&snapshot.bytes).map_err(ProtocolError::Corrupt)?;
    ledger.prune(now);
    Ok(ledger.usage(tag).cloned().unwrap_or_default())
}

/// What [`charge`] would refuse `bill` for, read without charging anything: a payer over its
/// share while the record's fill shard is under pressure — and not full: a full shard is a full
/// store, everyone's `store_full`. A record that has no room in its cell asks, so that a flooder
/// whose key falls in a cell full by chance is told it is over its share, not that the store is
/// full.
pub(crate) fn refusal<S: Store + ?Sized>(
    store: &mut S,
    layout: &Layout,
    shares: &Shares,
    bill: Bill,
    now: UnixMillis,
) -> Result<Option<OverShare>, ProtocolError> {
    let mut over = None;
    for tag in bill.payers.tags() {
        if let Some(limit) = shares.limit_of(&bill.payers, tag) {
            let usage = usage(store, layout, tag, now)?;
            if let Some(retry_after) = usage.room_after(limit, now) {
                let refusal = ShareRefusal::of(tag, &usage, limit);
                over = Some(OverShare {
                    retry_after,
                    refusal,
                });
                break;
            }
        }
    }
    let pressed = match (over, bill.shard) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(_), Some(shard)) => {
            let fill = held(store, layout, shard.tag, now)?;
            fill.records < shard.capacity && shard.under(fill, layout, shares.pressure_of_memory())
        }
    };
    Ok(over.filter(|_| pressed))
}

/// What a payer holds: [`held`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Held {
    pub records: u64,
    pub bytes: u64,
}

#[cfg(test)]
mod tests;
