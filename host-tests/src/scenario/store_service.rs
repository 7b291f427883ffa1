//! An in-process model of the store service, for the remote store path: `POST /v1/op`
//! carrying the core's wire protocol (`idemgate_core::store::remote`), carried by the core's own
//! [`remote::Operation`] — the loop the real service runs, shares included — on an in-memory map:
//! one value per key, the value's expiry as the engine's TTL, decisions on the model's clock (the engine's: one clock for every Envoy that
//! shares the model, as Redis `TIME` is for the real service). Register the same `Arc` as a
//! cluster of two simulated Envoys to make them a fleet. Its answers are the real service's: 200
//! with an outcome (a batch of finishes: one per finish, each carried and logged as if alone),
//! 400 with `remote_bad_request` for a body it cannot read, 404 elsewhere.

use crate::envoy::world::lock;
use crate::envoy::{Answer, CalloutRequest, Clock, Outcome, Service};
use idemgate_core::client::scope::StorageKey;
use idemgate_core::record::Record;
use idemgate_core::store::remote::Resume;
use idemgate_core::store::remote::{
    self, client::PATH, Failure, LedgerOutcome, Need, Operation, OperationStep, Settlement,
    SettlementStep, StoredValue, ValueVersion, Write,
};
use idemgate_core::store::WriteOutcome;
use idemgate_core::time::UnixMillis;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Each key's value and when the engine drops it.
type Values = BTreeMap<[u8; 32], (Vec<u8>, UnixMillis)>;

/// The value under `key` at `now` (an expired one is gone, as in Redis).
fn read(values: &Values, key: &StorageKey, now: UnixMillis) -> Option<Vec<u8>> {
    values
        .get(key.as_bytes())
        .filter(|(_, expires_at)| now < *expires_at)
        .map(|(bytes, _)| bytes.clone())
}

/// Compare-and-set: `write` lands only if `key` holds `expect` (`None`: absent) at `now`.
fn cas(
    values: &mut Values,
    key: &StorageKey,
    expect: Option<ValueVersion>,
    write: Write,
    now: UnixMillis,
) -> WriteOutcome {
    let current = values
        .get(key.as_bytes())
        .filter(|(_, expires_at)| now < *expires_at);
    let holds = match (expect, current) {
        (None, None) => true,
        (Some(v), Some((bytes, _))) => bytes.starts_with(&v.0),
        _ => false,
    };
    if !holds {
        return WriteOutcome::Conflict;
    }
    match write {
        Write::Set { value, expires_at } => {
            values.insert(*key.as_bytes(), (value, expires_at));
        }
        Write::Delete => {
            values.remove(key.as_bytes());
        }
    }
    WriteOutcome::Written
}

#[derive(Debug)]
pub struct StoreService {
    clock: Clock,
    values: Mutex<Values>,
    /// Versions drawn so far (the real service draws random ones).
    versions: Mutex<u64>,
    /// Every operation decided, in order: (the request, the response).
    log: Mutex<Vec<(remote::Request, remote::Response)>>,
}

impl StoreService {
    /// A store deciding on `clock` (pass a simulated Envoy's clock, or one the fleet shares).
    pub fn new(clock: Clock) -> Self {
        StoreService {
            clock,
            values: Mutex::new(BTreeMap::new()),
            versions: Mutex::new(0),
            log: Mutex::new(Vec::new()),
        }
    }

    /// The record under `key`, as the engine holds it (expired ones included until overwritten).
    pub fn record(&self, key: &StorageKey) -> Option<Record> {
        let values = lock(&self.values);
        let (bytes, _) = values.get(key.as_bytes())?;
        StoredValue::decode(key, bytes).ok().map(|v| v.record)
    }

    fn fresh(&self) -> ValueVersion {
        let mut n = lock(&self.versions);
        *n += 1;
        let mut version = [0; 16];
        version[..8].copy_from_slice(&n.to_be_bytes());
        ValueVersion(version)
    }

    /// One operation carried to its end, as the service's `carry` does, on the model's map:
    /// every read and compare-and-set under one lock, so none is ever lost. A payer's ledger job
    /// is settled alone, as the service settles a batch (the lock makes every batch one job).
    fn carry(&self, request: remote::Request, now: UnixMillis) -> remote::Response {
        let mut values = lock(&self.values);
        let (mut exchange, mut need) = Operation::start(request);
        loop {
            let step = match need {
                Need::Ledger(job) => {
                    let mut settlement = Settlement::new(job);
                    let mut need = settlement.start();
                    let settled = loop {
                        let step = match need {
                            Need::Read { key } => {
                                let value = read(&values, &key, now);
                                settlement.read(now, value.as_deref(), self.fresh())
                            }
                            Need::Write {
                                key, expect, write, ..
                            } => settlement.written(cas(&mut values, &key, expect, write, now)),
                            Need::Ledger(_) => settlement.failed(Failure::Unavailable),
                        };
                        match step {
                            SettlementStep::Need(next) => need = next,
                            SettlementStep::Done(answers) => {
                                break answers
                                    .first()
                                    .copied()
                                    .unwrap_or(LedgerOutcome::Failed(Failure::Unavailable))
                            }
                        }
                    };
                    exchange.settled(settled)
                }
                Need::Read { key } => {
                    let value = read(&values, &key, now);
                    exchange.read(now, value.as_deref(), self.fresh())
                }
                Need::Write {
                    key, expect, write, ..
                } => exchange.written(cas(&mut values, &key, expect, write, now)),
            };
            match step {
                OperationStep::Need(next) => need = next,
                OperationStep::Done(response) => return response,
            }
        }
    }

    /// Every operation it decided, with its answer.
    pub fn log(&self) -> Vec<(remote::Request, remote::Response)> {
        lock(&self.log).clone()
    }

    /// One operation decided and logged.
    fn decide(&self, request: remote::Request, now: UnixMillis) -> remote::Response {
        let response = self.carry(request.clone(), now);
        lock(&self.log).push((request, response.clone()));
        response
    }

    fn answer(status: u16, body: Vec<u8>, content_type: &str) -> Outcome {
        let mut answer = Answer::new(status);
        answer
            .headers
            .push(("content-type".into(), content_type.as_bytes().to_vec()));
        answer.body = body;
        Outcome::Answer(answer)
    }
}

impl Service for StoreService {
    fn serve(&self, request: &CalloutRequest) -> Outcome {
        if request.method() != "POST" || request.path() != PATH {
            return Self::answer(404, b"not found\n".to_vec(), "text/plain");
        }
        let decoded = match remote::Incoming::decode(&request.body) {
            Ok(decoded) => decoded,
            Err(_) => {
                let failed = remote::Response::Failed(Failure::BadRequest).encode();
                return Self::answer(400, failed, remote::CONTENT_TYPE);
            }
        };
        let now = UnixMillis(self.clock.now_ms());
        // A batch of finishes: each carried as if it came alone, and logged so.
        let response = match decoded {
            remote::Incoming::One(one) => self.decide(*one, now),
            remote::Incoming::Finishes(finishes) => remote::Response::Finishes(
                finishes
                    .into_iter()
                    .map(|finish| self.decide(finish, now))
                    .collect(),
            ),
            _ => remote::Response::Failed(Failure::BadRequest),
        };
        Self::answer(
            response.http_status(),
            response.encode(),
            remote::CONTENT_TYPE,
        )
    }

    fn shared_state(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envoy::HeaderMap;
    use idemgate_core::client::scope::StorageKey;
    use idemgate_core::policy::Policy;
    use idemgate_core::record::{OwnerToken, StoredBody, StoredResponse};
    use idemgate_core::request::fingerprint::Fingerprint;
    use idemgate_core::store::remote::client;
    use idemgate_core::{ClaimOutcome, FinishOutcome};
    use std::time::Duration;

    fn post(worker: usize, body: Vec<u8>) -> CalloutRequest {
        let mut headers = HeaderMap::new();
        headers.add(":method", b"POST");
        headers.add(":path", PATH.as_bytes());
        headers.add(":authority", b"store");
        CalloutRequest {
            worker,
            token: 4,
            cluster: "store".into(),
            headers,
            body,
            trailers: HeaderMap::new(),
            timeout_ms: 500,
            sent_at_ms: 0,
            writes_before: 0,
        }
    }

    /// Sends `request` as worker `worker` would and decodes the answer as the filter does.
    fn call(store: &StoreService, worker: usize, request: &remote::Request) -> remote::Response {
        let Outcome::Answer(answer) = store.serve(&post(worker, request.encode())) else {
            panic!("the store model always answers")
        };
        client::answer(client::CalloutReply {
            status: Some(answer.status),
            body: &answer.body,
        })
        .unwrap()
    }

    #[test]
    fn a_fleet_sharing_the_model_claims_once_and_replays_the_stored_answer() {
        let clock = Clock::default();
        let store = StoreService::new(clock.clone());
        let policy = Policy::defaults();
        let key = StorageKey::from_stored([7; 32]);
        let claim = |owner: u8| {
            client::claim(
                key,
                Fingerprint([1; 32]),
                OwnerToken([owner; 16]),
                idemgate_core::client::payer::Payers::NONE,
                &policy,
            )
        };

        let first = call(&store, 0, &claim(1)).into_claim().unwrap();
        assert!(
            matches!(
                first,
                ClaimOutcome::Forward {
                    takeover: false,
                    ..
                }
            ),
            "{first:?}"
        );
        let second = call(&store, 1, &claim(2)).into_claim().unwrap();
        assert!(
            matches!(second, ClaimOutcome::Conflict { .. }),
            "{second:?}"
        );

        let stored = StoredResponse {
            status: 201,
            headers: vec![],
            body: StoredBody::Kept(br#"{"id":1}"#.to_vec()),
            seal: None,
        };
        let finish = |owner: u8| remote::Request::Finish {
            key,
            owner: OwnerToken([owner; 16]),
            ttl: policy.ttl,
            end: remote::End::Store(stored.clone()),
            shard: None,
        };
        // A stale owner cannot end the claim; its owner can.
        let stale = call(&store, 1, &finish(2)).into_finish().unwrap();
        assert_eq!(stale, FinishOutcome::NotOwner);
        let done = call(&store, 0, &finish(1)).into_finish().unwrap();
        assert!(!matches!(done, FinishOutcome::NotOwner), "{done:?}");

        clock.advance(Duration::from_secs(120));
        let replay = call(&store, 1, &claim(3)).into_claim().unwrap();
        assert_eq!(replay, ClaimOutcome::Replay(stored));
        assert_eq!(store.log().len(), 5);
    }

    #[test]
    fn a_body_it_cannot_read_is_a_400_the_filter_understands() {
        let store = StoreService::new(Clock::default());
        let Outcome::Answer(answer) = store.serve(&post(0, b"garbage".to_vec())) else {
            panic!("the store model always answers")
        };
        assert_eq!(answer.status, 400);
        let decoded = client::answer(client::CalloutReply {
            status: Some(400),
            body: &answer.body,
        })
        .unwrap();
        assert_eq!(decoded, remote::Response::Failed(Failure::BadRequest));
    }

    #[test]
    fn a_lost_reply_to_a_claim_still_claims() {
        use crate::envoy::callouts::{
            resolve, CalloutFault, ClusterPath, Delivery, Destination, PendingCallout,
        };
        let store = std::sync::Arc::new(StoreService::new(Clock::default()));
        let destination = Destination {
            service: store.clone(),
            path: ClusterPath::Direct,
        };
        let policy = Policy::defaults();
        let key = StorageKey::from_stored([9; 32]);
        let claim = |owner: u8| {
            client::claim(
                key,
                Fingerprint([1; 32]),
                OwnerToken([owner; 16]),
                idemgate_core::client::payer::Payers::NONE,
                &policy,
            )
        };
        for fault in [CalloutFault::ResetAfterHeaders, CalloutFault::Timeout] {
            let lost = PendingCallout {
                request: post(0, claim(1).encode()),
                fault: Some(fault),
                from_context: 2,
            };
            let resolved = resolve(Some(&destination), &lost);
            let (reached, delivery) = (resolved.reached, resolved.delivery);
            assert!(reached, "{fault:?}");
            assert!(
                delivery == Delivery::Failure || delivery.status() == Some(504),
                "{fault:?}: the filter gets no outcome"
            );
        }
        // The store acted on the first claim whose reply was lost: the key is held.
        assert!(matches!(store.record(&key), Some(Record::InFlight(_))));
        let other = call(&store, 1, &claim(2)).into_claim().unwrap();
        assert!(matches!(other, ClaimOutcome::Conflict { .. }), "{other:?}");
    }
}
