use super::*;
use idemgate_core::client::payer::Payers;
use idemgate_core::client::scope::StorageKey;
use idemgate_core::decision::ResponseFacts;
use idemgate_core::policy::Policy;
use idemgate_core::record::OwnerToken;
use idemgate_core::request::fingerprint::Fingerprint;
use idemgate_core::time::UnixMillis;
use idemgate_core::{ClaimOutcome, Protocol};
use std::collections::HashMap;

/// Envoy's `SharedData` semantics, with the global CAS counter settable.
#[derive(Default)]
struct EnvoyModel {
    map: HashMap<String, (Vec<u8>, u32)>,
    next_cas: u32,
}

impl EnvoyModel {
    fn next(&mut self) -> u32 {
        let cas = self.next_cas.max(1);
        self.next_cas = cas.wrapping_add(1);
        if self.next_cas == 0 {
            self.next_cas = 1;
        }
        cas
    }
}

impl SharedData for EnvoyModel {
    fn get(&mut self, key: &str) -> Result<Option<(Vec<u8>, u32)>, String> {
        Ok(self.map.get(key).cloned())
    }
    fn set(&mut self, key: &str, value: &[u8], cas: u32) -> Result<bool, String> {
        if let Some((_, current)) = self.map.get(key) {
            if cas != 0 && cas != *current {
                return Ok(false);
            }
        }
        let cas = self.next();
        self.map.insert(key.to_string(), (value.to_vec(), cas));
        Ok(true)
    }
}

fn bucket_with(key: u8, owner: u8) -> Vec<u8> {
    let policy = Policy::defaults();
    let claim = idemgate_core::decision::new_claim(
        Fingerprint([0; 32]),
        OwnerToken([owner; 16]),
        UnixMillis(1_000),
        &policy,
    );
    let mut bucket = Bucket::default();
    bucket.put(
        StorageKey::from_stored([key; 32]),
        idemgate_core::record::Record::InFlight(claim),
    );
    bucket.encode()
}

#[test]
fn create_is_insert_if_absent() {
    let mut store = SharedStore::new(EnvoyModel::default());
    assert_eq!(store.read("c").unwrap(), None);
    let a = bucket_with(1, 1);
    let b = bucket_with(1, 2);
    assert_eq!(
        store.write("c", &a, Expect::Absent),
        Ok(WriteOutcome::Written)
    );
    assert_eq!(
        store.write("c", &b, Expect::Absent),
        Ok(WriteOutcome::Conflict)
    );
    let snap = store.read("c").unwrap().unwrap();
    assert_eq!(snap.bytes, a);
    assert_eq!(
        store.write("c", &b, Expect::Version(snap.version + 1)),
        Ok(WriteOutcome::Conflict)
    );
    assert_eq!(
        store.write("c", &b, Expect::Version(snap.version)),
        Ok(WriteOutcome::Written)
    );
    assert!(store.write("c", &a, Expect::Version(0)).is_err());
}

#[test]
fn a_create_handed_u32_max_is_restamped() {
    let mut store = SharedStore::new(EnvoyModel {
        next_cas: u32::MAX,
        ..Default::default()
    });
    let a = bucket_with(1, 1);
    assert_eq!(
        store.write("c", &a, Expect::Absent),
        Ok(WriteOutcome::Written)
    );
    let (_, cas) = store.data.get("c").unwrap().unwrap();
    assert_ne!(cas, u32::MAX, "the entry must leave the creation CAS");
    // A second creator (who read "absent" earlier) now loses, as it must.
    assert_eq!(
        store.write("c", &bucket_with(1, 2), Expect::Absent),
        Ok(WriteOutcome::Conflict)
    );
    assert_eq!(store.read("c").unwrap().unwrap().bytes, a);
}

#[test]
fn a_creator_replaced_through_the_corner_reports_conflict() {
    // A creates at CAS u32::MAX; before A reads back, stale creator B replaces it (its CAS
    // matches). A must see its record gone and lose; B wins. Exactly one winner.
    let mut data = EnvoyModel {
        next_cas: u32::MAX,
        ..Default::default()
    };
    let a = bucket_with(1, 1);
    let b = bucket_with(1, 2);
    assert!(data.set("c", &a, CREATE_CAS).unwrap());
    assert!(
        data.set("c", &b, CREATE_CAS).unwrap(),
        "the corner: B's create matches A's CAS"
    );
    let mut store = SharedStore::new(data);
    // A's read-back (the tail of `create`).
    let (current, cas) = store.data.get("c").unwrap().unwrap();
    assert_ne!(cas, CREATE_CAS);
    assert!(!holds_records(&current, &a));
    assert!(holds_records(&current, &b));
}

/// Counts the host calls a store makes.
struct Counting {
    model: EnvoyModel,
    gets: usize,
}

impl SharedData for Counting {
    fn get(&mut self, key: &str) -> Result<Option<(Vec<u8>, u32)>, String> {
        self.gets += 1;
        self.model.get(key)
    }
    fn set(&mut self, key: &str, value: &[u8], cas: u32) -> Result<bool, String> {
        self.model.set(key, value, cas)
    }
}

#[test]
fn updates_read_back_only_while_cells_may_be_missing() {
    for (settle_updates, gets) in [(true, 1), (false, 0)] {
        let mut store = SharedStore {
            data: Counting {
                model: EnvoyModel::default(),
                gets: 0,
            },
            settle_updates,
        };
        assert!(store.data.set("c", &[], CREATE_CAS).unwrap());
        let (_, cas) = store.data.get("c").unwrap().unwrap();
        store.data.gets = 0;
        assert_eq!(
            store.write("c", &bucket_with(1, 1), Expect::Version(u64::from(cas))),
            Ok(WriteOutcome::Written)
        );
        assert_eq!(store.data.gets, gets, "settle_updates = {settle_updates}");
        // Creates always read back, whatever the setting.
        store.data.gets = 0;
        assert_eq!(
            store.write("d", &bucket_with(2, 1), Expect::Absent),
            Ok(WriteOutcome::Written)
        );
        assert_eq!(store.data.gets, 1);
    }
}

#[test]
fn a_later_writer_that_kept_our_record_is_not_a_lost_race() {
    let a = bucket_with(1, 1);
    let mut merged = Bucket::decode(&a).unwrap();
    let other = Bucket::decode(&bucket_with(2, 9)).unwrap();
    merged.entries.extend(other.entries);
    assert!(holds_records(&merged.encode(), &a));
    assert!(holds_records(&a, &a));
    assert!(!holds_records(b"garbage", &a));
}

#[test]
fn the_protocol_claims_once_over_the_model() {
    let policy = Policy::defaults();
    let mut store = SharedStore::new(EnvoyModel {
        next_cas: u32::MAX - 3,
        ..Default::default()
    });
    let mut protocol = Protocol {
        store: &mut store,
        policy: &policy,
    };
    let key = StorageKey::from_stored([7; 32]);
    let fp = Fingerprint([1; 32]);
    let now = UnixMillis(1_000);
    let mut forwarded = 0;
    for owner in 0..10u8 {
        if let ClaimOutcome::Forward { .. } = protocol
            .claim(key, fp, OwnerToken([owner; 16]), Payers::NONE, now)
            .unwrap()
        {
            forwarded += 1;
        }
    }
    assert_eq!(forwarded, 1);
    let facts = ResponseFacts::Upstream {
        status: 201,
        headers: vec![],
        body: Some(b"ok".to_vec()),
    };
    protocol
        .finish(key, OwnerToken([0; 16]), Some(facts), now)
        .unwrap();
    assert!(matches!(
        protocol
            .claim(key, fp, OwnerToken([42; 16]), Payers::NONE, now)
            .unwrap(),
        ClaimOutcome::Replay(_)
    ));
}
