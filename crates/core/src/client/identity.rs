//! Who is asking (`docs/semantics.md` §2): the client identity for the storage key's scope, taken
//! from the configured sources in order, and the peer's address without its port (a retry over a
//! new connection comes from another port but is the same client). Decided in the core, not the
//! filter, so every host reads a client alike: a host hands its facts over through [`Facts`] and
//! gets the identity, or [`Unreadable`].
//!
//! Only configured sources count: a source that is not in the list is never used as a fallback,
//! and an empty or whitespace-only value is absent (an empty `Authorization:` would otherwise be
//! one namespace shared by every client that sends it). The peer address is Envoy's
//! `source.address`, which is the connection's only with `use_remote_address: true` (see
//! `examples/envoy/envoy.yaml`); without it Envoy takes it from `X-Forwarded-For`.

use crate::client::payer::Shares;
use crate::client::payer::{PayerTag, Payers, Share, PEER_GROUP_SOURCE};
use crate::client::scope::ScopeSource;
use crate::client::scope::{scope_hash, KeyPrefix, QuotaTag, Scope};
use crate::hash::{KeptStates, PartsHasher};
use alloc::borrow::ToOwned;
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

/// An owned scope identity; [`ClientIdentity::scope`] borrows it as the core's [`Scope`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientIdentity {
    pub(crate) source: String,
    pub(crate) value: Vec<u8>,
    /// Established by something other than the client (`ScopeSource::is_verified`; a callback
    /// route's own scope, whose provider signed the request): its records are not also charged
    /// to the peer's address.
    pub(crate) verified: bool,
}

impl ClientIdentity {
    pub(crate) fn scope(&self) -> Scope<'_> {
        Scope {
            source: &self.source,
            value: &self.value,
        }
    }

    /// Who pays for this client's records ([`crate::store::share`]): the identity, and
    /// the address group of the peer unless the identity is verified. A peer-scoped client pays as
    /// its address group. A kind of share that is `"off"` is charged nothing
    /// ([`crate::client::payer::Shares::payers`]): its records write no ledger cell. Each payer's
    /// tag is hashed once per run of one client's requests (`scopes`). `group` gives the peer's
    /// address group ([`peer_group`]; asked only when the identity is not verified), so a host
    /// that also charges a body to it works it out once.
    ///
    /// `route` is the share of a callback route whose own scope this is (`routes[].share`; `None`:
    /// the whole store, the route itself charged nothing).
    pub(crate) fn payers<'g>(
        &self,
        shares: &Shares,
        group: impl FnOnce() -> Result<Option<&'g [u8]>, Unreadable>,
        scopes: &ScopeHashes,
        route: Option<Share>,
    ) -> Result<Payers, Unreadable> {
        let tag = |scope: Scope<'_>| scopes.payer_tag(scope);
        if self.verified && self.source != PEER_GROUP_SOURCE {
            return Ok(shares.payers_tagged(self.scope(), true, None, &tag, route));
        }
        let group = group()?;
        Ok(shares.payers_tagged(self.scope(), self.verified, group, &tag, route))
    }
}

/// The host failed to hand a fact over — a failing call, not an absent property. Never taken as
/// absent: the next scope source would then put the request in another namespace, and
/// the same request read again would be another key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unreadable;

/// How a host hands its facts over: a request's headers and the host's properties.
pub trait Facts {
    /// All values of a request header (lowercase name).
    fn header_values<'a>(&'a self, name: &str) -> Vec<&'a [u8]>;
    /// A property's value; `Ok(None)` when the host has none.
    fn property(&self, path: &[&str]) -> Result<Option<Vec<u8>>, Unreadable>;
}

/// The identity from the first configured source that is present; `None` when none is — the caller
/// must then not guard the request in a namespace shared with other clients
/// (`docs/semantics.md` §2). Never a source that is not configured, and never the next one because
/// a read failed.
pub(crate) fn identify(
    sources: &[ScopeSource],
    facts: &dyn Facts,
) -> Result<Option<ClientIdentity>, Unreadable> {
    for source in sources {
        let value = match source {
            ScopeSource::Header(name) | ScopeSource::VerifiedHeader(name) => {
                let values: Vec<&[u8]> = facts
                    .header_values(name)
                    .into_iter()
                    .filter(|v| !is_blank(v))
                    .collect();
                // Every value counts: `a` then `b` is another client than `a` alone.
                (!values.is_empty()).then(|| values.join(&b"\n"[..]))
            }
            ScopeSource::Property(path) => {
                let path: Vec<&str> = path.iter().map(String::as_str).collect();
                facts.property(&path)?.filter(|v| !is_blank(v))
            }
            ScopeSource::Peer => peer(facts)?,
        };
        if let Some(value) = value {
            return Ok(Some(ClientIdentity {
                source: source.label(),
                value,
                verified: source.is_verified(),
            }));
        }
    }
    Ok(None)
}

/// The address group the peer belongs to as the shares count it
/// ([`crate::client::payer::Shares::peer_group`]); `None` without an address. The payers of a
/// record and the hashing budget's part of a stream are both charged to it.
pub(crate) fn peer_group(
    shares: &Shares,
    facts: &dyn Facts,
) -> Result<Option<Vec<u8>>, Unreadable> {
    // The host part borrowed from the address as read: no copy of it made, and no second pass
    // over it as text.
    let Some(address) = facts.property(&["source", "address"])? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&address);
    let host = peer_host(&text);
    Ok((!host.is_empty()).then(|| shares.peer_group(host)))
}

/// Empty or only whitespace: no identity at all.
fn is_blank(value: &[u8]) -> bool {
    value.iter().all(u8::is_ascii_whitespace)
}

fn peer(facts: &dyn Facts) -> Result<Option<Vec<u8>>, Unreadable> {
    let Some(address) = facts.property(&["source", "address"])? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&address);
    let host = peer_host(&text);
    Ok((!host.is_empty()).then(|| host.as_bytes().to_vec()))
}

/// `10.0.0.1:5678` → `10.0.0.1`, `[::1]:5678` → `[::1]`; anything else unchanged.
pub(crate) fn peer_host(address: &str) -> &str {
    if address.starts_with('[') {
        return match address.find(']').and_then(|end| address.get(..=end)) {
            Some(bracketed) => bracketed,
            None => address,
        };
    }
    match address.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            host
        }
        _ => address,
    }
}

/// How many scopes [`ScopeHashes`] keeps: a request asks for its client's identity and its
/// address group, and a worker serves a few clients' runs interleaved.
const KEPT_SCOPES: usize = 4;

/// The hashes of the last scopes a worker saw, most recent first. A scope's quota tag (in its
/// storage key) and its payer tags (its shares) are each a hash of the scope — two SHA-256 blocks,
/// and a keyed request needs three: its identity's quota and payer tags and its address group's
/// payer tag, about a third of its operators outside the body. A worker sees the same client many
/// times in a row (one connection, one token), so each is hashed once per run of one client's
/// requests instead of once per request. The worker's fingerprint heads are kept alike
/// (`ScopeHashes::heads`): one host-held cache of hash states, not two.
#[derive(Debug, Default)]
pub struct ScopeHashes(Kept);

/// What [`ScopeHashes`] keeps.
#[derive(Debug, Default)]
struct Kept {
    scopes: RefCell<[Option<Hashed>; KEPT_SCOPES]>,
    heads: KeptStates,
}

#[derive(Debug)]
struct Hashed {
    source: String,
    value: Vec<u8>,
    hash: [u8; 32],
    /// `KeyPrefix::hasher` of the scope, made when a storage key is first derived for it (an
    /// address group, hashed for its payer tag, never has one). Boxed: the entries move on every
    /// lookup, and a hash state is three times the rest of one.
    key_prefix: Option<Box<PartsHasher>>,
}

impl ScopeHashes {
    /// `QuotaTag::of(scope)`.
    pub fn quota_tag(&self, scope: Scope<'_>) -> QuotaTag {
        QuotaTag::hashed(scope, &self.hash(scope))
    }

    /// `PayerTag::of(scope)`.
    pub(crate) fn payer_tag(&self, scope: Scope<'_>) -> PayerTag {
        PayerTag::hashed(scope, &self.hash(scope))
    }

    /// `KeyPrefix::of(scope)`.
    pub(crate) fn key_prefix(&self, scope: Scope<'_>) -> KeyPrefix {
        let Ok(mut kept) = self.0.scopes.try_borrow_mut() else {
            return KeyPrefix::of(scope);
        };
        let hashed = Self::front(&mut kept, scope);
        let tag = QuotaTag::hashed(scope, &hashed.hash);
        let hasher = hashed
            .key_prefix
            .get_or_insert_with(|| Box::new(KeyPrefix::hasher(scope)));
        KeyPrefix::tagged(tag, PartsHasher::clone(hasher))
    }

    /// The SHA-256 states of the fingerprint heads this worker hashed last
    /// (`FingerprintBuilder::kept`).
    pub(crate) fn heads(&self) -> &KeptStates {
        &self.0.heads
    }

    /// [`scope_hash`] of `scope`, kept (the least recently asked for is forgotten).
    fn hash(&self, scope: Scope<'_>) -> [u8; 32] {
        let Ok(mut kept) = self.0.scopes.try_borrow_mut() else {
            return scope_hash(scope);
        };
        Self::front(&mut kept, scope).hash
    }

    /// The entry of `scope`, found or made, moved to the front (the least recently used gives
    /// way to a new one).
    fn front<'k>(kept: &'k mut [Option<Hashed>; KEPT_SCOPES], scope: Scope<'_>) -> &'k mut Hashed {
        let found = kept.iter().position(|h| {
            h.as_ref()
                .is_some_and(|h| h.source == scope.source && h.value == scope.value)
        });
        match found {
            Some(at) => kept[..=at].rotate_right(1),
            None => {
                kept.rotate_right(1);
                kept[0] = None;
            }
        }
        kept[0].get_or_insert_with(|| Hashed {
            source: scope.source.to_owned(),
            value: scope.value.to_vec(),
            hash: scope_hash(scope),
            key_prefix: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;
    use alloc::collections::BTreeMap as HashMap;
    use alloc::format;
    use alloc::string::ToString;

    #[test]
    fn a_kept_scope_hash_gives_the_tags_of_the_scope_asked_for() {
        let kept = ScopeHashes::default();
        // Six scopes, so the four kept are forgotten and found again in every order; "peer"
        // and a header with the same value are two scopes.
        let values: [&[u8]; 5] = [b"Bearer a", b"Bearer b", b"Bearer c", b"10.0.0.0/24", b""];
        let mut asked = Vec::new();
        for round in 0..3 {
            for (i, value) in values.iter().enumerate() {
                let source = if (i + round) % 2 == 0 {
                    "peer"
                } else {
                    "header:authorization"
                };
                asked.push((source, *value));
                asked.push((source, values[(i + round) % values.len()]));
            }
        }
        for (source, value) in asked {
            let scope = Scope { source, value };
            assert_eq!(
                kept.quota_tag(scope),
                QuotaTag::of(scope),
                "{source} {value:?}"
            );
            assert_eq!(
                kept.payer_tag(scope),
                PayerTag::of(scope),
                "{source} {value:?}"
            );
            // The kept beginning of a storage key ends as the whole derivation does, asked for
            // before or after the scope's tags.
            let key = crate::request::key::IdempotencyKey::parse(b"k-1").unwrap();
            for _ in 0..2 {
                assert_eq!(
                    kept.key_prefix(scope).derive("POST", "/orders", &key),
                    crate::client::scope::StorageKey::derive(scope, "POST", "/orders", &key),
                    "{source} {value:?}"
                );
            }
        }
    }

    struct Fake {
        headers: Vec<(String, Vec<u8>)>,
        properties: HashMap<String, Vec<u8>>,
        /// Properties whose read fails (a failing host call, not an absent property).
        failing: Vec<String>,
    }

    impl Facts for Fake {
        fn header_values<'a>(&'a self, name: &str) -> Vec<&'a [u8]> {
            self.headers
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| v.as_slice())
                .collect()
        }
        fn property(&self, path: &[&str]) -> Result<Option<Vec<u8>>, Unreadable> {
            let path = path.join(".");
            if self.failing.contains(&path) {
                return Err(Unreadable);
            }
            Ok(self.properties.get(&path).cloned())
        }
    }

    fn fake(headers: &[(&str, &str)]) -> Fake {
        Fake {
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
                .collect(),
            properties: HashMap::from([("source.address".to_string(), b"10.1.2.3:40000".to_vec())]),
            failing: Vec::new(),
        }
    }

    #[test]
    fn first_present_source_wins() {
        let policy = Policy::defaults(); // authorization, then peer
        let id = identify(&policy.scope, &fake(&[("authorization", "Bearer a")]))
            .unwrap()
            .unwrap();
        assert_eq!(
            (id.source.as_str(), id.value.as_slice()),
            ("header:authorization", &b"Bearer a"[..])
        );
        let id = identify(&policy.scope, &fake(&[])).unwrap().unwrap();
        assert_eq!(
            (id.source.as_str(), id.value.as_slice()),
            ("peer", &b"10.1.2.3"[..])
        );
    }

    #[test]
    fn a_source_that_is_not_configured_is_never_used() {
        // Before the hardening this fell back to the peer address.
        let policy = Policy::from_json(r#"{"scope":[{"header":"x-api-key"}]}"#, &|_| None).unwrap();
        assert_eq!(identify(&policy.scope, &fake(&[])), Ok(None));
    }

    #[test]
    fn blank_values_are_absent() {
        let policy = Policy::defaults(); // authorization, then peer
        for blank in ["", " ", "\t  "] {
            let id = identify(&policy.scope, &fake(&[("authorization", blank)]))
                .unwrap()
                .unwrap();
            assert_eq!(id.source, "peer", "{blank:?}");
        }
        // A blank value next to a real one is dropped, the real one counts.
        let id = identify(
            &policy.scope,
            &fake(&[("authorization", ""), ("authorization", "b")]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(id.value, b"b");
        let policy =
            Policy::from_json(r#"{"scope":[{"property":["metadata","sub"]}]}"#, &|_| None).unwrap();
        let mut facts = fake(&[]);
        facts
            .properties
            .insert("metadata.sub".into(), b"  ".to_vec());
        assert_eq!(identify(&policy.scope, &facts), Ok(None));
    }

    #[test]
    fn no_source_and_no_peer_is_no_identity() {
        let policy = Policy::from_json(r#"{"scope":[{"header":"x-api-key"}]}"#, &|_| None).unwrap();
        let mut facts = fake(&[]);
        facts.properties.clear();
        assert_eq!(identify(&policy.scope, &facts), Ok(None));
        facts
            .properties
            .insert("source.address".into(), b"".to_vec());
        assert_eq!(identify(&policy.scope, &facts), Ok(None));
    }

    #[test]
    fn property_source() {
        let policy =
            Policy::from_json(r#"{"scope":[{"property":["metadata","sub"]}]}"#, &|_| None).unwrap();
        let mut facts = fake(&[]);
        facts
            .properties
            .insert("metadata.sub".into(), b"alice".to_vec());
        let id = identify(&policy.scope, &facts).unwrap().unwrap();
        assert_eq!(id.value, b"alice");
        assert!(id.source.starts_with("property:"));
    }

    /// No silent fallback: a read that failed is not an absent property — the next source (the
    /// peer) would scope the same request in another namespace.
    #[test]
    fn a_failing_read_is_unreadable_never_the_next_source() {
        let policy = Policy::from_json(
            r#"{"scope":[{"property":["metadata","sub"]},"peer"]}"#,
            &|_| None,
        )
        .unwrap();
        let mut facts = fake(&[]);
        facts
            .properties
            .insert("metadata.sub".into(), b"alice".to_vec());
        facts.failing.push("metadata.sub".into());
        assert_eq!(identify(&policy.scope, &facts), Err(Unreadable));
        // The peer's address, read for the payers: a failure is not "no address".
        let mut facts = fake(&[("authorization", "Bearer a")]);
        let policy = Policy::defaults();
        let id = identify(&policy.scope, &facts).unwrap().unwrap();
        facts.failing.push("source.address".into());
        assert_eq!(
            id.payers(
                &policy.shares,
                // The group's read fails: that failure is the payers', never "no group".
                || peer_group(&policy.shares, &facts).map(|_| None),
                &ScopeHashes::default(),
                None
            ),
            Err(Unreadable)
        );
        assert_eq!(
            identify(
                &Policy::from_json(r#"{"scope":["peer"]}"#, &|_| None)
                    .unwrap()
                    .scope,
                &facts
            ),
            Err(Unreadable)
        );
    }

    #[test]
    fn a_kind_of_share_that_is_off_is_charged_nothing() {
        let facts = fake(&[("authorization", "Bearer a")]);
        let payers = |shares: &str| {
            let policy =
                Policy::from_json(&format!(r#"{{"shares": {shares}}}"#), &|_| None).unwrap();
            let id = identify(&policy.scope, &facts).unwrap().unwrap();
            let group = peer_group(&policy.shares, &facts).unwrap();
            id.payers(
                &policy.shares,
                || Ok(group.as_deref()),
                &ScopeHashes::default(),
                None,
            )
            .unwrap()
            .tags()
            .count()
        };
        // An unverified header identity pays with its address group, unless a kind is off: then
        // its records write no ledger cell for it (the point of "off", and what keeps the
        // explorations' schedules those of the record cells).
        assert_eq!(payers(r#"{"identity": "10%", "peer": "10%"}"#), 2);
        assert_eq!(payers(r#"{"identity": "10%", "peer": "off"}"#), 1);
        assert_eq!(payers(r#"{"identity": "off", "peer": "10%"}"#), 1);
        assert_eq!(payers(r#"{"identity": "off", "peer": "off"}"#), 0);
    }

    #[test]
    fn peer_hosts() {
        assert_eq!(peer_host("10.0.0.1:5678"), "10.0.0.1");
        assert_eq!(peer_host("[::1]:5678"), "[::1]");
        assert_eq!(peer_host("::1"), "::1");
        assert_eq!(peer_host("/tmp/socket"), "/tmp/socket");
    }
}
