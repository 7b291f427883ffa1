//! Tamper-evident answers in the remote store: a stored answer carries a MAC — its
//! *seal* — made by the filter with a secret only the Envoys hold, and a replay happens only if
//! the seal checks out.
//!
//! The remote store's records live in an engine (Redis, PostgreSQL) behind a service; whoever can
//! reach either could otherwise plant a completion that every Envoy replays as it is — a
//! `location`, an `access-control-allow-origin: *`, a forged body. The header rules of
//! [`crate::record`] and the wire (`crate::store::remote::Request`) only keep out what no answer may
//! carry; the seal proves the answer is one a filter stored, for this key:
//!
//! ```text
//! seal = HMAC-SHA256(secret, len‖"idemgate-record-seal-v1" ‖ len‖key ‖ len‖status
//!                            ‖ len‖count ‖ { len‖name ‖ len‖value }* ‖ len‖kept ‖ [ len‖body ])
//! ```
//!
//! Every part is length-prefixed (u64, big-endian), so no two answers share the MAC input. The
//! storage key is covered, so a sealed answer moved to another key fails. The request fingerprint
//! is not: the filter's finish does not carry it, and a record whose fingerprint was altered can
//! only be replayed to its own key's client, with an answer a filter stored for that key.
//!
//! The sequencer's resource records are sealed alike, over what decides an event's fate:
//!
//! ```text
//! seal = HMAC-SHA256(secret, len‖"idemgate-resource-seal-v1" ‖ len‖key ‖ len‖state ‖ len‖version)
//! ```
//!
//! The service applies the table to the record it reads and holds no secret: the filter that
//! settles a transition seals the new state and version, and a filter acting on a begin checks
//! the state and version the service decided on (`RecordSecrets::check_state`). A record at
//! version 0 needs no seal when its state is the table's initial one: the service creates it so,
//! and such a record says no more than an absent one. The record's expiry, claim and early
//! events are not covered: the service's own rules change them, with its clock, and none of them
//! can make an event illegal or already applied — an altered expiry ends a record early (as
//! deleting it would) or keeps a state a filter sealed. As with answers, a seal does not date a
//! record: a state sealed earlier for the same resource can be put back.
//!
//! Secrets rotate: the first one seals, every one of them is accepted ([`RecordSecrets`]).
//! The local store (Envoy shared data) needs no seal: only the Envoy process can write it.

use crate::client::scope::StorageKey;
use crate::record::resource::ReadState;
use crate::record::MAX_STORED_HEADERS;
use crate::record::{StoredBody, StoredResponse};
use alloc::vec::Vec;
use core::fmt;
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Bytes of a seal.
pub(crate) const SEAL_LEN: usize = 32;
/// Shortest record secret accepted: 256 bits, so guessing it is never the weak point.
pub(crate) const MIN_SECRET_LEN: usize = 32;
/// At most this many secrets are accepted at once (the current one and those being retired).
pub(crate) const MAX_SECRETS: usize = 4;

const TAG: &[u8] = b"idemgate-record-seal-v1";
const STATE_TAG: &[u8] = b"idemgate-resource-seal-v1";

/// A stored answer's MAC.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Seal(pub(crate) [u8; SEAL_LEN]);

impl fmt::Debug for Seal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Seal(")?;
        for b in &self.0[..4] {
            write!(f, "{b:02x}")?;
        }
        f.write_str("…)")
    }
}

/// The secrets that seal and check stored answers: the first seals, any of them checks. Holds
/// only keyed HMAC states and never prints them.
#[derive(Clone)]
pub struct RecordSecrets {
    /// Never empty (constructed only by [`RecordSecrets::new`]).
    keyed: Vec<HmacSha256>,
}

/// Why stored answers cannot be sealed with the given secrets, or why an answer is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SealError {
    /// No secret at all.
    NoSecret,
    /// More than `MAX_SECRETS`.
    TooManySecrets { count: usize },
    /// A secret shorter than `MIN_SECRET_LEN` bytes.
    SecretTooShort { len: usize },
    /// The answer (or resource state) has no seal: written by something that does not hold the
    /// secret.
    Missing,
    /// The seal does not match the answer (or state) and its key under any of the secrets.
    Mismatch,
}

impl SealError {
    pub fn code(&self) -> &'static str {
        match self {
            SealError::NoSecret => "record_secret_missing",
            SealError::TooManySecrets { .. } => "record_secret_too_many",
            SealError::SecretTooShort { .. } => "record_secret_too_short",
            SealError::Missing => "record_unsealed",
            SealError::Mismatch => "record_seal_mismatch",
        }
    }
}

impl fmt::Display for SealError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SealError::NoSecret => f.write_str("no record secret is given"),
            SealError::TooManySecrets { count } => {
                write!(
                    f,
                    "{count} record secrets; at most {MAX_SECRETS} are accepted"
                )
            }
            SealError::SecretTooShort { len } => write!(
                f,
                "a record secret is {len} bytes; at least {MIN_SECRET_LEN} are required"
            ),
            SealError::Missing => f.write_str("the stored record carries no seal"),
            SealError::Mismatch => f.write_str("the stored record's seal does not match it"),
        }
    }
}

impl RecordSecrets {
    /// The secrets, the sealing one first. Each must be at least `MIN_SECRET_LEN` bytes.
    pub fn new(secrets: &[&[u8]]) -> Result<RecordSecrets, SealError> {
        if secrets.is_empty() {
            return Err(SealError::NoSecret);
        }
        if secrets.len() > MAX_SECRETS {
            return Err(SealError::TooManySecrets {
                count: secrets.len(),
            });
        }
        let mut keyed = Vec::with_capacity(secrets.len());
        for secret in secrets {
            if secret.len() < MIN_SECRET_LEN {
                return Err(SealError::SecretTooShort { len: secret.len() });
            }
            // HMAC takes keys of any length: this cannot fail, but is mapped all the same.
            keyed.push(
                HmacSha256::new_from_slice(secret)
                    .map_err(|_| SealError::SecretTooShort { len: secret.len() })?,
            );
        }
        Ok(RecordSecrets { keyed })
    }

    /// `response` with its seal for `key`, made with the first secret.
    #[must_use = "the sealed answer is what must be stored"]
    pub(crate) fn seal(&self, key: &StorageKey, mut response: StoredResponse) -> StoredResponse {
        response.seal = self
            .keyed
            .first()
            .map(|keyed| Seal(mac(keyed, key, &response).finalize().into_bytes().into()));
        response
    }

    /// Checks that `response` was sealed for `key` with one of the secrets (constant-time
    /// comparison). Anything else is corrupt and must never be replayed.
    pub(crate) fn check(
        &self,
        key: &StorageKey,
        response: &StoredResponse,
    ) -> Result<(), SealError> {
        let seal = response.seal.ok_or(SealError::Missing)?;
        self.keyed
            .iter()
            .any(|keyed| mac(keyed, key, response).verify_slice(&seal.0).is_ok())
            .then_some(())
            .ok_or(SealError::Mismatch)
    }
}

impl RecordSecrets {
    /// The seal of a resource's `state` at `version` under `key`, made with the first secret.
    pub(crate) fn seal_state(&self, key: &StorageKey, state: &str, version: u64) -> Option<Seal> {
        self.keyed.first().map(|keyed| {
            Seal(
                state_mac(keyed, key, state, version)
                    .finalize()
                    .into_bytes()
                    .into(),
            )
        })
    }

    /// Checks the state a resource's record holds under `key` (constant-time comparison): sealed
    /// with one of the secrets, or the unsealed version 0 of the table's `initial` state. Anything
    /// else was written by someone who does not hold a secret, and must never decide an event.
    pub(crate) fn check_state(
        &self,
        key: &StorageKey,
        read: &ReadState,
        initial: &str,
    ) -> Result<(), SealError> {
        let Some(seal) = read.seal else {
            return (read.version == 0 && read.state == initial)
                .then_some(())
                .ok_or(SealError::Missing);
        };
        self.keyed
            .iter()
            .any(|keyed| {
                state_mac(keyed, key, &read.state, read.version)
                    .verify_slice(&seal.0)
                    .is_ok()
            })
            .then_some(())
            .ok_or(SealError::Mismatch)
    }
}

/// The keyed MAC over a resource's key, state and version.
fn state_mac(keyed: &HmacSha256, key: &StorageKey, state: &str, version: u64) -> HmacSha256 {
    let mut mac = keyed.clone();
    for part in [STATE_TAG, &key.0, state.as_bytes(), &version.to_be_bytes()] {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part);
    }
    mac
}

/// The keyed MAC over the key and the answer's canonical parts (the seal itself excluded).
fn mac(keyed: &HmacSha256, key: &StorageKey, response: &StoredResponse) -> HmacSha256 {
    let mut mac = keyed.clone();
    let mut part = |bytes: &[u8]| {
        mac.update(&(bytes.len() as u64).to_be_bytes());
        mac.update(bytes);
    };
    part(TAG);
    part(&key.0);
    part(&response.status.to_be_bytes());
    // The wire carries at most this many headers, so the seal covers exactly what is stored.
    let headers = &response.headers[..response.headers.len().min(MAX_STORED_HEADERS)];
    part(&(headers.len() as u64).to_be_bytes());
    for (name, value) in headers {
        part(name.as_bytes());
        part(value.as_bytes());
    }
    match &response.body {
        StoredBody::NotKept => part(&[0]),
        StoredBody::Kept(body) => {
            part(&[1]);
            part(body);
        }
    }
    mac
}

impl fmt::Debug for RecordSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RecordSecrets({} × <redacted>)", self.keyed.len())
    }
}

impl PartialEq for RecordSecrets {
    /// Secrets compare by what they seal: the same secrets, in the same order, seal a probe
    /// answer alike. Nothing of a secret is exposed.
    fn eq(&self, other: &Self) -> bool {
        let probe = StoredResponse {
            status: 200,
            headers: Vec::new(),
            body: StoredBody::NotKept,
            seal: None,
        };
        let key = StorageKey([0; 32]);
        self.keyed.len() == other.keyed.len()
            && self.keyed.iter().zip(&other.keyed).all(|(a, b)| {
                mac(a, &key, &probe).finalize().into_bytes()
                    == mac(b, &key, &probe).finalize().into_bytes()
            })
    }
}

impl Eq for RecordSecrets {}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;
    use alloc::vec;

    const ONE: &[u8] = b"record-secret-one-0123456789abcdef";
    const TWO: &[u8] = b"record-secret-two-0123456789abcdef";

    fn secrets(list: &[&[u8]]) -> RecordSecrets {
        RecordSecrets::new(list).unwrap()
    }

    fn answer() -> StoredResponse {
        StoredResponse {
            status: 201,
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("location".into(), "/orders/7".into()),
            ],
            body: StoredBody::Kept(b"{\"id\":7}".to_vec()),
            seal: None,
        }
    }

    const KEY: StorageKey = StorageKey([5; 32]);

    #[test]
    fn a_sealed_answer_checks_under_its_key() {
        let s = secrets(&[ONE]);
        let sealed = s.seal(&KEY, answer());
        assert!(sealed.seal.is_some());
        assert_eq!(s.check(&KEY, &sealed), Ok(()));
    }

    #[test]
    fn an_unsealed_answer_is_refused() {
        assert_eq!(
            secrets(&[ONE]).check(&KEY, &answer()),
            Err(SealError::Missing)
        );
    }

    #[test]
    fn any_change_to_status_headers_body_or_key_breaks_the_seal() {
        let s = secrets(&[ONE]);
        let sealed = s.seal(&KEY, answer());
        let mut tampered: Vec<(StorageKey, StoredResponse)> = Vec::new();
        let mut status = sealed.clone();
        status.status = 200;
        tampered.push((KEY, status));
        let mut planted = sealed.clone();
        planted
            .headers
            .push(("access-control-allow-origin".into(), "*".into()));
        tampered.push((KEY, planted));
        let mut value = sealed.clone();
        value.headers[1].1 = String::from("https://evil.example/");
        tampered.push((KEY, value));
        let mut dropped = sealed.clone();
        dropped.headers.pop();
        tampered.push((KEY, dropped));
        let mut body = sealed.clone();
        body.body = StoredBody::Kept(b"{\"id\":8}".to_vec());
        tampered.push((KEY, body));
        let mut omitted = sealed.clone();
        omitted.body = StoredBody::NotKept;
        tampered.push((KEY, omitted));
        // The same answer, moved to another key.
        tampered.push((StorageKey([6; 32]), sealed.clone()));
        for (key, response) in &tampered {
            assert_eq!(
                s.check(key, response),
                Err(SealError::Mismatch),
                "{response:?}"
            );
        }
    }

    #[test]
    fn a_header_split_differently_is_another_answer() {
        // Length prefixes: "ab" + "c" and "a" + "bc" never share a MAC input.
        let s = secrets(&[ONE]);
        let mut one = answer();
        one.headers = vec![("ab".into(), "c".into())];
        let sealed = s.seal(&KEY, one);
        let mut other = sealed.clone();
        other.headers = vec![("a".into(), "bc".into())];
        assert_eq!(s.check(&KEY, &other), Err(SealError::Mismatch));
    }

    #[test]
    fn another_secret_does_not_check() {
        let sealed = secrets(&[ONE]).seal(&KEY, answer());
        assert_eq!(
            secrets(&[TWO]).check(&KEY, &sealed),
            Err(SealError::Mismatch)
        );
    }

    #[test]
    fn rotation_seals_with_the_first_secret_and_accepts_each() {
        let old = secrets(&[ONE]).seal(&KEY, answer());
        let rotating = secrets(&[TWO, ONE]);
        // Answers sealed before the rotation still replay ...
        assert_eq!(rotating.check(&KEY, &old), Ok(()));
        // ... new ones are sealed with the new secret, which alone will check them later.
        let new = rotating.seal(&KEY, answer());
        assert_ne!(new.seal, old.seal);
        assert_eq!(secrets(&[TWO]).check(&KEY, &new), Ok(()));
        assert_eq!(secrets(&[ONE]).check(&KEY, &new), Err(SealError::Mismatch));
    }

    #[test]
    fn secrets_are_refused_when_missing_short_or_too_many() {
        assert_eq!(RecordSecrets::new(&[]).err(), Some(SealError::NoSecret));
        assert_eq!(
            RecordSecrets::new(&[b"short"]).err(),
            Some(SealError::SecretTooShort { len: 5 })
        );
        assert_eq!(
            RecordSecrets::new(&[ONE; MAX_SECRETS + 1]).err(),
            Some(SealError::TooManySecrets {
                count: MAX_SECRETS + 1
            })
        );
    }

    fn read(state: &str, version: u64, seal: Option<Seal>) -> ReadState {
        ReadState {
            state: state.into(),
            version,
            seal,
        }
    }

    #[test]
    fn a_sealed_state_checks_under_its_key_and_nothing_else_does() {
        let s = secrets(&[ONE]);
        let seal = s.seal_state(&KEY, "paid", 1);
        assert_eq!(
            s.check_state(&KEY, &read("paid", 1, seal), "unpaid"),
            Ok(())
        );
        // Another state, version or key under the seal: a mismatch.
        for (key, planted) in [
            (KEY, read("cancelled", 1, seal)),
            (KEY, read("paid", 2, seal)),
            (StorageKey([6; 32]), read("paid", 1, seal)),
        ] {
            assert_eq!(
                s.check_state(&key, &planted, "unpaid"),
                Err(SealError::Mismatch),
                "{planted:?}"
            );
        }
        // Sealed with a secret the filter does not hold.
        let foreign = secrets(&[TWO]).seal_state(&KEY, "paid", 1);
        assert_eq!(
            s.check_state(&KEY, &read("paid", 1, foreign), "unpaid"),
            Err(SealError::Mismatch)
        );
        // Rotation: the old secret's seal still checks.
        assert_eq!(
            secrets(&[TWO, ONE]).check_state(&KEY, &read("paid", 1, seal), "unpaid"),
            Ok(())
        );
    }

    #[test]
    fn only_the_initial_state_at_version_zero_needs_no_seal() {
        let s = secrets(&[ONE]);
        assert_eq!(
            s.check_state(&KEY, &read("unpaid", 0, None), "unpaid"),
            Ok(())
        );
        // A planted state, or a record written before states were sealed: refused.
        for unsealed in [read("cancelled", 0, None), read("paid", 1, None)] {
            assert_eq!(
                s.check_state(&KEY, &unsealed, "unpaid"),
                Err(SealError::Missing),
                "{unsealed:?}"
            );
        }
    }

    #[test]
    fn secrets_compare_without_showing() {
        assert_eq!(secrets(&[ONE]), secrets(&[ONE]));
        assert_ne!(secrets(&[ONE]), secrets(&[TWO]));
        assert_ne!(secrets(&[ONE, TWO]), secrets(&[TWO, ONE]));
        let shown = alloc::format!("{:?}", secrets(&[ONE]));
        assert!(!shown.contains("record-secret"), "{shown}");
    }
}
