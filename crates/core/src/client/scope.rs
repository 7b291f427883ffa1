//! Whose key is it? (`docs/semantics.md` §2.) A key alone must never find another client's record,
//! or one user's response would be replayed to another. The storage key therefore hashes,
//! domain-separated and length-prefixed, the scope (which source identified the client and its
//! value), the method, the route and the key. The scope value is only ever stored inside this hash,
//! never in clear.

use crate::hash::{to_hex, PartsHasher};
use crate::request::key::IdempotencyKey;
use alloc::string::String;
use alloc::vec::Vec;

/// Scope label of callback routes: the route, not the caller, owns the delivery ids.
pub(crate) const ROUTE_SCOPE_SOURCE: &str = "route";

/// Version tag of the storage-key preimage; bump it if the part list or the layout ever changes.
/// v2: bytes 4..8 carry the [`QuotaTag`].
pub(crate) const STORAGE_KEY_TAG: &str = "idemgate-storage-key-v2";

/// Who the request is from, as the configured scope source saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope<'a> {
    /// Names the source, e.g. `header:authorization`, `property:metadata.jwt.sub`, `peer`,
    /// `anonymous`. Part of the hash so that equal values from different sources never meet.
    pub source: &'a str,
    /// The identity the source gave (a header value, a claim, an address).
    pub value: &'a [u8],
}

/// The 32-byte name of a record in the store.
///
/// Bytes 0..4 choose the record's cell ([`crate::store::Layout`]); bytes 4..8 are the
/// [`QuotaTag`] of the scope that owns it, so an operator's tally can group a store's records by
/// client without knowing who the client is (`idemgate-store stats`). The other 28 bytes (224
/// bits) of SHA-256 keep keys collision-free.
///
/// The bytes are private: a host gets a key from a request through [`StorageKey::derive`] (or a
/// token's use through `StorageKey::tagged`), so no host spells the derivation differently.
/// [`StorageKey::from_stored`] is for a key read back from where one was kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StorageKey(pub [u8; 32]);

/// Who pays for a record's space: 3 bytes of the scope's hash and its [`QuotaClass`]. Two scopes
/// share a tag with chance 2⁻²⁴, and then only share a quota in the cells they both use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QuotaTag(pub [u8; 4]);

/// Whose share applies: clients identified by a configured header or property, or only by their
/// address (the peer), whose share is smaller by default — many clients can sit behind one address,
/// but one address is also the cheapest identity an attacker has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaClass {
    Identified,
    Peer,
}

impl QuotaTag {
    /// The tag in the keys of payers' ledgers in the remote store, so an operator's
    /// tally tells them from records: a scope's tag ends in its class byte, 0 or 1, never 0xff.
    pub const LEDGER: QuotaTag = QuotaTag([0, 0, 0, 0xff]);

    /// The tag of `scope`.
    pub fn of(scope: Scope<'_>) -> QuotaTag {
        QuotaTag::hashed(scope, &scope_hash(scope))
    }

    /// The tag of `scope`, whose [`scope_hash`] is `hash` (kept by
    /// [`crate::client::identity::ScopeHashes`]).
    pub(crate) fn hashed(scope: Scope<'_>, hash: &[u8; 32]) -> QuotaTag {
        let class = u8::from(scope.source == "peer");
        QuotaTag([hash[0], hash[1], hash[2], class])
    }

    pub fn class(self) -> QuotaClass {
        match self.0[3] {
            1 => QuotaClass::Peer,
            _ => QuotaClass::Identified,
        }
    }
}

/// What every storage key of one scope begins with: the scope's quota tag, and the key's hash
/// after its version tag, source and value. A host that sees one client many times in a row keeps
/// it ([`crate::client::identity::ScopeHashes`]), so each key hashes only its method, route and
/// key: with a `header:authorization` scope the tag, source and value fill a whole SHA-256 block,
/// one of a key's three.
#[derive(Clone)]
pub(crate) struct KeyPrefix {
    tag: QuotaTag,
    hasher: PartsHasher,
}

impl KeyPrefix {
    /// The prefix of `scope`'s keys.
    pub(crate) fn of(scope: Scope<'_>) -> KeyPrefix {
        KeyPrefix::tagged(QuotaTag::of(scope), KeyPrefix::hasher(scope))
    }

    /// `tag` must be `QuotaTag::of(scope)` and `hasher` `KeyPrefix::hasher(scope)`.
    pub(crate) fn tagged(tag: QuotaTag, hasher: PartsHasher) -> KeyPrefix {
        KeyPrefix { tag, hasher }
    }

    /// The key's hash after its version tag and `scope`.
    pub(crate) fn hasher(scope: Scope<'_>) -> PartsHasher {
        let mut hasher = PartsHasher::new(STORAGE_KEY_TAG);
        hasher.part(scope.source.as_bytes()).part(scope.value);
        hasher
    }

    /// The storage key of `key` on `method` and `route` for this scope.
    pub(crate) fn derive(&self, method: &str, route: &str, key: &IdempotencyKey) -> StorageKey {
        let mut hasher = self.hasher.clone();
        hasher
            .part(method.as_bytes())
            .part(route.as_bytes())
            .part(key.as_str().as_bytes());
        StorageKey::tagged(hasher.finish(), self.tag)
    }
}

impl core::fmt::Debug for KeyPrefix {
    /// The tag only: the hash state says nothing readable.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KeyPrefix").field("tag", &self.tag).finish()
    }
}

impl StorageKey {
    /// Derives the storage key from its five parts (plus the version tag).
    pub fn derive(scope: Scope<'_>, method: &str, route: &str, key: &IdempotencyKey) -> StorageKey {
        KeyPrefix::of(scope).derive(method, route, key)
    }

    /// A hash with bytes 4..8 replaced by `tag`.
    pub(crate) fn tagged(mut hash: [u8; 32], tag: QuotaTag) -> StorageKey {
        hash[4..8].copy_from_slice(&tag.0);
        StorageKey(hash)
    }

    /// A key as it was kept: the 32 bytes an engine stored it under (a row, a Redis key) or a
    /// test's fixed key. Requests' keys come from [`StorageKey::derive`].
    pub const fn from_stored(bytes: [u8; 32]) -> StorageKey {
        StorageKey(bytes)
    }

    /// Whether the key is a payer's ledger (the remote store's), not a record's: its bytes 4..8
    /// are [`QuotaTag::LEDGER`].
    pub fn is_ledger(&self) -> bool {
        self.0[4..8] == QuotaTag::LEDGER.0
    }

    /// The 32 bytes to store the key under.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The scope that owns this record's space.
    pub fn quota_tag(&self) -> QuotaTag {
        QuotaTag([self.0[4], self.0[5], self.0[6], self.0[7]])
    }

    pub fn to_hex(&self) -> String {
        to_hex(&self.0)
    }

    /// A short, non-reversible label for logs: enough to correlate lines, useless to replay.
    pub fn log_label(&self) -> String {
        to_hex(&self.0[..6])
    }
}

/// A hash of the scope alone, for binding one-time tokens to a client without storing who it is.
pub fn scope_hash(scope: Scope<'_>) -> [u8; 32] {
    let mut hasher = PartsHasher::new("idemgate-scope-v1");
    hasher.part(scope.source.as_bytes()).part(scope.value);
    hasher.finish()
}

/// What a one-time token is bound to: the client's scope, the route rule it
/// was issued for (its prefix) and the method. The token's MAC covers this hash, so a token used
/// by another client, on another route or with another method fails like a forged one
/// (`token_bad_signature`) — and none of the three is ever written into the token in clear.
pub(crate) fn token_audience(scope: Scope<'_>, route_prefix: &str, method: &str) -> [u8; 32] {
    let mut hasher = PartsHasher::new("idemgate-token-audience-v1");
    hasher
        .part(&scope_hash(scope))
        .part(route_prefix.as_bytes())
        .part(method.as_bytes());
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_audience_binds_scope_route_and_method() {
        let alice = Scope {
            source: "header:authorization",
            value: b"alice",
        };
        let bob = Scope {
            value: b"bob",
            ..alice
        };
        let base = token_audience(alice, "/pay", "POST");
        assert_ne!(base, token_audience(bob, "/pay", "POST"));
        assert_ne!(base, token_audience(alice, "/transfer", "POST"));
        assert_ne!(base, token_audience(alice, "/pay", "PATCH"));
        // Length-prefixed parts: moving a byte across the boundary is another audience.
        assert_ne!(
            token_audience(alice, "/payP", "OST"),
            token_audience(alice, "/pay", "POST")
        );
        assert_eq!(base, token_audience(alice, "/pay", "POST"));
    }

    fn key(s: &str) -> IdempotencyKey {
        IdempotencyKey::parse(s.as_bytes()).unwrap()
    }

    #[test]
    fn every_part_matters() {
        let scope = Scope {
            source: "header:authorization",
            value: b"Bearer a",
        };
        let base = StorageKey::derive(scope, "POST", "/orders", &key("k1"));
        let other_scope = Scope {
            value: b"Bearer b",
            ..scope
        };
        let other_source = Scope {
            source: "header:x-api-key",
            ..scope
        };
        assert_ne!(
            base,
            StorageKey::derive(other_scope, "POST", "/orders", &key("k1"))
        );
        assert_ne!(
            base,
            StorageKey::derive(other_source, "POST", "/orders", &key("k1"))
        );
        assert_ne!(
            base,
            StorageKey::derive(scope, "PATCH", "/orders", &key("k1"))
        );
        assert_ne!(
            base,
            StorageKey::derive(scope, "POST", "/order", &key("k1"))
        );
        assert_ne!(
            base,
            StorageKey::derive(scope, "POST", "/orders", &key("k2"))
        );
        assert_eq!(
            base,
            StorageKey::derive(scope, "POST", "/orders", &key("\"k1\""))
        );
    }

    #[test]
    fn the_quota_tag_names_the_scope_and_its_class() {
        let alice = Scope {
            source: "header:authorization",
            value: b"Bearer a",
        };
        let peer = Scope {
            source: "peer",
            value: b"10.0.0.1",
        };
        let a1 = StorageKey::derive(alice, "POST", "/orders", &key("k1"));
        let a2 = StorageKey::derive(alice, "PATCH", "/other", &key("k2"));
        assert_eq!(a1.quota_tag(), a2.quota_tag());
        assert_eq!(a1.quota_tag(), QuotaTag::of(alice));
        assert_eq!(a1.quota_tag().class(), QuotaClass::Identified);
        let p = StorageKey::derive(peer, "POST", "/orders", &key("k1"));
        assert_eq!(p.quota_tag().class(), QuotaClass::Peer);
        assert_ne!(p.quota_tag(), a1.quota_tag());
        // Cells are still chosen by the key's own hash, not by the scope.
        assert_ne!(a1.0[..4], a2.0[..4]);
    }
}

/// Where the client identity for scoping comes from; the first source present is used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScopeSource {
    /// A request header (hashed, never stored in clear), e.g. `authorization`, `x-api-key`: the
    /// client's own word.
    Header(String),
    /// A header the operator declares Envoy sets (`jwt_authn`'s `claim_to_headers`, an
    /// `ext_authz` response header), overwriting whatever the client sent.
    VerifiedHeader(String),
    /// A host property path, e.g. a JWT claim in Envoy's dynamic metadata.
    Property(Vec<String>),
    /// The downstream peer address.
    Peer,
}

impl ScopeSource {
    /// The `source` part of the storage key. A header is the same source whether or not it is
    /// declared verified, so declaring it does not move any record.
    pub fn label(&self) -> String {
        match self {
            // Asked for on every scoped request: two copies, not the formatting machinery.
            ScopeSource::Header(name) | ScopeSource::VerifiedHeader(name) => {
                let mut label = String::with_capacity("header:".len() + name.len());
                label.push_str("header:");
                label.push_str(name);
                label
            }
            ScopeSource::Property(path) => alloc::format!("property:{}", path.join("\u{1f}")),
            ScopeSource::Peer => String::from("peer"),
        }
    }

    /// Whether something other than the client established the identity: a header
    /// declared verified, or what an earlier filter put in dynamic metadata (`metadata`, e.g.
    /// `jwt_authn`'s payload) or filter state (`filter_state`, e.g. `ext_authz`). Any other
    /// property is the client's to choose (`request.*`, the TLS SNI `connection.requested_server_name`,
    /// `source.port`): records of an unverified scope are charged to the peer too
    /// ([`crate::store::share`]).
    pub(crate) fn is_verified(&self) -> bool {
        match self {
            ScopeSource::Header(_) => false,
            ScopeSource::VerifiedHeader(_) | ScopeSource::Peer => true,
            ScopeSource::Property(path) => path
                .first()
                .is_some_and(|first| first == "metadata" || first == "filter_state"),
        }
    }
}
