//! Who pays for a record's space, and what each payer may hold: the client's side of the
//! store's shares. The store counts what each payer holds ([`crate::store::share`]); here is only
//! who the payers of a request are, their tags, their shares, and why one was refused.

use crate::client::scope::{scope_hash, Scope, ROUTE_SCOPE_SOURCE};
use alloc::vec::Vec;
use core::net::IpAddr;

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
    pub(crate) ipv4_prefix: u8,
    /// Leading bits of an IPv6 address that make one peer.
    pub(crate) ipv6_prefix: u8,
    /// The fill, in percent of the store's records, from which shares bind ([`crate::store::share::fill`]): below it
    /// nobody is refused for a share. `0`: always (fixed caps); `100`: only a full store.
    pub(crate) pressure: u8,
    /// The store's byte bound (`max_memory`), split over the fill shards by their records
    /// (`crate::store::share::FillShard::byte_part`); the pressure threshold applies to a shard's bytes as to its
    /// records.
    pub(crate) memory: u64,
    /// Whether the fill shards count bytes against `memory`: only where the store could pass it
    /// otherwise (`capacity` × the largest record above `memory`). Where it cannot, and no share
    /// is counted either, a record costs no ledger operation at all.
    pub(crate) memory_counted: bool,
}

impl Shares {
    /// The share that applies to `tag`; `None` when its kind is not counted. A callback route's
    /// share is its own (`routes[].share`), which the payers carry (`Shares::limit_of`).
    pub(crate) fn limit(&self, tag: PayerTag) -> Option<Share> {
        match tag.0[7] {
            ADDRESS_GROUP_KIND => self.peer,
            ROUTE_KIND => None,
            _ => self.identity,
        }
    }

    /// The share `tag` is charged within as one of `payers`: a callback route's own, or the
    /// share of its kind.
    pub(crate) fn limit_of(&self, payers: &Payers, tag: PayerTag) -> Option<Share> {
        if tag.is_route() {
            payers.route
        } else {
            self.limit(tag)
        }
    }

    /// [`Payers::of`] without the payers whose kind is not counted (`"off"`): nothing is
    /// charged to them, so their records cost no ledger write.
    #[cfg(test)]
    pub(crate) fn payers(
        &self,
        scope: Scope<'_>,
        verified: bool,
        peer_group: Option<&[u8]>,
    ) -> Payers {
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
    pub(crate) fn billed(&self, payers: Payers) -> Vec<Billed> {
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
    pub(crate) fn counted(&self) -> bool {
        self.identity.is_some() || self.peer.is_some()
    }

    /// The pressure, and the byte bound where the fill shards count bytes.
    pub(crate) fn pressure_of_memory(&self) -> (u8, Option<u64>) {
        (self.pressure, self.memory_counted.then_some(self.memory))
    }

    /// The address group of `host` (an address as `client::peer_host` gives it: `10.0.0.1`,
    /// `[2001:db8::1]`): the address with only its first `ipv4_prefix` / `ipv6_prefix` bits kept,
    /// as bytes (family, prefix length, masked address) — it is only ever hashed into a payer's
    /// tag, so it is never formatted (which would cost the filter kilobytes of code). Anything
    /// that is not an IP address (a Unix socket path) is its own group.
    pub(crate) fn peer_group(&self, host: &str) -> Vec<u8> {
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
            let mut group = Vec::with_capacity(6);
            group.extend_from_slice(&[4, self.ipv4_prefix]);
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
    pub(crate) fn of(scope: Scope<'_>) -> PayerTag {
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
    pub(crate) fn is_address_group(self) -> bool {
        self.0[7] == ADDRESS_GROUP_KIND
    }

    /// A callback route's own scope (its share is the route's `share`).
    pub(crate) fn is_route(self) -> bool {
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
pub(crate) const PEER_GROUP_SOURCE: &str = "peer";

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
    pub(crate) fn from_tags(first: Option<PayerTag>, second: Option<PayerTag>) -> Payers {
        let tags = match (first, second) {
            (None, second) => [second, None],
            (first, second) if first == second => [first, None],
            (first, second) => [first, second],
        };
        Payers { tags, route: None }
    }

    pub(crate) fn tags(&self) -> impl Iterator<Item = PayerTag> + Clone + '_ {
        self.tags.iter().flatten().copied()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.tags[0].is_none()
    }
}

/// Which share refused a record, as it is counted and logged, so that an operator can tell an
/// attack (one payer at its share) from a store sized too small (everyone at theirs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShareReason {
    /// An identity's records (`shares.identity`).
    Identity,
    /// An address group's records (`shares.peer`).
    Address,
    /// A callback route's own records (`routes[].share`).
    Route,
    /// A payer's bytes (`shares.identity_bytes`, `shares.peer_bytes`), its records within their
    /// share.
    Bytes,
}

impl ShareReason {
    pub fn name(self) -> &'static str {
        match self {
            ShareReason::Identity => "identity",
            ShareReason::Address => "address",
            ShareReason::Route => "route",
            ShareReason::Bytes => "bytes",
        }
    }
}

/// A payer refused for its share: which share, and whose — the payer's tag, a hash of its scope
/// (never the identity itself) that names it in a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareRefusal {
    pub reason: ShareReason,
    pub payer: PayerTag,
}

impl ShareRefusal {
    /// Why `tag`, holding `records`, has no room within `limit`: its bytes when its records are
    /// below their share, its kind's records otherwise.
    pub(crate) fn of(tag: PayerTag, records: u64, limit: Share) -> ShareRefusal {
        let reason = if records < limit.records {
            ShareReason::Bytes
        } else if tag.is_route() {
            ShareReason::Route
        } else if tag.is_address_group() {
            ShareReason::Address
        } else {
            ShareReason::Identity
        };
        ShareRefusal { reason, payer: tag }
    }
}

impl core::fmt::Display for ShareRefusal {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("429 scope_quota_exceeded: payer ")?;
        for byte in self.payer.0 {
            write!(f, "{byte:02x}")?;
        }
        write!(f, " holds its {} share", self.reason.name())
    }
}
